-- The fixed statements of pg_magic_sync/src/declare/drift.rs, by name: the build
-- makes each a constant of crate::statements::declare::drift (build.rs).

-- name: FORGET_DRIFT
-- Most checks find nothing recorded: a delete of nothing still writes.
DELETE FROM sync.drift WHERE EXISTS (SELECT 1 FROM sync.drift)
