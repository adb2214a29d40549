-- Declaring where the replicas are and which tables travel and how: every
-- option, and every refusal with its message.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (
    id         uuid PRIMARY KEY,
    name       text NOT NULL,
    company_id uuid NOT NULL,
    active     boolean NOT NULL DEFAULT true
);
CREATE TABLE shop.products (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    price_cents bigint NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The replicas.
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT relation, id_column, live, partition_column FROM sync.replica_source;
SELECT sync.declare_replicas('shop.missing');
SELECT sync.declare_replicas('shop.registers', id => 'missing');
SELECT sync.declare_replicas('shop.registers', id => 'name');
SELECT sync.declare_replicas('shop.registers', live => 'no_such_column');
SELECT sync.declare_replicas('shop.registers', partitioned_by => 'region');
-- A refused declaration leaves the last one standing.
SELECT relation, id_column, live, partition_column FROM sync.replica_source;

-- A catalog sent to every live replica.
SELECT sync.declare_table('shop.products', sync => 'broadcast');
SELECT name, relation, mirror, rule, rule_columns, key_columns, key_types, columns, column_types,
       partition_column, install, indexes, table_columns, table_types, table_not_null, position
  FROM sync.tables;
SELECT sync.triggers();
SELECT tgname FROM pg_trigger WHERE tgrelid = 'shop.products'::regclass AND NOT tgisinternal ORDER BY tgname;
SELECT * FROM sync.check();
-- Declared again: the same declaration, the same triggers, the same digest.
SELECT sync.declarations_digest() AS digest \gset
SELECT sync.declare_table('shop.products', sync => 'broadcast', key => '{id}');
SELECT count(*) FROM sync.tables;
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shop.products'::regclass AND NOT tgisinternal;
SELECT sync.declarations_digest() = :'digest' AS same_digest;

-- Tables that cannot be declared.
SELECT sync.declare_table('shop.missing', sync => 'broadcast');
SELECT sync.declare_table('not a name(', sync => 'broadcast');
CREATE TABLE shop.loose (a integer);
SELECT sync.declare_table('shop.loose', sync => 'broadcast');
CREATE TABLE shop.codes (code text PRIMARY KEY);
SELECT sync.declare_table('shop.codes', sync => 'broadcast');
CREATE VIEW shop.cheap AS SELECT * FROM shop.products WHERE price_cents < 100;
SELECT sync.declare_table('shop.cheap', sync => 'broadcast');
SELECT sync.declare_table('shop.products', sync => 'broadcast', key => '{sku}');
SELECT sync.declare_table('shop.products', sync => 'broadcast', key => '{name}');
SELECT sync.declare_table('shop.products', sync => 'broadcast', name => 'sync_products');
CREATE TABLE shop.products_too (id uuid PRIMARY KEY);
SELECT sync.declare_table('shop.products_too', sync => 'broadcast', name => 'products');
SELECT sync.declare_table('shop.products', mirror => 'mirrored');
-- Still the one declaration.
SELECT name, relation FROM sync.tables;

-- Sync rules.
SELECT sync.declare_table('shop.products', sync => 'everywhere');
SELECT sync.declare_table('shop.products', sync => 'assigned(a, b)');
SELECT sync.declare_table('shop.products', sync => 'grouped(members => m)');
-- A catalog without a rule reaches replicas only as a parent.
CREATE TABLE shop.brands (id integer PRIMARY KEY, name text NOT NULL);
SELECT sync.declare_table('shop.brands');
SELECT name, rule FROM sync.tables WHERE name = 'brands';

-- assigned(column): the column holds the replica's id.
CREATE TABLE shop.orders (
    id          uuid PRIMARY KEY,
    register_id uuid REFERENCES shop.registers (id),
    product_id  uuid NOT NULL REFERENCES shop.products (id),
    quantity    integer NOT NULL
);
SELECT sync.declare_table('shop.orders', sync => 'assigned(register)');
SELECT sync.declare_table('shop.orders', sync => 'assigned(quantity)');
SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)');
SELECT name, rule, rule_columns FROM sync.tables WHERE name = 'orders';
-- Its foreign key to products, a declared table, is a reference; the one
-- to the replicas is not.
SELECT table_name, position, constraint_name, columns, parent, parent_columns, parent_key_types
  FROM sync.table_references ORDER BY table_name, position;
