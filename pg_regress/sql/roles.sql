-- Who may do what: a dashboard's role, given sync.allow_reading(), reads
-- the status and nothing else; a device gateway's role, given
-- sync.allow_gateway(), takes and acknowledges messages and files uploads
-- and nothing else; a role given nothing reads nothing; only the owner
-- hands either out.
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

-- A device gateway's role. It files as itself, or as the role the
-- senders' filing hook takes with SET LOCAL ROLE: here the one a setting
-- names. The gateway is a member of the clerk's role (NOINHERIT: it has
-- the clerk's rights only as the clerk), not of the stranger's. The clerk
-- and the stranger may write receipts (ON CONFLICT reads the key: SELECT
-- too), the gateway may not, but it may use schema shop, to call the
-- hook; a receipt says who wrote it.
CREATE ROLE magic_sync_gateway NOLOGIN NOINHERIT;
CREATE ROLE magic_sync_clerk NOLOGIN;
CREATE ROLE magic_sync_stranger NOLOGIN;
GRANT magic_sync_clerk TO magic_sync_gateway;
GRANT USAGE ON SCHEMA shop TO magic_sync_gateway;
CREATE TABLE shop.receipts (id uuid PRIMARY KEY, register_id uuid NOT NULL,
                            total_cents bigint NOT NULL,
                            written_by text NOT NULL DEFAULT current_user);
GRANT USAGE ON SCHEMA shop TO magic_sync_clerk, magic_sync_stranger;
GRANT SELECT, INSERT ON shop.receipts TO magic_sync_clerk, magic_sync_stranger;
SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id',
                          unmirrored => '{written_by}');
-- The hook runs as the caller, with the caller's search_path: it finds
-- shop.role_to_file_as unqualified.
CREATE FUNCTION shop.role_to_file_as() RETURNS text LANGUAGE sql AS $$
    SELECT current_setting('shop.files_as') $$;
CREATE FUNCTION shop.file_as(replica uuid, known jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SET LOCAL ROLE %I', role_to_file_as());
    IF current_setting('shop.refuse', true) = 'on' THEN
        RAISE EXCEPTION 'no receipts today';
    END IF;
    IF current_setting('shop.sets_path', true) = 'on' THEN
        SET search_path = public;
    END IF;
END $$;
SELECT sync.declare_senders(filing => 'shop.file_as');

-- Up messages written by hand (helpers/protobuf.sql): a receipt, in an Up
-- of protocol 1.
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/helpers/protobuf.sql
CREATE FUNCTION pg_temp.receipt(id text, total_cents bigint, upload bigint) RETURNS bytea
LANGUAGE sql AS $$
    SELECT pg_temp.number(1, 1)
        || pg_temp.bytes(7, pg_temp.text(1, 'receipts')
                            || pg_temp.text(2, jsonb_build_object('total_cents', total_cents::text)::text)
                            || pg_temp.text(3, id))
        || pg_temp.bytes(8, pg_temp.varint(upload)) $$;
SELECT pg_temp.receipt('00000000-0000-0000-0000-000000000101', 250, 1) AS by_the_clerk,
       pg_temp.receipt('00000000-0000-0000-0000-000000000102', 300, 2) AS by_a_stranger,
       pg_temp.receipt('00000000-0000-0000-0000-000000000103', 400, 3) AS refused,
       pg_temp.receipt('00000000-0000-0000-0000-000000000104', 500, 4) AS sets_path \gset

-- The gateway connects as itself (SET ROLE checks the session's user).
-- Before anything is granted, it may not take messages.
SET SESSION AUTHORIZATION magic_sync_gateway;
SELECT * FROM sync.next('00000000-0000-0000-0000-00000000000a');
RESET SESSION AUTHORIZATION;

-- The owner lets it take, acknowledge and file.
SELECT sync.allow_gateway('magic_sync_gateway');

SET SESSION AUTHORIZATION magic_sync_gateway;
SET search_path = shop, public;
-- It takes the register's next message, and acknowledges it.
SELECT length(message) > 0 AS took FROM sync.next('00000000-0000-0000-0000-00000000000a');
SELECT sync.ack('00000000-0000-0000-0000-00000000000a',
                (SELECT id FROM sync.next('00000000-0000-0000-0000-00000000000a'))) AS acknowledged;
SELECT count(*) >= 0 AS may_ack_and_take
FROM sync.ack_next('00000000-0000-0000-0000-00000000000a', 'no such message');
-- It files an upload: the filing hook takes the clerk's role, which the
-- gateway is a member of, and the receipt is written as the clerk. The
-- gateway is itself again afterwards.
SET shop.files_as = 'magic_sync_clerk';
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', :'by_the_clerk')->'rows' AS rows;
SELECT current_user, current_setting('role') AS role;
-- A role it is not a member of, the hook may not take: the upload is
-- answered all the same, its receipt kept in the inbox with why, nothing
-- lost.
SET shop.files_as = 'magic_sync_stranger';
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', :'by_a_stranger')->'rows' AS rows;
SELECT current_user, current_setting('role') AS role;
-- A hook that fails after it took the clerk's role: its savepoint is
-- undone, the role with it, and the receipt kept.
SET shop.files_as = 'magic_sync_clerk';
SET shop.refuse = 'on';
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', :'refused')->'rows' AS rows;
SELECT current_user, current_setting('role') AS role;
RESET shop.refuse;
-- A hook that sets the search_path for the session (a plain SET) fails:
-- the engine's statements run as the owner never take a search_path the
-- host's code chose. The receipt is kept; the session's search_path is as
-- it was.
SET shop.sets_path = 'on';
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', :'sets_path')->'rows' AS rows;
SELECT current_user, current_setting('search_path') AS search_path;
RESET shop.sets_path;
RESET shop.files_as;
-- And nothing else: not the engine's tables, not the host's, not the
-- status, not declaring, relaying or filing again, not the engine's own
-- functions (not even the one that writes rows as a role).
SELECT count(*) FROM sync.epochs;
SELECT count(*) FROM sync.outbox;
SELECT count(*) FROM sync.inbox;
SELECT count(*) FROM shop.receipts;
SELECT sync.overview();
SELECT sync.declare_table('shop.products', sync => 'broadcast');
SELECT sync.declare_senders();
CALL sync.relay(NULL);
SELECT sync.refile(true);
SELECT sync_internal.file_as('magic_sync_clerk'::regrole, 'public', 'SELECT 1', '[]', NULL, 'null', 'receipts');
SELECT sync_internal.is_transient('40001');
-- Nor may it hand its rights to another.
SELECT sync.allow_gateway('magic_sync_nobody');
RESET search_path;
RESET SESSION AUTHORIZATION;

-- As the owner sees it: the clerk's receipt, written as the clerk; the
-- stranger's kept, with why.
SELECT id, total_cents, written_by FROM shop.receipts ORDER BY id;
SELECT table_name, key, reason FROM sync.inbox ORDER BY key;

-- Leave the database as it was found.
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
DROP OWNED BY magic_sync_dashboard;
DROP ROLE magic_sync_dashboard;
DROP ROLE magic_sync_nobody;
DROP OWNED BY magic_sync_gateway;
DROP OWNED BY magic_sync_clerk;
DROP OWNED BY magic_sync_stranger;
DROP ROLE magic_sync_gateway;
DROP ROLE magic_sync_clerk;
DROP ROLE magic_sync_stranger;
