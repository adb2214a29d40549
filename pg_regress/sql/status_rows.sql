-- The status reads of rows: sync.progress(), sync.row_progress() and
-- sync.explain(), in every row state and for every reason, and each refusal.
-- A replica's confirmation is written into sync.replicas by hand here
-- (applied_sequence = last_sequence): the end-to-end tests confirm for real.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.brands (id uuid PRIMARY KEY, name text NOT NULL,
                          archived boolean NOT NULL DEFAULT false);
CREATE VIEW shop.live_brands AS SELECT * FROM shop.brands WHERE NOT archived;
CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL,
                            brand_id uuid REFERENCES shop.brands);
CREATE TABLE shop.nutrition (product_id uuid PRIMARY KEY REFERENCES shop.products,
                             calories integer NOT NULL);
CREATE TABLE shop.orders (id uuid PRIMARY KEY, register_id uuid NOT NULL,
                          product_id uuid NOT NULL REFERENCES shop.products);
CREATE TABLE shop.receipts (id uuid PRIMARY KEY, register_id uuid NOT NULL,
                            total_cents bigint NOT NULL);
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT sync.declare_table('shop.brands', sync => 'broadcast', active => 'shop.live_brands');
SELECT sync.declare_table('shop.products');
SELECT sync.declare_table('shop.nutrition', sync => 'follows(product_id)');
SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)');
SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');

-- Registers a, b and c (which the relay will see live, then not).
INSERT INTO shop.registers VALUES ('00000000-0000-0000-0000-00000000000a', true),
                                  ('00000000-0000-0000-0000-00000000000b', true),
                                  ('00000000-0000-0000-0000-00000000000c', true);
-- Brand 1 is live, brand 2 archived (outside the view).
INSERT INTO shop.brands VALUES ('00000000-0000-0000-0000-0000000000b1', 'Acme', false),
                               ('00000000-0000-0000-0000-0000000000b2', 'Gone', true);
-- Products 1, 2, 4 are ordered; product 3 is not.
INSERT INTO shop.products VALUES
    ('00000000-0000-0000-0000-000000000001', 'Tea', '00000000-0000-0000-0000-0000000000b1'),
    ('00000000-0000-0000-0000-000000000002', 'Coffee', '00000000-0000-0000-0000-0000000000b1'),
    ('00000000-0000-0000-0000-000000000003', 'Cocoa', '00000000-0000-0000-0000-0000000000b1'),
    ('00000000-0000-0000-0000-000000000004', 'Mate', NULL);
INSERT INTO shop.nutrition VALUES ('00000000-0000-0000-0000-000000000001', 2);
INSERT INTO shop.orders VALUES
    ('00000000-0000-0000-0000-0000000000d1', '00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-000000000001'),
    ('00000000-0000-0000-0000-0000000000d2', '00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-000000000002'),
    ('00000000-0000-0000-0000-0000000000d3', '00000000-0000-0000-0000-00000000000b', '00000000-0000-0000-0000-000000000001'),
    ('00000000-0000-0000-0000-0000000000d4', '00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-000000000004');

-- Before any pass: the relay has seen no replica, so no scope has one.
SELECT sync.progress() - 'now' AS progress;

-- A pass sends a and b their snapshots; nothing is confirmed yet: every
-- row is on its way, and nothing counts as held.
-- Register c is then no longer live: no read counts it.
CALL sync.relay();
UPDATE shop.registers SET active = false WHERE id = '00000000-0000-0000-0000-00000000000c';
CALL sync.relay();
SELECT jsonb_pretty(sync.progress() - 'now') AS progress;
SELECT jsonb_pretty(sync.row_progress(NULL, 'products', '00000000-0000-0000-0000-000000000001') - 'now')
    AS row_progress;
SELECT jsonb_pretty(sync.explain('00000000-0000-0000-0000-00000000000b', 'orders',
                                 '00000000-0000-0000-0000-0000000000d3') - 'now') AS explain;

-- Register a confirms everything it was sent: it holds it.
UPDATE sync.replicas SET applied_epoch = epoch, applied_sequence = last_sequence
WHERE id = '00000000-0000-0000-0000-00000000000a';
SELECT jsonb_pretty(sync.progress('{"replicas": ["00000000-0000-0000-0000-00000000000a"]}') - 'now')
    AS progress;
SELECT jsonb_pretty(sync.row_progress(NULL, 'products', '00000000-0000-0000-0000-000000000001') - 'now')
    AS row_progress;