-- The lookups the planner makes got their indexes.
SELECT indexdef FROM pg_indexes WHERE schemaname = 'shop' AND tablename = 'orders' ORDER BY indexname;

-- follows(column): wherever the row it points at goes.
CREATE TABLE shop.nutrition (
    product_id uuid PRIMARY KEY REFERENCES shop.products (id),
    calories   integer NOT NULL
);
SELECT sync.declare_table('shop.nutrition', key => '{product_id}', sync => 'follows(product_id)');
SELECT sync.declare_table('shop.nutrition', sync => 'follows(calories)');
SELECT sync.declare_table('shop.nutrition', sync => 'follows(sugar)');
CREATE TABLE shop.offers (id uuid PRIMARY KEY, product_id uuid NOT NULL REFERENCES shop.products_too (id));
SELECT sync.declare_table('shop.offers', sync => 'follows(product_id)');
CREATE TABLE shop.tree (id integer PRIMARY KEY, parent_id integer REFERENCES shop.tree (id));
SELECT sync.declare_table('shop.tree', sync => 'follows(parent_id)');
-- A table may point at itself; it is its own reference.
SELECT sync.declare_table('shop.tree', sync => 'broadcast');
SELECT table_name, columns, parent FROM sync.table_references WHERE table_name = 'tree';

-- grouped(members => ..., assigned => ...): a customer goes to every
-- register given a list it is on.
CREATE TABLE shop.customers (id uuid PRIMARY KEY, name text NOT NULL);
CREATE TABLE shop.lists (id uuid PRIMARY KEY);
CREATE TABLE shop.list_members (
    list_id     uuid REFERENCES shop.lists (id),
    customer_id uuid REFERENCES shop.customers (id),
    PRIMARY KEY (list_id, customer_id));
CREATE TABLE shop.register_lists (
    list_id     uuid REFERENCES shop.lists (id),
    register_id uuid REFERENCES shop.registers (id),
    PRIMARY KEY (list_id, register_id));
SELECT sync.declare_table('shop.customers', sync => 'grouped(members => missing, assigned => register_lists)');
SELECT sync.declare_table('shop.customers', sync => 'grouped(members => register_lists, assigned => register_lists)');
SELECT sync.declare_table('shop.customers', sync => 'grouped(members => shop.lists, assigned => register_lists)');
CREATE TABLE shop.loose_lists (list_id uuid, register_id uuid);
SELECT sync.declare_table('shop.customers', sync => 'grouped(members => list_members, assigned => loose_lists)');
SELECT sync.declare_table('shop.customers', sync => 'grouped(members => list_members, assigned => register_lists(list_id))');
SELECT sync.declare_table('shop.customers', sync => 'grouped(members = list_members, assigned = register_lists)');
SELECT * FROM sync.groups;
SELECT tgrelid::regclass, tgname FROM pg_trigger
 WHERE NOT tgisinternal AND tgrelid IN ('shop.list_members'::regclass, 'shop.register_lists'::regclass) ORDER BY 1, 2;
SELECT indexdef FROM pg_indexes
 WHERE schemaname = 'shop' AND tablename IN ('list_members', 'register_lists') ORDER BY indexname;
-- Assignments whose column of replica ids cannot be told name it.
CREATE TABLE shop.tills (id uuid PRIMARY KEY, owner uuid NOT NULL);
CREATE TABLE shop.till_lists (
    list_id uuid REFERENCES shop.lists (id), till uuid REFERENCES shop.tills (id), other uuid,
    PRIMARY KEY (list_id, till));
