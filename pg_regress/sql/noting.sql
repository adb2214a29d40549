-- Every change to a table that goes down is noted in the writing
-- transaction: its key, its partition, and what it pointed at before;
-- every change to a group; TRUNCATE is refused.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL, archived_at timestamptz);
CREATE TABLE shop.lines (order_id uuid, line integer, PRIMARY KEY (order_id, line));
SELECT sync.declare_table('shop.products', sync => 'broadcast', unmirrored => '{archived_at}');
SELECT sync.declare_table('shop.lines', sync => 'broadcast');

INSERT INTO shop.products VALUES
    ('00000000-0000-0000-0000-000000000001', 'Tea'),
    ('00000000-0000-0000-0000-000000000002', 'Coffee');
SELECT table_name, key, partition, parents_before FROM sync.notes ORDER BY id;

-- An update notes the row once; one that changes the key notes both keys.
TRUNCATE sync.notes;
UPDATE shop.products SET name = 'Green tea' WHERE name = 'Tea';
UPDATE shop.products SET id = '00000000-0000-0000-0000-000000000003'
 WHERE id = '00000000-0000-0000-0000-000000000002';
DELETE FROM shop.products WHERE name = 'Green tea';
SELECT table_name, key FROM sync.notes ORDER BY id;

-- An update that changes nothing, or only what does not travel, is not
-- noted.
TRUNCATE sync.notes;
UPDATE shop.products SET name = name;
UPDATE shop.products SET archived_at = now();
SELECT count(*) AS notes FROM sync.notes;

-- A key of several columns is its parts joined by a bar, in the
-- declaration's order.
INSERT INTO shop.lines VALUES ('00000000-0000-0000-0000-00000000000a', 7);
SELECT table_name, key FROM sync.notes WHERE table_name = 'lines';
SELECT sync.declare_table('shop.lines', sync => 'broadcast', key => '{line, order_id}');
UPDATE shop.lines SET line = 8;
SELECT table_name, key FROM sync.notes WHERE table_name = 'lines' ORDER BY id;

-- A rolled-back change leaves no note.
BEGIN;
INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000009', 'Cake');
ROLLBACK;
SELECT count(*) FROM sync.notes WHERE key = '00000000-0000-0000-0000-000000000009';

-- What a row pointed at before a change: the parents' keys, one per
-- reference (by foreign key name), NULL where it pointed at none.
CREATE TABLE shop.brands (id integer PRIMARY KEY);
CREATE TABLE shop.orders (
    id         uuid PRIMARY KEY,
    product_id uuid REFERENCES shop.products (id),
    brand_id   integer REFERENCES shop.brands (id),
    quantity   integer NOT NULL);
SELECT sync.declare_table('shop.brands');
SELECT sync.declare_table('shop.orders', sync => 'broadcast');
SELECT position, constraint_name, columns, parent FROM sync.table_references
 WHERE table_name = 'orders' ORDER BY position;
INSERT INTO shop.brands VALUES (1), (2);
INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000004', 'Milk');
TRUNCATE sync.notes;
INSERT INTO shop.orders VALUES
    ('00000000-0000-0000-0000-0000000000f1', '00000000-0000-0000-0000-000000000003', 1, 1);
UPDATE shop.orders SET product_id = '00000000-0000-0000-0000-000000000004', brand_id = NULL;
UPDATE shop.orders SET quantity = 2, brand_id = 2;
DELETE FROM shop.orders;
SELECT table_name, key, parents_before FROM sync.notes ORDER BY id;

-- A table written on both sides: a change to only the columns replicas own
-- is not noted.
CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.register_state (
    id uuid PRIMARY KEY REFERENCES shop.registers (id), label text NOT NULL, battery integer);
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT sync.declare_table('shop.register_state', mirror => 'both', sync => 'assigned(id)',
                          replica_owned => '{battery}');
INSERT INTO shop.registers VALUES ('00000000-0000-0000-0000-00000000000a');
INSERT INTO shop.register_state VALUES ('00000000-0000-0000-0000-00000000000a', 'Front', NULL);
TRUNCATE sync.notes;
UPDATE shop.register_state SET battery = 80;
SELECT count(*) AS notes FROM sync.notes;
UPDATE shop.register_state SET battery = 70, label = 'Front desk';
SELECT table_name, key FROM sync.notes;

-- Tables that go up are not noted.
CREATE TABLE shop.receipts (id uuid PRIMARY KEY, register_id uuid NOT NULL);
SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
TRUNCATE sync.notes;
INSERT INTO shop.receipts VALUES ('00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-00000000000a');
SELECT count(*) AS notes FROM sync.notes;

-- Groups: a member joining, moving and leaving a group; a group given to a
-- replica and taken back. An update that moves nothing is not noted.
CREATE TABLE shop.customers (id uuid PRIMARY KEY, name text NOT NULL);
CREATE TABLE shop.lists (id uuid PRIMARY KEY);
CREATE TABLE shop.list_members (
    list_id uuid REFERENCES shop.lists (id), customer_id uuid REFERENCES shop.customers (id),
    since date, PRIMARY KEY (list_id, customer_id));
CREATE TABLE shop.register_lists (
    list_id uuid REFERENCES shop.lists (id), register_id uuid REFERENCES shop.registers (id),
    PRIMARY KEY (list_id, register_id));
SELECT sync.declare_table('shop.customers',
                          sync => 'grouped(members => list_members, assigned => register_lists)');
