-- The relation a user named, as to_regclass reads the name (no row for a
-- name that is no relation, or is not even a name).
-- $1 text: the name as given, qualified or not.
-- Answers: oid, schema name, relation name, relkind ('r' a table, 'p' a
-- partitioned table, 'v' a view...).
SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = sync_internal.regclass_or_null($1)
