-- The declarations: where the replicas are, and which tables travel and
-- how. Written by sync.declare_replicas() and sync.declare_table(), read by
-- the relay (pg_magic_sync/src/catalog.rs).

-- Where the replicas are: sync.declare_replicas().
CREATE TABLE sync.replica_source (
    only_one      boolean PRIMARY KEY DEFAULT true CHECK (only_one),
    -- The replicas' table or view, schema-qualified and quoted.
    relation      text NOT NULL,
    -- Its column of replica ids (uuid).
    id_column     text NOT NULL,
    -- The SQL condition a replica that should receive anything meets.
    live          text NOT NULL,
    declared_at   timestamptz NOT NULL DEFAULT now()
);

-- The declared tables: sync.declare_table().
CREATE TABLE sync.tables (
    -- The name replicas know the table by.
    name          text PRIMARY KEY,
    -- The table, schema-qualified and quoted.
    relation      text NOT NULL UNIQUE,
    mirror        text NOT NULL CHECK (mirror IN ('catalog', 'record', 'both', 'setting')),
    -- Which replicas hold its rows: 'broadcast'.
    rule          text NOT NULL,
    key_columns   text[] NOT NULL,
    -- Each key column's type in the key text form: 'uuid' or 'integer'.
    key_types     text[] NOT NULL,
    -- The columns that travel, and their types as format_type writes them.
    columns       text[] NOT NULL,
    column_types  text[] NOT NULL,
    -- Parents before children: the order tables are sent in.
    position      integer NOT NULL,
    declared_at   timestamptz NOT NULL DEFAULT now()
);

SELECT pg_catalog.pg_extension_config_dump('sync.replica_source', '');
SELECT pg_catalog.pg_extension_config_dump('sync.tables', '');
