-- The declarations: where the replicas are, and which tables travel and
-- how. Written by sync.declare_replicas() and sync.declare_table()
-- (pg_magic_sync/src/declare.rs), read by the relay through
-- sync.declarations() (pg_magic_sync/src/catalog.rs).
--
-- Each declaration keeps the options as they were given (request), and
-- what they resolved to against the database: every declaration is
-- resolved again whenever one is made, and the relay's check resolves them
-- again to find what changed since.

-- Where the replicas are: sync.declare_replicas().
CREATE TABLE sync.replica_source (
    only_one      boolean PRIMARY KEY DEFAULT true CHECK (only_one),
    -- The replicas' table or view, schema-qualified and quoted.
    relation      text NOT NULL,
    -- Its column of replica ids (uuid).
    id_column     text NOT NULL,
    -- The SQL condition a replica that should receive anything meets.
    live          text NOT NULL,
    -- The column that splits replicas and rows into partitions no row
    -- crosses; NULL: one partition.
    partition_column text,
    declared_at   timestamptz NOT NULL DEFAULT now()
);

-- The declared tables: sync.declare_table().
CREATE TABLE sync.tables (
    -- The name replicas know the table by.
    name          text PRIMARY KEY,
    -- The table, schema-qualified and quoted.
    relation      text NOT NULL UNIQUE,
    mirror        text NOT NULL CHECK (mirror IN ('catalog', 'record', 'both', 'setting')),
    -- Which replicas hold its rows for their own sake.
    rule          text NOT NULL CHECK (rule IN ('none', 'broadcast', 'assigned', 'follows', 'grouped')),
    -- assigned: its column of replica ids; follows: the columns of the
    -- foreign key it follows. The groups of a grouped table: sync.groups.
    rule_columns  text[] NOT NULL DEFAULT '{}',
    -- The key, in the declaration's order.
    key_columns   text[] NOT NULL,
    -- Each key column's type in the key text form: 'uuid' or 'integer'.
    key_types     text[] NOT NULL,
    -- The columns that travel, and their types as format_type writes them.
    columns       text[] NOT NULL,
    column_types  text[] NOT NULL,
    -- The partition column it carries, when the replicas are partitioned.
    partition_column text,
    -- The column of the replica a row belongs to (uuid).
    origin        text,
    -- The column that orders a record's or a setting's versions.
    version       text,
    -- A record's column written once.
    created       text,
    -- A setting's columns the server may wish other values.
    desired       text[] NOT NULL DEFAULT '{}',
    -- A setting's way with wishes.
    apply         text CHECK (apply IN ('always', 'if_unchanged')),
    -- A table written on both sides: the columns replicas own.
    replica_owned text[] NOT NULL DEFAULT '{}',
    -- Columns that do not travel.
    unmirrored    text[] NOT NULL DEFAULT '{}',
    -- The view of the rows that travel for their own sake, quoted.
    active        text,
    -- Whether the engine writes the table's triggers, and its indexes.
    install       boolean NOT NULL DEFAULT true,
    indexes       boolean NOT NULL DEFAULT true,
    -- Every column of the table as declared, with its type and whether it
    -- is NOT NULL: what the relay's check holds the table against.
    table_columns text[] NOT NULL,
    table_types   text[] NOT NULL,
    table_not_null boolean[] NOT NULL,
    -- Parents before children: the order tables are sent in.
    position      integer NOT NULL,
    -- The options as they were given, to resolve them again.
    request       jsonb NOT NULL,
    declared_at   timestamptz NOT NULL DEFAULT now()
);

-- The foreign keys between declared tables: a row travels with every row
-- it points at.
CREATE TABLE sync.table_references (
    table_name    text NOT NULL,
    -- Its place among the table's references (by constraint name): the
    -- order of a note's parents_before.
    position      integer NOT NULL,
    constraint_name text NOT NULL,
    -- The child's columns that hold the parent's key, in the parent's key
    -- order (the partition column both share left out, unless the
    -- parent's key holds it).
    columns       text[] NOT NULL,
    -- The parent, as replicas know it, and its key.
    parent        text NOT NULL,
    parent_columns text[] NOT NULL,
    parent_key_types text[] NOT NULL,
    PRIMARY KEY (table_name, position)
);

-- The groups of a grouped table: its members (rows in groups), and the
-- groups given to replicas.
CREATE TABLE sync.groups (
    table_name    text PRIMARY KEY,
    -- The table of groups both point at, quoted.
    groups        text NOT NULL,
    -- The members: quoted; its columns that hold the grouped row's key (in
    -- key order) and those that name the group.
    members       text NOT NULL,
    member_row    text[] NOT NULL,
    member_group  text[] NOT NULL,
    -- The groups given to replicas: quoted; its columns that name the
    -- group (in member_group's order), and its column of replica ids.
    assigned      text NOT NULL,
    assigned_group text[] NOT NULL,
    assigned_replica text NOT NULL
);

SELECT pg_catalog.pg_extension_config_dump('sync.replica_source', '');
SELECT pg_catalog.pg_extension_config_dump('sync.tables', '');
SELECT pg_catalog.pg_extension_config_dump('sync.table_references', '');
SELECT pg_catalog.pg_extension_config_dump('sync.groups', '');

-- Every declaration, parents first, as one JSON object each: the row of
-- sync.tables, its references, and its groups.
CREATE FUNCTION sync.declarations() RETURNS SETOF jsonb
LANGUAGE sql STABLE AS $$
    SELECT to_jsonb(t) - 'request'
           || jsonb_build_object(
                'references', coalesce((SELECT jsonb_agg(to_jsonb(r) ORDER BY r.position)
                                        FROM sync.table_references r
                                        WHERE r.table_name = t.name), '[]'::jsonb),
                'group', (SELECT to_jsonb(g) FROM sync.groups g WHERE g.table_name = t.name))
      FROM sync.tables t
     ORDER BY t.position, t.name
$$;

-- A relation by the name a user gave, or NULL when there is none (a name
-- that is not even a name included).
CREATE FUNCTION sync.regclass_or_null(name text) RETURNS regclass
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN to_regclass(name);
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;
