-- Noting changes: the triggers' functions, and the checks declarations
-- run, in PL/pgSQL.

-- What a note says beyond the table and the key (sync.notes is in
-- schema.sql): the partition the row was in when it changed, and, for a row
-- that points at other declared tables, the keys of the parents it pointed
-- at before the change, one per reference in the order of
-- sync.table_references.position (NULL where it pointed at none): a parent
-- it no longer points at can then be let go.
ALTER TABLE sync.notes ADD COLUMN partition text;
ALTER TABLE sync.notes ADD COLUMN parents_before text[];

-- Changes to groups: a row of a grouped table joining or leaving a group
-- (key set, replica NULL), or a group given to or taken from a replica
-- (replica set, key NULL). Numbered from the same sequence as sync.notes,
-- so the two read together in the order they were written; deleted, like a
-- note, by the relay pass that plans it.
CREATE TABLE sync.group_notes (
    id            bigint PRIMARY KEY DEFAULT nextval('sync.note_ids'),
    -- The grouped table, as replicas know it.
    table_name    text NOT NULL,
    -- The group: its columns' values in the key text form.
    group_key     text NOT NULL,
    -- The grouped row that joined or left the group.
    key           text,
    -- The replica given the group, or from which it was taken.
    replica       uuid,
    noted_at      timestamptz NOT NULL DEFAULT now()
);
-- Emptied pages stay for the next notes, as sync.notes's do.
ALTER TABLE sync.group_notes SET (vacuum_truncate = off);
SELECT pg_catalog.pg_extension_config_dump('sync.group_notes', '');

-- The note triggers (pg_magic_sync/src/noting.rs): row triggers in C, each
-- reading the columns its arguments name straight from the row.
CREATE FUNCTION sync.note_row() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'note_row';
CREATE FUNCTION sync.note_group() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'note_group';

-- TRUNCATE removes rows without a note, so no replica would ever hear of it.
CREATE FUNCTION sync.refuse_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'magic_sync: TRUNCATE of %.% is refused', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'feature_not_supported',
              HINT = 'Replicas hear of a change through the note its trigger writes, and TRUNCATE writes none: DELETE the rows instead.';
END
$$;

-- The error an SQL condition over a relation raises, or NULL when it runs.
-- `relation` is quoted already; `condition` is the declarer's SQL.
CREATE FUNCTION sync.check_condition(relation text, condition text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT 1 FROM %s AS r WHERE (%s) LIMIT 0', relation, condition);
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLERRM;
END
$$;
