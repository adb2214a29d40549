-- The fixed statements of pg_magic_sync/src/file/rows.rs, by name: the build
-- makes each a constant of crate::statements::file::rows (build.rs).

-- name: PLACE_EACH
-- The host's `place` hook, run a row at a time (sql/filing.sql).
SELECT at, placed, failure
    FROM sync_internal.place_each($1, $2, $3, $4, $5, $6, $7)

-- name: FILE_TOGETHER
-- A part's statement over all its rows, in a savepoint (sql/filing.sql).
SELECT filed, failure
    FROM sync_internal.file_together($1, $2::jsonb, $3, $4, $5, $6, $7)

-- name: FILE_EACH
-- The same statement a row at a time, when the database refused the whole.
SELECT at, filed, failure
    FROM sync_internal.file_each($1, $2::jsonb, $3, $4, $5, $6, $7)

-- name: HELD_OR_LEAVING
SELECT h.key, h.leaving IS NULL
    FROM sync.held h
    WHERE h.replica = $1 AND h.table_name = $2 AND h.key = ANY($3)
