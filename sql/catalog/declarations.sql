-- Every declared table, parents first (by position, then name), as one
-- jsonb each: {"table": its row of sync.tables (declared_at left out),
-- "references": its rows of sync.table_references by position,
-- "group": its row of sync.groups or null}. Keys are column names: what
-- catalog/store.rs's row types read (TableRows). No parameters.
SELECT jsonb_build_object(
           'table', to_jsonb(t) - 'declared_at',
           'references', coalesce((SELECT jsonb_agg(to_jsonb(r) ORDER BY r.position)
                                     FROM sync.table_references r
                                    WHERE r.table_name = t.name), '[]'::jsonb),
           'group', (SELECT to_jsonb(g) FROM sync.groups g WHERE g.table_name = t.name))
  FROM sync.tables t
 ORDER BY t.position, t.name
