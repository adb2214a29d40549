-- The fixed statements of pg_magic_sync/src/status/explain.rs, by name: the build
-- makes each a constant of crate::statements::status::explain (build.rs).

-- name: REPLICA
-- The replica as sync.replicas has it.
SELECT jsonb_build_object('live', r.live, 'partition', r.partition, 'snapshot_on_its_way', r.provision OR (r.snapshot_sequence IS NOT NULL AND NOT sync_internal.confirmed(r.snapshot_sequence, r.epoch, r.applied_epoch, r.applied_sequence)))
    FROM sync.replicas r
    WHERE r.id = $1

-- name: HELD
-- What the replica holds of the row, and its state there (`$4`: whether it
-- should hold it; `$5`: whether its rules reach it though it cannot go;
-- `$6`: whether it is blocked at all, which sets aside a row held).
SELECT jsonb_build_object( 'state', sync_internal.row_state($4, $5 OR (h.key IS NOT NULL AND $6), h.key IS NOT NULL, h.refused, h.sent, h.leaving, h.note, n.newest, r.epoch, r.applied_epoch, r.applied_sequence), 'held', CASE WHEN h.key IS NOT NULL THEN jsonb_build_object( 'note', h.note, 'newest_note', n.newest, 'sent', h.sent, 'confirmed', sync_internal.confirmed(h.sent, r.epoch, r.applied_epoch, r.applied_sequence), 'leaving', h.leaving, 'refused', h.refused, 'refused_at', h.refused_at, 'retry_at', h.retry_at) END)
    FROM (SELECT 1) AS one
    LEFT
    JOIN sync.replicas r ON r.id = $1
    LEFT
    JOIN sync.held h ON h.replica = $1 AND h.table_name = $2 AND h.key = $3
    LEFT
    JOIN LATERAL (SELECT max(id) AS newest FROM sync.notes WHERE table_name = $2 AND key = $3) AS n ON true
