-- Writes the declared tables into sync.tables: a new relation is inserted,
-- one already there is replaced (matched by relation), its declared_at kept
-- unless it is the table just declared, which is stamped now(); a new row
-- takes the column's default, now().
-- $1 jsonb: an array of TableRow of catalog/store.rs, keyed by column name
-- (every column of sync.tables but declared_at).
-- $2 text: the relation just declared; NULL when none was.
INSERT INTO sync.tables AS t (
       name, relation, mirror, rule, rule_columns, key_columns, key_types,
       columns, column_types, partition_column, origin, version, created,
       desired, apply, replica_owned, unmirrored, active, install, indexes,
       table_columns, table_types, table_not_null, position, request)
SELECT name, relation, mirror, rule, rule_columns, key_columns, key_types,
       columns, column_types, partition_column, origin, version, created,
       desired, apply, replica_owned, unmirrored, active, install, indexes,
       table_columns, table_types, table_not_null, position, request
  FROM jsonb_populate_recordset(NULL::sync.tables, $1)
    ON CONFLICT (relation) DO UPDATE
   SET name = excluded.name,
       mirror = excluded.mirror,
       rule = excluded.rule,
       rule_columns = excluded.rule_columns,
       key_columns = excluded.key_columns,
       key_types = excluded.key_types,
       columns = excluded.columns,
       column_types = excluded.column_types,
       partition_column = excluded.partition_column,
       origin = excluded.origin,
       version = excluded.version,
       created = excluded.created,
       desired = excluded.desired,
       apply = excluded.apply,
       replica_owned = excluded.replica_owned,
       unmirrored = excluded.unmirrored,
       active = excluded.active,
       install = excluded.install,
       indexes = excluded.indexes,
       table_columns = excluded.table_columns,
       table_types = excluded.table_types,
       table_not_null = excluded.table_not_null,
       position = excluded.position,
       request = excluded.request,
       declared_at = CASE WHEN excluded.relation = $2 THEN now() ELSE t.declared_at END
