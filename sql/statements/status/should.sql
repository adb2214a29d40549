-- The fixed statements of pg_magic_sync/src/status/should.rs, by name: the build
-- makes each a constant of crate::statements::status::should (build.rs).

-- name: NO_ROWS
-- A relation of no rows `(replica, table_name, key)`, for a union of none.
SELECT NULL::uuid, NULL::text, NULL::text WHERE false

-- name: BLOCKED_SEEDS
-- Keys and names compare byte for byte, as sync.held's and sync.notes's
-- columns do: every key that reaches a comparison is brought to "C", so no
-- two collations meet.
SELECT q.table_name COLLATE "C", q.key COLLATE "C", q.table_name COLLATE "C", q.key COLLATE "C"
    FROM sync.quarantine q