CREATE TABLE shop.vips (id uuid PRIMARY KEY);
CREATE TABLE shop.vip_members (list_id uuid REFERENCES shop.lists (id), vip_id uuid REFERENCES shop.vips (id));
SELECT sync.declare_table('shop.vips', sync => 'grouped(members => vip_members, assigned => till_lists)');
SELECT sync.declare_table('shop.vips', sync => 'grouped(members => vip_members, assigned => till_lists(till))');
SELECT assigned, assigned_replica FROM sync.groups WHERE table_name = 'vips';
-- A members table serves one grouped table.
CREATE TABLE shop.more_customers (id uuid PRIMARY KEY);
ALTER TABLE shop.list_members ADD COLUMN more_id uuid REFERENCES shop.more_customers (id);
SELECT sync.declare_table('shop.more_customers', sync => 'grouped(members => list_members, assigned => register_lists)');
ALTER TABLE shop.list_members DROP COLUMN more_id;
DROP TABLE shop.more_customers;

-- A key of several columns, in the order the declaration gives.
CREATE TABLE shop.lines (
    order_id uuid REFERENCES shop.orders (id),
    line     smallint,
    text     text NOT NULL,
    PRIMARY KEY (order_id, line));
SELECT sync.declare_table('shop.lines', key => '{line,order_id}', sync => 'follows(order_id)');
SELECT key_columns, key_types, rule_columns FROM sync.tables WHERE name = 'lines';

-- Parents before children, from the foreign keys, whatever the order of
-- declaration: lines came after orders, orders after products.
SELECT name, position FROM sync.tables ORDER BY position;
-- A cycle between declared tables is refused, naming them.
CREATE TABLE shop.eggs (id integer PRIMARY KEY, hen_id integer);
CREATE TABLE shop.hens (id integer PRIMARY KEY, egg_id integer REFERENCES shop.eggs (id));
ALTER TABLE shop.eggs ADD FOREIGN KEY (hen_id) REFERENCES shop.hens (id);
SELECT sync.declare_table('shop.eggs', sync => 'broadcast');
SELECT sync.declare_table('shop.hens', sync => 'broadcast');
SELECT sync.undeclare_table('shop.eggs');
DROP TABLE shop.hens, shop.eggs;
-- A foreign key to a declared table by other columns than its key is
-- refused.
CREATE TABLE shop.named (id uuid PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE shop.by_name (id uuid PRIMARY KEY, named text REFERENCES shop.named (name));
SELECT sync.declare_table('shop.by_name', sync => 'broadcast');
SELECT sync.declare_table('shop.named', sync => 'broadcast');
SELECT sync.undeclare_table('shop.by_name');
SELECT sync.undeclare_table('shop.by_name');

-- unmirrored: columns that do not travel; active: the rows that travel for
-- their own sake.
CREATE TABLE shop.catalogue (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    archived_at timestamptz);
CREATE VIEW shop.live_catalogue AS SELECT * FROM shop.catalogue WHERE archived_at IS NULL;
CREATE VIEW shop.keyless AS SELECT name FROM shop.catalogue;
CREATE VIEW shop.texts AS SELECT id::text AS id FROM shop.catalogue;
SELECT sync.declare_table('shop.catalogue', sync => 'broadcast', active => 'shop.no_view');
SELECT sync.declare_table('shop.catalogue', sync => 'broadcast', active => 'shop.keyless');
SELECT sync.declare_table('shop.catalogue', sync => 'broadcast', active => 'shop.texts');
SELECT sync.declare_table('shop.catalogue', sync => 'broadcast', unmirrored => '{id}');
SELECT sync.declare_table('shop.catalogue', sync => 'broadcast', unmirrored => '{archived}');
SELECT sync.declare_table('shop.catalogue', sync => 'broadcast',
                          active => 'shop.live_catalogue', unmirrored => '{archived_at}');
SELECT columns, column_types, unmirrored, active, table_columns FROM sync.tables WHERE name = 'catalogue';
SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)', unmirrored => '{product_id}');

