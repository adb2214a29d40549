-- Declaring where the replicas are and which tables travel, and every
-- refusal a declaration can meet in this version.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (
    id     uuid PRIMARY KEY,
    name   text NOT NULL,
    active boolean NOT NULL DEFAULT true
);
CREATE TABLE shop.products (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    price_cents bigint NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The replicas.
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT relation, id_column, live FROM sync.replica_source;
SELECT sync.declare_replicas('shop.missing');
SELECT sync.declare_replicas('shop.registers', id => 'missing');
SELECT sync.declare_replicas('shop.registers', id => 'name');
SELECT sync.declare_replicas('shop.registers', live => 'no_such_column');
SELECT sync.declare_replicas('shop.registers', partitioned_by => 'company_id');
-- A refused declaration leaves the last one standing.
SELECT relation, id_column, live FROM sync.replica_source;

-- A catalog table sent to every live replica.
SELECT sync.declare_table('shop.products', sync => 'broadcast');
SELECT name, relation, mirror, rule, key_columns, key_types, columns, column_types, position
  FROM sync.tables;
SELECT sync.triggers();
SELECT tgname FROM pg_trigger WHERE tgrelid = 'shop.products'::regclass ORDER BY tgname;
-- Declared again: the same declaration, the same triggers.
SELECT sync.declare_table('shop.products', sync => 'broadcast', key => '{id}');
SELECT count(*) FROM sync.tables;
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shop.products'::regclass;

-- Tables that cannot be declared.
SELECT sync.declare_table('shop.missing', sync => 'broadcast');
CREATE TABLE shop.loose (a integer);
SELECT sync.declare_table('shop.loose', sync => 'broadcast');
CREATE TABLE shop.notes (code text PRIMARY KEY);
SELECT sync.declare_table('shop.notes', sync => 'broadcast');
CREATE VIEW shop.cheap AS SELECT * FROM shop.products WHERE price_cents < 100;
SELECT sync.declare_table('shop.cheap', sync => 'broadcast');
SELECT sync.declare_table('shop.products', sync => 'broadcast', key => '{sku}');
SELECT sync.declare_table('shop.products', sync => 'broadcast', key => '{name}');
SELECT sync.declare_table('shop.products', sync => 'broadcast', name => 'sync_products');
CREATE TABLE shop.products_too (id uuid PRIMARY KEY);
SELECT sync.declare_table('shop.products_too', sync => 'broadcast', name => 'products');

-- Options this version refuses, each by name.
SELECT sync.declare_table('shop.products');
SELECT sync.declare_table('shop.products', mirror => 'mirrored');
SELECT sync.declare_table('shop.products', mirror => 'record');
SELECT sync.declare_table('shop.products', mirror => 'both');
SELECT sync.declare_table('shop.products', mirror => 'setting');
SELECT sync.declare_table('shop.products', sync => 'assigned(register_id)');
SELECT sync.declare_table('shop.products', sync => 'follows(product_id)');
SELECT sync.declare_table('shop.products', sync => 'broadcast', origin => 'register_id');
SELECT sync.declare_table('shop.products', sync => 'broadcast', version => 'updated_at');
SELECT sync.declare_table('shop.products', sync => 'broadcast', created => 'updated_at');
SELECT sync.declare_table('shop.products', sync => 'broadcast', desired => '{name}');
SELECT sync.declare_table('shop.products', sync => 'broadcast', apply => 'always');
SELECT sync.declare_table('shop.products', sync => 'broadcast', replica_owned => '{name}');
SELECT sync.declare_table('shop.products', sync => 'broadcast', active => 'shop.cheap');
SELECT sync.declare_table('shop.products', sync => 'broadcast', unmirrored => '{updated_at}');
-- Still the one declaration.
SELECT name, relation FROM sync.tables;

-- Leave the database as it was found.
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
