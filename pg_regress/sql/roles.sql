-- Who may do what: a dashboard's role, given sync.allow_reading(), reads
-- the status and nothing else; a role given nothing reads nothing; only the
-- owner hands the reads out.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL);
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT sync.declare_table('shop.products', sync => 'broadcast');
INSERT INTO shop.registers (id) VALUES ('00000000-0000-0000-0000-00000000000a');
INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000001', 'Tea');
CALL sync.relay(NULL);

CREATE ROLE magic_sync_dashboard NOLOGIN;
CREATE ROLE magic_sync_nobody NOLOGIN;
\set VERBOSITY terse

-- Before anything is granted, the dashboard reads nothing.
SET ROLE magic_sync_dashboard;
SELECT sync.overview();
RESET ROLE;

-- The owner lets it read.
SELECT sync.allow_reading('magic_sync_dashboard');

SET ROLE magic_sync_dashboard;
-- Every read answers, about the replicas the engine records.
SELECT (sync.overview())->'states' AS states;
SELECT (sync.listing(NULL, 'catching_up'))->'total' AS catching_up;
SELECT (sync.health())->'healthy' AS healthy;
SELECT jsonb_array_length((sync.progress())->'replicas') AS replicas;
SELECT (sync.row_progress(NULL, 'products', '00000000-0000-0000-0000-000000000001'))->'places'->0->>'state' AS state;
SELECT (sync.explain('00000000-0000-0000-0000-00000000000a', 'products',
                     '00000000-0000-0000-0000-000000000001'))->>'should' AS should;
SELECT sync.metrics() LIKE '%magic_sync_replicas{state="catching_up"} 1%' AS metrics;
-- And nothing else: not the epochs' secrets, not the messages, not the
-- engine's own functions, not the queue, not declaring, not relaying.
SELECT count(*) FROM sync.epochs;
SELECT count(*) FROM sync.outbox;
SELECT count(*) FROM sync.held;
SELECT * FROM sync_internal.replica_states(NULL);
SELECT * FROM sync.next('00000000-0000-0000-0000-00000000000a');
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', '\x'::bytea);
SELECT sync.declare_table('shop.products', sync => 'broadcast');
CALL sync.relay(NULL);
SELECT sync.start_relay();
-- Nor may it hand the reads to another.
SELECT sync.allow_reading('magic_sync_nobody');
RESET ROLE;

-- A role given nothing reads nothing.
SET ROLE magic_sync_nobody;
SELECT sync.health();
RESET ROLE;

-- Leave the database as it was found.
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
DROP OWNED BY magic_sync_dashboard;
DROP ROLE magic_sync_dashboard;
DROP ROLE magic_sync_nobody;
