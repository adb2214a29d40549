-- Noting changes: the triggers' functions (in sync: users' trigger DDL
-- names them), and the check declarations run (the engine's own, in
-- sync_internal).

-- The note triggers (pg_magic_sync/src/note/): row triggers in C, each
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
CREATE FUNCTION sync_internal.check_condition(relation text, condition text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT 1 FROM %s AS r WHERE (%s) LIMIT 0', relation, condition);
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLERRM;
END
$$;
