-- Every insert, update and delete of a declared table is noted in the
-- writing transaction; TRUNCATE is refused.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL);
CREATE TABLE shop.lines (order_id uuid, line integer, PRIMARY KEY (order_id, line));
SELECT sync.declare_table('shop.products', sync => 'broadcast');
SELECT sync.declare_table('shop.lines', sync => 'broadcast');

INSERT INTO shop.products VALUES
    ('00000000-0000-0000-0000-000000000001', 'Tea'),
    ('00000000-0000-0000-0000-000000000002', 'Coffee');
SELECT table_name, key, done FROM sync.notes ORDER BY id;

-- An update notes the row once; one that changes the key notes both keys.
UPDATE shop.products SET name = 'Green tea' WHERE name = 'Tea';
UPDATE shop.products SET id = '00000000-0000-0000-0000-000000000003'
 WHERE id = '00000000-0000-0000-0000-000000000002';
DELETE FROM shop.products WHERE name = 'Green tea';
SELECT table_name, key FROM sync.notes WHERE id > 2 ORDER BY id;

-- A key of several columns is its parts joined by a bar.
INSERT INTO shop.lines VALUES ('00000000-0000-0000-0000-00000000000a', 7);
SELECT table_name, key FROM sync.notes WHERE table_name = 'lines';

-- A rolled-back change leaves no note.
BEGIN;
INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000009', 'Cake');
ROLLBACK;
SELECT count(*) FROM sync.notes WHERE key = '00000000-0000-0000-0000-000000000009';

-- TRUNCATE would remove rows without a note.
TRUNCATE shop.products;
SELECT count(*) FROM shop.products;

-- Leave the database as it was found.
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