-- A table written on both sides: the columns replicas own.
CREATE TABLE shop.register_state (
    id         uuid PRIMARY KEY REFERENCES shop.registers (id),
    label      text NOT NULL,
    battery    integer,
    updated_at timestamptz NOT NULL DEFAULT now());
SELECT sync.declare_table('shop.register_state', mirror => 'both', sync => 'assigned(id)');
SELECT sync.declare_table('shop.register_state', mirror => 'both', sync => 'assigned(id)',
                          replica_owned => '{id, charge}');
SELECT sync.declare_table('shop.register_state', mirror => 'both', sync => 'assigned(id)',
                          replica_owned => '{battery}', version => 'updated_at');
SELECT sync.declare_table('shop.register_state', mirror => 'both', sync => 'assigned(id)',
                          replica_owned => '{battery}');
SELECT mirror, rule, replica_owned, columns FROM sync.tables WHERE name = 'register_state';

-- A record: written by a replica, filed here.
CREATE TABLE shop.receipts (
    id          uuid PRIMARY KEY,
    register_id uuid NOT NULL,
    product_id  uuid NOT NULL REFERENCES shop.products (id),
    total_cents bigint NOT NULL,
    revision    integer NOT NULL DEFAULT 1,
    note        text NOT NULL,
    created_at  timestamptz NOT NULL);
SELECT sync.declare_table('shop.receipts', mirror => 'record', sync => 'broadcast', active => 'shop.cheap',
                          replica_owned => '{note}', desired => '{note}', apply => 'always');
SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'total_cents',
                          version => 'note', created => 'id');
SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id',
                          unmirrored => '{note}');
SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id',
                          version => 'revision', created => 'created_at', sync => 'none');
SELECT mirror, rule, origin, version, created, position FROM sync.tables WHERE name = 'receipts';
-- A record points at products: a reference like any other; records get no
-- note trigger, their origin an index.
SELECT parent FROM sync.table_references WHERE table_name = 'receipts';
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shop.receipts'::regclass AND NOT tgisinternal;
SELECT indexdef FROM pg_indexes WHERE schemaname = 'shop' AND tablename = 'receipts' ORDER BY indexname;

-- A setting: a replica's own row, which the server may wish other values.
CREATE TABLE shop.settings (
    register_id uuid NOT NULL,
    id          uuid NOT NULL,
    name        text NOT NULL,
    value       text NOT NULL,
    changed_at  timestamptz NOT NULL,
    PRIMARY KEY (register_id, id));
SELECT sync.declare_table('shop.settings', mirror => 'setting');
SELECT sync.declare_table('shop.settings', mirror => 'setting', origin => 'register_id',
                          version => 'changed_at', desired => '{value, value}', apply => 'sometimes');
SELECT sync.declare_table('shop.settings', mirror => 'setting', origin => 'register_id',
                          version => 'changed_at', desired => '{changed_at, id}');
SELECT sync.declare_table('shop.settings', mirror => 'setting', key => '{register_id, id}',
                          origin => 'register_id', version => 'changed_at', desired => '{value}');
SELECT apply FROM sync.tables WHERE name = 'settings';
SELECT sync.declare_table('shop.settings', mirror => 'setting', key => '{register_id, id}',
                          origin => 'register_id', version => 'changed_at', desired => '{value}',
                          apply => 'if_unchanged');
SELECT mirror, key_columns, origin, version, desired, apply FROM sync.tables WHERE name = 'settings';

-- Several problems are named together.
SELECT sync.declare_table('shop.products', sync => 'assigned(nobody)', version => 'name',
                          unmirrored => '{id, missing}');

