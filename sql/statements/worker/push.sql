-- The fixed statements of pg_magic_sync/src/worker/push.rs, by name: the build
-- makes each a constant of crate::statements::worker::push (build.rs).

-- name: FILE_UP
SELECT sync.receive($1, $2)