-- Why a row is there: its rule, a row that points at it, the row it follows.
SELECT jsonb_pretty(sync.explain('00000000-0000-0000-0000-00000000000a', 'orders',
                                 '00000000-0000-0000-0000-0000000000d1') - 'now') AS explain;
SELECT jsonb_pretty(sync.explain('00000000-0000-0000-0000-00000000000a', 'products',
                                 '00000000-0000-0000-0000-000000000001') - 'now') AS explain;
SELECT jsonb_pretty(sync.explain('00000000-0000-0000-0000-00000000000a', 'nutrition',
                                 '00000000-0000-0000-0000-000000000001') - 'now') AS explain;

-- Why one is not: no rule reaches it, it is outside the active view, there
-- is no such row, the replica is not live, or is no replica at all.
SELECT sync.explain('00000000-0000-0000-0000-00000000000a', 'products',
                    '00000000-0000-0000-0000-000000000003') -> 'kept_away' AS kept_away;
SELECT sync.explain('00000000-0000-0000-0000-00000000000b', 'orders',
                    '00000000-0000-0000-0000-0000000000d1') -> 'kept_away' AS kept_away;
SELECT sync.explain('00000000-0000-0000-0000-00000000000a', 'brands',
                    '00000000-0000-0000-0000-0000000000b2') -> 'kept_away' AS kept_away;
SELECT sync.explain('00000000-0000-0000-0000-00000000000a', 'orders',
                    '00000000-0000-0000-0000-0000000000ff') -> 'kept_away' AS kept_away;
SELECT sync.explain('00000000-0000-0000-0000-00000000000c', 'orders',
                    '00000000-0000-0000-0000-0000000000d1') - 'now' AS explain;
SELECT sync.explain('00000000-0000-0000-0000-0000000000ee', 'orders',
                    '00000000-0000-0000-0000-0000000000d1') - 'now' AS explain;

-- A change not planned yet: the row a holds is outdated (b, which has not
-- confirmed, still has it on its way). A new order is missing, with the
-- product it pulls in; an order given to b is leaving a (with the product
-- only it pulled in) and missing on b.
UPDATE shop.products SET name = 'Green tea' WHERE id = '00000000-0000-0000-0000-000000000001';
INSERT INTO shop.orders VALUES
    ('00000000-0000-0000-0000-0000000000d5', '00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-000000000003');
UPDATE shop.orders SET register_id = '00000000-0000-0000-0000-00000000000b'
WHERE id = '00000000-0000-0000-0000-0000000000d2';
SELECT jsonb_pretty(sync.row_progress(NULL, 'products', '00000000-0000-0000-0000-000000000001') - 'now')
    AS row_progress;
SELECT sync.row_progress(NULL, 'orders', '00000000-0000-0000-0000-0000000000d5') -> 'places' AS places;
SELECT sync.row_progress(NULL, 'products', '00000000-0000-0000-0000-000000000003') -> 'places' AS places;
SELECT sync.row_progress(NULL, 'orders', '00000000-0000-0000-0000-0000000000d2') -> 'places' AS places;
SELECT sync.row_progress(NULL, 'products', '00000000-0000-0000-0000-000000000002') -> 'places' AS places;

-- A row set aside, and the order that points at it: set aside on a (the
-- product too, which a holds), and explain names the row set aside and why.
INSERT INTO sync.quarantine (table_name, key, note, reason, since, retry_at)
VALUES ('products', '00000000-0000-0000-0000-000000000004', 0, 'no message can carry it',
        '2026-01-01 00:00:00+00', '2999-01-01 00:00:00+00');
SELECT sync.row_progress(NULL, 'orders', '00000000-0000-0000-0000-0000000000d4') -> 'places' AS places;
SELECT sync.row_progress(NULL, 'products', '00000000-0000-0000-0000-000000000004') -> 'places' AS places;
SELECT sync.explain('00000000-0000-0000-0000-00000000000a', 'orders',
                    '00000000-0000-0000-0000-0000000000d4') -> 'kept_away' AS kept_away;

-- A row the replica refused is set aside too, and explain says so.
UPDATE sync.held_recorded SET refused = 'CHECK (calories >= 0) failed', refused_by = sent,
                     refused_at = '2026-01-01 00:00:00+00', retry_at = '2999-01-01 00:00:00+00'
WHERE replica = '00000000-0000-0000-0000-00000000000a' AND table_name = 'nutrition';
SELECT sync.row_progress(NULL, 'nutrition', '00000000-0000-0000-0000-000000000001') -> 'places' AS places;
SELECT sync.explain('00000000-0000-0000-0000-00000000000a', 'nutrition',
                    '00000000-0000-0000-0000-000000000001') -> 'kept_away' AS kept_away;

