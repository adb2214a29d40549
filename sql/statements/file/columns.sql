-- The fixed statements of pg_magic_sync/src/file/columns.rs, by name: the build
-- makes each a constant of crate::statements::file::columns (build.rs).

-- name: SAID_BEFORE
-- The columns the replica last said it holds of a table; none before it
-- first said them.
SELECT c.columns
    FROM sync.replica_columns c
    WHERE c.replica = $1 AND c.table_name = $2

-- name: KEEP
INSERT INTO sync.replica_columns (replica, table_name, columns)
    VALUES ($1, $2, $3)
    ON CONFLICT (replica, table_name) DO UPDATE SET columns = excluded.columns, said_at = now()

-- name: GAINED
-- Columns the server sends that the replica's build holds now and did not
-- before: the next pass sends it the rows of the table it holds again. A
-- table noted already keeps its columns with these beside them.
INSERT INTO sync.columns_gained (replica, table_name, columns)
    VALUES ($1, $2, $3)
    ON CONFLICT (replica, table_name) DO UPDATE SET columns = ARRAY( SELECT DISTINCT c FROM unnest(sync.columns_gained.columns || excluded.columns) AS c ORDER BY c)
