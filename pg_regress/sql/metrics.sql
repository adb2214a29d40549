-- sync.metrics(): the overview's figures as OpenMetrics text, labelled by
-- state and by table, and by replica only when asked. The oldest note's
-- age is masked: it is the server's, now.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL);
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT sync.declare_table('shop.products', sync => 'broadcast');
INSERT INTO shop.registers (id) VALUES ('00000000-0000-0000-0000-00000000000a'),
                                       ('00000000-0000-0000-0000-00000000000b');

-- Before any pass: no replica is live yet, nothing waits.
SELECT regexp_replace(sync.metrics(), 'seconds [0-9.]+', 'seconds <age>') AS metrics;

-- After one pass, both registers have their snapshots on their way, and a
-- change waits to be planned.
CALL sync.relay(NULL);
INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000001', 'Tea');
SELECT regexp_replace(sync.metrics(), 'seconds [0-9.]+', 'seconds <age>') AS metrics;

-- By replica, when asked.
SELECT regexp_replace(sync.metrics(by_replica => true), 'seconds [0-9.]+', 'seconds <age>') AS metrics;

-- A label's value is escaped as OpenMetrics says.
SELECT sync_internal.metric_label(E'a"b\\c\nd') AS escaped;

DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
