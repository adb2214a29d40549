-- The fixed statements of pg_magic_sync/src/relay/mod.rs, by name: the build
-- makes each a constant of crate::statements::relay (build.rs).

-- name: DELETE_PLANNED_NOTES
-- The notes planned are done with: what they asked for is recorded. By
-- their places (a TID scan) and ids (the key's index), as lists: a join
-- read the whole of sync.notes, the backlog, to find the batch.
DELETE
    FROM sync.notes n
    WHERE n.ctid = ANY (ARRAY (SELECT at FROM sync_pass_notes));
    DELETE
    FROM sync.group_notes n
    WHERE n.id = ANY (ARRAY (SELECT id FROM sync_pass_group_notes))

-- name: DROP_UNCARRIED_BODIES
-- Bodies no message carries any more.
DELETE
    FROM sync.bodies b
    WHERE NOT EXISTS (SELECT 1 FROM sync.outbox o WHERE o.body = b.id)

-- name: PROVISION_OTHER_EPOCHS
-- A live replica whose chain is in another epoch than the current one
-- cannot follow anything sent in it: it begins again with a snapshot.
UPDATE sync.replicas
    SET provision = true
    WHERE live AND NOT provision AND epoch IS DISTINCT
    FROM $1

-- name: PASS_SETTINGS
SELECT set_config('jit', 'off', true), set_config('default_statistics_target', '10', true), set_config('synchronous_commit', 'on', true)
