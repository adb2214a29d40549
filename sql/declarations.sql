-- The lookups declaring makes (pg_magic_sync/src/declare/): the engine's
-- own, in sync_internal. The declarations are read and written by
-- pg_magic_sync/src/catalog/store.rs through the queries of sql/catalog/. Their tables, sync.replica_source,
-- sync.tables, sync.table_references and sync.groups, are in schema.sql.

-- A relation by the name a user gave, or NULL when there is none (a name
-- that is not even a name included).
CREATE FUNCTION sync_internal.regclass_or_null(name text) RETURNS regclass
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN to_regclass(name);
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;

-- What the relay's check finds now, in place of what it found before
-- (sync.drift): problems[i] is mended by fixes[i], and stops the tables of
-- tables->i (an array of names; null: the whole relay). One found before
-- keeps when it was first found; one unchanged is not written again (a
-- pass records it every time while it lasts).
CREATE FUNCTION sync_internal.record_drift(problems text[], fixes text[], tables jsonb) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM sync.drift d WHERE NOT d.problem = ANY (problems);
    INSERT INTO sync.drift AS d (problem, fix, tables)
    SELECT n.p, n.f,
           CASE WHEN jsonb_typeof(tables -> (n.i::integer - 1)) = 'array'
                THEN ARRAY(SELECT jsonb_array_elements_text(tables -> (n.i::integer - 1))) END
    FROM unnest(problems, fixes) WITH ORDINALITY AS n(p, f, i)
    ON CONFLICT (problem) DO UPDATE SET fix = excluded.fix, tables = excluded.tables
    WHERE d.fix IS DISTINCT FROM excluded.fix OR d.tables IS DISTINCT FROM excluded.tables;
$$;
