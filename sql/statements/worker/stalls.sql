-- The fixed statements of pg_magic_sync/src/worker/stalls.rs, by name: the build
-- makes each a constant of crate::statements::worker::stalls (build.rs).

-- name: STALL_CHECKS
SELECT sync_internal.stall_checks(make_interval(secs => $1::float8))

-- name: LOST
SELECT sync_internal.stall_lost($1)
