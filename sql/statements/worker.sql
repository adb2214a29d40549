-- The fixed statements of pg_magic_sync/src/worker/mod.rs, by name: the build
-- makes each a constant of crate::statements::worker (build.rs).

-- name: OUTBOX_CHECKS
SELECT sync_internal.outbox_checks($1, $2, $3)

-- name: EXTENSION_IS_HERE
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'magic_sync')

-- name: WORK_WAITS
-- Whether a pass has anything to do but look at the replicas
-- (sql/relay.sql).
SELECT sync_internal.work_waits()

-- name: BEFORE_PASS
SELECT sync_internal.before_pass($1)

-- name: PASS
SELECT sync_internal.pass($1)

-- name: WAITING
-- What waits for someone: a backlog of notes, replicas whose messages have
-- waited five minutes or more, rows set aside, uploads kept in the inbox,
-- replicas a send keeps failing to.
SELECT jsonb_build_object( 'notes', (SELECT count(*) FROM sync.notes), 'undelivered', (SELECT count(DISTINCT replica) FROM sync.outbox WHERE written_at < now() - interval '5 minutes' AND NOT (kind = 'filed' AND published)), 'set_aside', (SELECT count(*) FROM sync.quarantine), 'refused', (SELECT count(*) FROM sync.held WHERE refused IS NOT NULL), 'inbox', (SELECT count(*) FROM sync.inbox), 'failing', (SELECT count(*) FROM sync.sends WHERE failures >= 3))

-- name: TAKE_TEMP_BUFFERS
-- Fills a throwaway temporary table of as many pages as the worker has
-- buffers for them, and drops it. PostgreSQL gives those buffers their
-- memory as each is first used and keeps it for the session, so the
-- worker's scratch tables took theirs over its first ten thousand passes
-- (0.4 MB after 100, 1 MB after 10,000); taken at once, they make its
-- memory flat from its first pass, and growth that shows is growth.
-- `$1`: the rows that fill that many pages.
INSERT INTO magic_sync_temp_buffers SELECT generate_series(1, $1)

-- name: MAKE_TEMP_BUFFERS_TABLE
CREATE TEMPORARY TABLE magic_sync_temp_buffers (g int)

-- name: DROP_TEMP_BUFFERS_TABLE
DROP TABLE magic_sync_temp_buffers