-- Every state at once, per replica and table.
SELECT jsonb_pretty(sync.progress() - 'now') AS progress;

-- A pass plans the changes: what a lacked is on its way, what it should
-- not hold has its take-back on its way (still leaving until confirmed).
CALL sync.relay();
SELECT sync.row_progress(NULL, 'orders', '00000000-0000-0000-0000-0000000000d5') -> 'places' AS places;
SELECT sync.row_progress(NULL, 'orders', '00000000-0000-0000-0000-0000000000d2') -> 'places' AS places;
-- Once a confirms, a take-back is done: d2 concerns a no more.
UPDATE sync.replicas SET applied_epoch = epoch, applied_sequence = last_sequence
WHERE id = '00000000-0000-0000-0000-00000000000a';
SELECT sync.row_progress(NULL, 'orders', '00000000-0000-0000-0000-0000000000d2') -> 'places' AS places;
SELECT sync.row_progress(NULL, 'orders', '00000000-0000-0000-0000-0000000000d5') -> 'places' AS places;

-- The reads are STABLE, and inside one transaction answer from one moment.
SELECT proname, provolatile FROM pg_proc
WHERE proname IN ('progress', 'row_progress', 'explain')
  AND pronamespace = 'sync'::regnamespace ORDER BY proname;

-- Refusals: a table not declared, one that does not go down, a key that
-- does not parse, no table or no key, a scope of another shape.
SELECT sync.row_progress(NULL, 'nope', '1');
SELECT sync.row_progress(NULL, NULL, '00000000-0000-0000-0000-000000000001');
SELECT sync.row_progress(NULL, 'orders', NULL);
SELECT sync.row_progress(NULL, 'receipts', '00000000-0000-0000-0000-000000000001');
SELECT sync.row_progress(NULL, 'orders', 'not-a-uuid');
SELECT sync.row_progress(NULL, 'orders', '00000000-0000-0000-0000-000000000001|2');
SELECT sync.explain('00000000-0000-0000-0000-00000000000a', 'receipts', '00000000-0000-0000-0000-000000000001');
SELECT sync.explain('00000000-0000-0000-0000-00000000000a', 'orders', '42');
-- (The scope's own refusals come through the read's SQL: their message only.)
\set VERBOSITY terse
SELECT sync.progress('[1]');
SELECT sync.row_progress('{"replicas": ["x"]}', 'orders', '00000000-0000-0000-0000-0000000000d1');
-- Each refusal is invalid_parameter_value.
\set VERBOSITY sqlstate
SELECT sync.row_progress(NULL, 'receipts', '00000000-0000-0000-0000-000000000001');
SELECT sync.explain('00000000-0000-0000-0000-00000000000a', 'orders', '42');
SELECT sync.progress('[1]');
\set VERBOSITY default

-- Partitions: a row of another partition is kept away from a replica.
DELETE FROM sync.quarantine;
SELECT count(sync.undeclare_table(relation)) FROM (SELECT relation FROM sync.tables ORDER BY position DESC) AS t;
SET client_min_messages = warning;
DROP SCHEMA shop CASCADE;
RESET client_min_messages;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, company text NOT NULL);
CREATE TABLE shop.products (id uuid PRIMARY KEY, company text NOT NULL, name text NOT NULL);
SELECT sync.declare_replicas('shop.registers', partitioned_by => 'company');
SELECT sync.declare_table('shop.products', sync => 'broadcast');
INSERT INTO shop.registers VALUES ('00000000-0000-0000-0000-00000000000a', 'acme'),
                                  ('00000000-0000-0000-0000-00000000000b', 'globex');
INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000001', 'acme', 'Tea'),
                                 ('00000000-0000-0000-0000-000000000002', 'globex', 'Coffee');
CALL sync.relay();
SELECT jsonb_pretty(sync.progress('{"partition": "acme"}') - 'now') AS progress;
SELECT sync.explain('00000000-0000-0000-0000-00000000000a', 'products',
                    '00000000-0000-0000-0000-000000000002') -> 'kept_away' AS kept_away;
SELECT sync.row_progress('{"partition": "globex"}', 'products',
                         '00000000-0000-0000-0000-000000000002') -> 'places' AS places;

-- Leave the database as it was found.
SELECT count(sync.undeclare_table(relation)) FROM sync.tables;
SET client_min_messages = warning;
DROP SCHEMA shop CASCADE;
RESET client_min_messages;
DROP EXTENSION magic_sync;
