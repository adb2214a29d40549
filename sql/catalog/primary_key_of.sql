-- A table's primary key columns, in key order (no row: no primary key).
-- $1 oid: the table.
-- Answers, one row a column: its name.
SELECT a.attname::text
  FROM pg_index i
 CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
 WHERE i.indrelid = $1 AND i.indisprimary
 ORDER BY k.ord
