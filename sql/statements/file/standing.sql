-- The fixed statements of pg_magic_sync/src/file/standing.rs, by name: the build
-- makes each a constant of crate::statements::file::standing (build.rs).

-- name: READ
SELECT jsonb_build_object( 'live', live, 'provision', provision, 'epoch', epoch, 'last_sequence', last_sequence, 'last_nonce', last_nonce, 'snapshot_sequence', snapshot_sequence, 'applied_epoch', applied_epoch, 'applied_sequence', applied_sequence, 'applied_nonce', applied_nonce, 'provision_at', extract(epoch FROM provision_at), 'said_times', said_times, 'said_at', extract(epoch FROM said_at), 'said_provisioned_at', extract(epoch FROM said_provisioned_at), 'digests_at', extract(epoch FROM digests_at), 'digests_provisioned_at', extract(epoch FROM digests_provisioned_at), 'now', extract(epoch FROM now()))
    FROM sync.replicas
    WHERE id = $1 FOR
    UPDATE

-- name: NUMBERS_DRAWN
-- The largest message number drawn so far (0 for none).
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM sync.message_numbers