-- install => false: the declaration without its triggers or indexes, for
-- users who keep them in their own migrations.
CREATE TABLE shop.deliveries (
    id          uuid PRIMARY KEY,
    register_id uuid NOT NULL);
SELECT sync.declare_table('shop.deliveries', sync => 'assigned(register_id)', install => false);
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shop.deliveries'::regclass AND NOT tgisinternal;
SELECT * FROM sync.check();
SELECT * FROM sync.indexes();
SELECT t FROM sync.triggers() AS t WHERE t LIKE '%deliveries%';
-- indexes => false: the triggers, not the indexes.
SELECT sync.declare_table('shop.deliveries', sync => 'assigned(register_id)', indexes => false);
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shop.deliveries'::regclass AND NOT tgisinternal;
SELECT * FROM sync.indexes();
CREATE INDEX deliveries_by_register ON shop.deliveries (register_id, id);
SELECT * FROM sync.check();

-- Partitions: every table that goes down carries the partition column.
SELECT sync.declare_replicas('shop.registers', live => 'active', partitioned_by => 'company_id');
ALTER TABLE shop.products ADD COLUMN company_id integer;
SELECT sync.declare_replicas('shop.registers', live => 'active', partitioned_by => 'company_id');
ALTER TABLE shop.products DROP COLUMN company_id;
-- A schema of companies: a parent pointed at by (company_id, id).
SELECT count(sync.undeclare_table(relation)) FROM (SELECT relation FROM sync.tables ORDER BY position DESC) AS t;
SET client_min_messages = warning;
DROP SCHEMA shop CASCADE;
RESET client_min_messages;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, company_id uuid NOT NULL, active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.regions (
    id uuid PRIMARY KEY, company_id uuid NOT NULL, name text NOT NULL,
    UNIQUE (company_id, id));
CREATE TABLE shop.stores (
    id uuid PRIMARY KEY, company_id uuid NOT NULL, region_id uuid NOT NULL,
    FOREIGN KEY (company_id, region_id) REFERENCES shop.regions (company_id, id));
CREATE TABLE shop.shelves (
    company_id uuid, id integer, store_id uuid NOT NULL REFERENCES shop.stores (id),
    PRIMARY KEY (company_id, id));
CREATE TABLE shop.labels (
    id uuid PRIMARY KEY, company_id uuid NOT NULL, shelf integer NOT NULL,
    FOREIGN KEY (company_id, shelf) REFERENCES shop.shelves (company_id, id));
SELECT sync.declare_replicas('shop.registers', live => 'active', partitioned_by => 'company_id');
SELECT sync.declare_table('shop.regions');
SELECT sync.declare_table('shop.stores', sync => 'broadcast');
SELECT sync.declare_table('shop.shelves', sync => 'follows(store_id)');
SELECT sync.declare_table('shop.labels', sync => 'follows(company_id, shelf)');
SELECT name, partition_column, position FROM sync.tables ORDER BY position;
-- The partition column is "the same partition" on both sides of a foreign
-- key, unless the parent's key holds it.
SELECT table_name, columns, parent, parent_columns FROM sync.table_references ORDER BY table_name;
SELECT t FROM sync.triggers() AS t WHERE t LIKE '%sync_note_row%';
CREATE TABLE shop.unpartitioned (id uuid PRIMARY KEY);
SELECT sync.declare_table('shop.unpartitioned', sync => 'broadcast');
CREATE TABLE shop.mistyped (id uuid PRIMARY KEY, company_id text NOT NULL);
SELECT sync.declare_table('shop.mistyped', sync => 'broadcast');
SELECT * FROM sync.check();

-- Undeclaring a table drops the triggers the engine wrote for it.
SELECT sync.undeclare_table('shop.labels');
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shop.labels'::regclass AND NOT tgisinternal;
SELECT sync.undeclare_table('shop.labels');

-- Leave the database as it was found.
SET client_min_messages = warning;
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
