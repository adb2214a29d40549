-- Writes the declared tables' references into sync.table_references (the
-- table emptied first by catalog/store.rs).
-- $1 jsonb: an array of ReferenceRow of catalog/store.rs, keyed by column
-- name (every column of sync.table_references).
INSERT INTO sync.table_references (
       table_name, position, constraint_name, columns, parent,
       parent_columns, parent_key_types)
SELECT table_name, position, constraint_name, columns, parent,
       parent_columns, parent_key_types
  FROM jsonb_populate_recordset(NULL::sync.table_references, $1)
