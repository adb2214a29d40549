-- A table's foreign keys, by name (those a partition inherits from its
-- parent's left out).
-- $1 oid: the table.
-- Answers, one row a foreign key: its name, the parent's oid, the table's
-- columns in the constraint's order, and the parent's columns they point
-- at, in the same order.
SELECT c.conname::text, c.confrelid,
       ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, o)
               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n
              ORDER BY k.o),
       ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, o)
               JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n
              ORDER BY k.o)
  FROM pg_constraint c
 WHERE c.conrelid = $1 AND c.contype = 'f' AND c.conparentid = 0
 ORDER BY c.conname
