-- Noting changes: the triggers' functions, and the checks declarations
-- run, in PL/pgSQL.

-- Notes the keys of every row a statement inserted, updated or deleted, one
-- note per key, in the writing transaction. An update that changes a key
-- notes the old key too: that row is gone.
--
-- Arguments: the table's name as replicas know it, then its key columns.
CREATE FUNCTION sync.note_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    key_text text;
    source text;
BEGIN
    SELECT CASE WHEN count(*) = 1 THEN min(format('(%I)::text', c))
                ELSE format('concat_ws(''|'', %s)',
                            string_agg(format('(%I)::text', c), ', ' ORDER BY o))
           END
      INTO key_text
      FROM unnest(TG_ARGV[1:TG_NARGS - 1]) WITH ORDINALITY AS k(c, o);
    source := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT %s FROM sync_new', key_text)
        WHEN 'DELETE' THEN format('SELECT %s FROM sync_old', key_text)
        ELSE format('SELECT %s FROM sync_new UNION SELECT %s FROM sync_old', key_text, key_text)
    END;
    EXECUTE format('INSERT INTO sync.notes (table_name, key) SELECT DISTINCT $1, k FROM (%s) AS changed(k)', source)
        USING TG_ARGV[0];
    RETURN NULL;
END
$$;

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
