-- The fixed statements of pg_magic_sync/src/api/relaying.rs, by name: the build
-- makes each a constant of crate::statements::api::relaying (build.rs).

-- name: WORKERS_RUNNING
SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = $1 AND datname = current_database())

-- name: STOP_WORKERS
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
    FROM pg_stat_activity
    WHERE backend_type = $1 AND datname = current_database()
