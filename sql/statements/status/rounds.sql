-- The fixed statements of pg_magic_sync/src/status/rounds.rs, by name: the build
-- makes each a constant of crate::statements::status::rounds (build.rs).

-- name: ONE_REPLICA
-- The relation of the one replica `$1`, as `rule_rows` takes its targets.
WITH scope AS MATERIALIZED (SELECT r.id, r.partition FROM sync.replicas r WHERE r.id = $1)
