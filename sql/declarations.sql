-- The declarations as the engine reads them (pg_magic_sync/src/catalog/),
-- and the lookups declaring makes (pg_magic_sync/src/declare/): the
-- engine's own, in sync_internal. Their tables, sync.replica_source,
-- sync.tables, sync.table_references and sync.groups, are in schema.sql.

-- Every declaration, parents first, as one JSON object each: the row of
-- sync.tables, its references, and its groups.
CREATE FUNCTION sync_internal.declarations() RETURNS SETOF jsonb
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
CREATE FUNCTION sync_internal.regclass_or_null(name text) RETURNS regclass
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN to_regclass(name);
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;
