-- The fixed statements of pg_magic_sync/src/epochs.rs, by name: the build
-- makes each a constant of crate::statements::epochs (build.rs).

-- name: CURRENT
SELECT id, secret FROM sync.epochs WHERE current

-- name: BEGIN
INSERT INTO sync.epochs (id, secret) VALUES ($1, $2)

-- name: CURRENT_ID
-- The current epoch's id: read by every report filed (its plan kept).
SELECT id FROM sync.epochs WHERE current
