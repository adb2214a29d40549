-- A relation's columns, in order (dropped ones left out).
-- $1 oid: the relation.
-- Answers, one row a column: its name, its type as format_type writes it,
-- whether it is NOT NULL, and whether it has a default (a default, an
-- identity or a generated column).
SELECT attname::text, format_type(atttypid, atttypmod), attnotnull,
       atthasdef OR attidentity <> '' OR attgenerated <> ''
  FROM pg_attribute
 WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped
 ORDER BY attnum
