-- The relay's check before a pass, as sync.check() answers it: every way
-- the database can differ from the declarations, each with its fix.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL, price_cents bigint NOT NULL);
CREATE TABLE shop.orders (
    id          uuid PRIMARY KEY,
    register_id uuid NOT NULL,
    product_id  uuid REFERENCES shop.products (id),
    note        text);
CREATE TABLE shop.customers (id uuid PRIMARY KEY, name text NOT NULL);
CREATE TABLE shop.lists (id uuid PRIMARY KEY);
CREATE TABLE shop.list_members (
    list_id uuid REFERENCES shop.lists (id), customer_id uuid REFERENCES shop.customers (id),
    PRIMARY KEY (list_id, customer_id));
CREATE TABLE shop.register_lists (
    list_id uuid REFERENCES shop.lists (id), register_id uuid REFERENCES shop.registers (id),
    PRIMARY KEY (list_id, register_id));
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT sync.declare_table('shop.products', sync => 'broadcast');
SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)', unmirrored => '{note}');
SELECT sync.declare_table('shop.customers',
                          sync => 'grouped(members => list_members, assigned => register_lists)');
-- As declared: nothing to say.
SELECT * FROM sync.check();

-- A migration changed the tables after they were declared: every
-- difference is named, and the call that declares the table again given.
ALTER TABLE shop.products ADD COLUMN sku text;
ALTER TABLE shop.products ALTER COLUMN price_cents TYPE numeric;
ALTER TABLE shop.products ALTER COLUMN name DROP NOT NULL;
ALTER TABLE shop.orders DROP CONSTRAINT orders_product_id_fkey;
-- A column that does not travel may change as it likes.
ALTER TABLE shop.orders ALTER COLUMN note TYPE varchar(200);
\x on
SELECT * FROM sync.check();
\x off
-- Declared again, in the same migration: as declared.
SELECT sync.declare_table('shop.products', sync => 'broadcast');
SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)', unmirrored => '{note}');
SELECT * FROM sync.check();

-- A column an option names, dropped: the declaration no longer resolves.
ALTER TABLE shop.orders DROP COLUMN note;
ALTER TABLE shop.products DROP CONSTRAINT products_pkey;
\x on
SELECT * FROM sync.check();
\x off
ALTER TABLE shop.products ADD PRIMARY KEY (id);
ALTER TABLE shop.orders ADD COLUMN note text;
SELECT * FROM sync.check();

-- Triggers: missing, disabled, firing only for replica sessions, written
-- otherwise; the engine's trigger left on a table no declaration names.
DROP TRIGGER sync_refuse_truncate ON shop.products;
ALTER TABLE shop.orders DISABLE TRIGGER sync_note_row;
ALTER TABLE shop.list_members ENABLE REPLICA TRIGGER sync_note_group;
DROP TRIGGER sync_note_row ON shop.customers;
CREATE TRIGGER sync_note_row AFTER INSERT OR UPDATE ON shop.customers
    FOR EACH ROW EXECUTE FUNCTION sync.note_row('customers', '', '1', 'id', '0', '0');
DROP TRIGGER sync_note_group ON shop.register_lists;
CREATE TRIGGER sync_note_group AFTER INSERT OR UPDATE OR DELETE ON shop.register_lists
    FOR EACH ROW EXECUTE FUNCTION sync.note_group('assigned', 'register_id', '1', 'list_id', '1', 'clients');
CREATE TABLE shop.old_prices (id uuid PRIMARY KEY);
CREATE TRIGGER sync_note_row AFTER INSERT OR UPDATE OR DELETE ON shop.old_prices
    FOR EACH ROW EXECUTE FUNCTION sync.note_row('old_prices', '', '1', 'id', '0', '0');
CREATE TRIGGER also_notes AFTER INSERT ON shop.products
    FOR EACH ROW WHEN (true) EXECUTE FUNCTION sync.note_row('products', '', '1', 'id', '0', '0');
\x on
SELECT * FROM sync.check();
\x off
-- Declaring again writes every trigger the engine looks after as it
-- should be; the ones on tables no declaration names stay the user's.
SELECT sync.declare_table('shop.products', sync => 'broadcast');
SELECT * FROM sync.check();
DROP TABLE shop.old_prices;
SELECT * FROM sync.check();

-- Indexes: a lookup no index serves; one that leads with the columns in
-- another order serves.
DROP INDEX shop.list_members_customer_id_idx;
DROP INDEX shop.orders_register_id_idx;
CREATE INDEX orders_partial ON shop.orders (register_id) WHERE note IS NULL;
SELECT * FROM sync.check();
SELECT * FROM sync.indexes();
CREATE INDEX members_by_customer ON shop.list_members (customer_id, list_id);
CREATE INDEX orders_by_register ON shop.orders (register_id, id);
SELECT * FROM sync.check();

-- The replicas' relation gone.
ALTER TABLE shop.register_lists DROP CONSTRAINT register_lists_register_id_fkey;
ALTER TABLE shop.registers RENAME TO tills;
SELECT * FROM sync.check();
ALTER TABLE shop.tills RENAME TO registers;
SELECT * FROM sync.check();

-- Leave the database as it was found.
SET client_min_messages = warning;
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
