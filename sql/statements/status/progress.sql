-- The fixed statements of pg_magic_sync/src/status/progress.rs, by name: the build
-- makes each a constant of crate::statements::status::progress (build.rs).

-- name: NEWEST_NOTES
-- The newest pending note of each row that has one: a replica holding an
-- older version holds it outdated.
SELECT n.table_name, n.key, max(n.id)
    FROM sync.notes n
    GROUP BY n.table_name, n.key

-- name: REPLICA
-- The replica `$1` as the answer names it, and whether its snapshot is
-- still on its way (it is to be provisioned, or was and has not confirmed
-- the snapshot's message).
SELECT to_jsonb(r.id), to_jsonb(r.partition), r.provision OR (r.snapshot_sequence IS NOT NULL AND NOT sync_internal.confirmed( r.snapshot_sequence, r.epoch, r.applied_epoch, r.applied_sequence))
    FROM sync.replicas r
    WHERE r.id = $1

-- name: HELD
-- Every row the replica `$1` holds, with whether it confirmed the message
-- that carried it and the one that takes it back (`Held`'s fields; not
-- confirmed where `confirmed` cannot tell).
SELECT h.table_name, h.key, h.note, h.refused IS NOT NULL, h.leaving IS NOT NULL, coalesce(sync_internal.confirmed(h.sent, r.epoch, r.applied_epoch, r.applied_sequence), false), coalesce(sync_internal.confirmed(h.leaving, r.epoch, r.applied_epoch, r.applied_sequence), false)
    FROM sync.held h
    JOIN sync.replicas r ON r.id = h.replica
    WHERE h.replica = $1
