-- Writes the grouped tables' groups into sync.groups (the table emptied
-- first by catalog/store.rs).
-- $1 jsonb: an array of GroupRow of catalog/store.rs, keyed by column name
-- (every column of sync.groups).
INSERT INTO sync.groups (
       table_name, groups, members, member_row, member_group, assigned,
       assigned_group, assigned_replica)
SELECT table_name, groups, members, member_row, member_group, assigned,
       assigned_group, assigned_replica
  FROM jsonb_populate_recordset(NULL::sync.groups, $1)
