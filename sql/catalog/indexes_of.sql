-- A table's indexes.
-- $1 oid: the table.
-- Answers, one row an index: its key columns in order (NULL for an
-- expression; included columns left out), and whether it can serve an
-- equality lookup of its leading columns (valid, not partial, a btree or a
-- hash).
SELECT ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY k(n, o)
               LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n
              WHERE k.o <= i.indnkeyatts ORDER BY k.o),
       i.indisvalid AND i.indpred IS NULL AND am.amname IN ('btree', 'hash')
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
  JOIN pg_am am ON am.oid = c.relam
 WHERE i.indrelid = $1
