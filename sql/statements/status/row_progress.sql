-- The fixed statements of pg_magic_sync/src/status/row_progress.rs, by name: the build
-- makes each a constant of crate::statements::status::row_progress (build.rs).

-- name: ROW_PROGRESS
-- The row's place on each replica it concerns, and how many of the scope's
-- replicas it does not concern (neither held, nor reached by their rules).
SELECT jsonb_build_object('contract', $4::integer, 'now', now(), 'table', $2::text, 'key', $3::text, 'places', coalesce((SELECT jsonb_agg(jsonb_build_object( 'replica', s.replica, 'state', s.state, 'note', s.note, 'newest_note', s.newest, 'sent', s.sent, 'confirmed', coalesce(s.confirmed, false), 'leaving', s.leaving, 'refused', s.refused) ORDER BY s.replica) FROM states s WHERE s.state IS NOT NULL), '[]'::jsonb), 'unconcerned', (SELECT count(*) FROM replicas r WHERE NOT EXISTS ( SELECT 1 FROM states s WHERE s.replica = r.id AND s.state IS NOT NULL)))
