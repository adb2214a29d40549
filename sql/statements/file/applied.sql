-- The fixed statements of pg_magic_sync/src/file/applied.rs, by name: the build
-- makes each a constant of crate::statements::file::applied (build.rs).

-- name: FOLLOWER_APPLIED
-- sync_internal.follower_applied's DELETE, run as a statement of its own:
-- a SQL function's body is parsed and planned again at every call, which
-- cost a report more than the DELETE itself (issue 37).
DELETE FROM sync.follower_messages m
    WHERE m.replica = $1 AND m.sequence <= $2