INSERT INTO shop.lists VALUES ('00000000-0000-0000-0000-0000000000b1'), ('00000000-0000-0000-0000-0000000000b2');
INSERT INTO shop.customers VALUES ('00000000-0000-0000-0000-0000000000c1', 'Ann');
TRUNCATE sync.notes, sync.group_notes;
INSERT INTO shop.list_members VALUES
    ('00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-0000000000c1');
UPDATE shop.list_members SET since = '2026-01-01';
UPDATE shop.list_members SET list_id = '00000000-0000-0000-0000-0000000000b2';
INSERT INTO shop.register_lists VALUES
    ('00000000-0000-0000-0000-0000000000b2', '00000000-0000-0000-0000-00000000000a');
DELETE FROM shop.register_lists;
DELETE FROM shop.list_members;
SELECT table_name, group_key, key, replica FROM sync.group_notes ORDER BY id;
-- Group notes and row notes are numbered from one sequence, in the order
-- they are written.
INSERT INTO shop.customers VALUES ('00000000-0000-0000-0000-0000000000c2', 'Bob');
INSERT INTO shop.list_members VALUES
    ('00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-0000000000c2');
SELECT (SELECT max(id) FROM sync.group_notes) = (SELECT max(id) FROM sync.notes) + 1 AS one_sequence;

-- TRUNCATE would remove rows without a note: refused on declared tables
-- and group tables alike.
TRUNCATE shop.orders;
TRUNCATE shop.list_members;
TRUNCATE shop.register_lists;

-- Partitions: a note says the row's partition; a row that moves is noted
-- in the partition it left too.
SELECT count(sync.undeclare_table(relation)) FROM (SELECT relation FROM sync.tables ORDER BY position DESC) AS t;
CREATE TABLE shop.companies_registers (id uuid PRIMARY KEY, company_id integer NOT NULL);
CREATE TABLE shop.stock (id uuid PRIMARY KEY, company_id integer NOT NULL, amount integer NOT NULL);
SELECT sync.declare_replicas('shop.companies_registers', partitioned_by => 'company_id');
SELECT sync.declare_table('shop.stock', sync => 'broadcast');
TRUNCATE sync.notes;
INSERT INTO shop.stock VALUES ('00000000-0000-0000-0000-0000000000d1', 1, 10);
UPDATE shop.stock SET amount = 11;
UPDATE shop.stock SET company_id = 2;
DELETE FROM shop.stock;
SELECT table_name, key, partition FROM sync.notes ORDER BY id;

-- A partitioned table is noted under its own name, whichever partition a
-- row is in.
CREATE TABLE shop.events (id integer, company_id integer NOT NULL, PRIMARY KEY (id, company_id))
    PARTITION BY LIST (company_id);
CREATE TABLE shop.events_1 PARTITION OF shop.events FOR VALUES IN (1);
CREATE TABLE shop.events_2 PARTITION OF shop.events FOR VALUES IN (2);
SELECT sync.declare_table('shop.events', sync => 'broadcast');
TRUNCATE sync.notes;
INSERT INTO shop.events VALUES (1, 1), (2, 2);
UPDATE shop.events SET company_id = 2 WHERE id = 1;
SELECT table_name, key, partition FROM sync.notes ORDER BY id;

-- A session in replica mode (a subscription applying changes, a restore)
-- fires no trigger as written: enable them ALWAYS to note what it writes.
-- The relay's check takes ALWAYS, and refuses a trigger for replica
-- sessions only.
TRUNCATE sync.notes;
SET session_replication_role = replica;
INSERT INTO shop.stock VALUES ('00000000-0000-0000-0000-0000000000d2', 1, 5);
RESET session_replication_role;
SELECT count(*) AS notes FROM sync.notes;
ALTER TABLE shop.stock ENABLE ALWAYS TRIGGER sync_note_row;
SET session_replication_role = replica;
INSERT INTO shop.stock VALUES ('00000000-0000-0000-0000-0000000000d3', 1, 5);
RESET session_replication_role;
SELECT key FROM sync.notes;
SELECT * FROM sync.check();
ALTER TABLE shop.stock ENABLE REPLICA TRIGGER sync_note_row;
SELECT * FROM sync.check();
ALTER TABLE shop.stock ENABLE TRIGGER sync_note_row;

-- The trigger functions run only as the engine writes them.
SELECT sync.note_row();
CREATE TABLE shop.odd (id integer PRIMARY KEY);
CREATE TRIGGER odd_note BEFORE INSERT ON shop.odd FOR EACH ROW EXECUTE FUNCTION sync.note_row('odd', '', '1', 'id', '0', '0');
INSERT INTO shop.odd VALUES (1);
DROP TRIGGER odd_note ON shop.odd;
CREATE TRIGGER odd_note AFTER INSERT ON shop.odd FOR EACH ROW EXECUTE FUNCTION sync.note_row('odd', '', '1');
INSERT INTO shop.odd VALUES (1);

-- The extension made again in the same session: notes go to its new
-- tables.
SET client_min_messages = warning;
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
RESET client_min_messages;
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.products (id integer PRIMARY KEY);
SELECT sync.declare_table('shop.products', sync => 'broadcast');
INSERT INTO shop.products VALUES (42);
SELECT table_name, key FROM sync.notes;

-- Leave the database as it was found.
SET client_min_messages = warning;
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
