-- The fixed statements of pg_magic_sync/src/file/applied.rs, by name: the build
-- makes each a constant of crate::statements::file::applied (build.rs).

-- name: FOLLOWER_APPLIED
SELECT sync_internal.follower_applied($1, $2)
