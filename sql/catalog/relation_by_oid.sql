-- A relation by its oid (no row when there is none).
-- $1 oid: the relation.
-- Answers: oid, schema name, relation name, relkind ('r' a table, 'p' a
-- partitioned table, 'v' a view...).
SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = $1
