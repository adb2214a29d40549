-- The fixed statements of pg_magic_sync/src/relay/plan/mod.rs, by name: the build
-- makes each a constant of crate::statements::relay::plan (build.rs).

-- name: READ_NOTES
-- Not those of the tables stopped ($2): they wait for the fix.
INSERT INTO sync_pass_notes (at, id, table_name, key)
    SELECT ctid, id, table_name, key
    FROM sync.notes
    WHERE NOT table_name = ANY ($2::text[])
    ORDER BY id
    LIMIT $1

-- name: READ_GROUP_NOTES
-- Groups' changes: a row joining or leaving a group, a group given to or
-- taken from a replica.
INSERT INTO sync_pass_group_notes (id, table_name, group_key, key, replica)
    SELECT id, table_name, group_key, key, replica
    FROM sync.group_notes
    WHERE NOT table_name = ANY ($2::text[])
    ORDER BY id
    LIMIT $1

-- name: CHANGED_ROWS
-- A row's version is its newest note the snapshot sees, in the batch or
-- beyond it: a replica recorded at that version lacks none of its changes.
-- For a batch cut short, so looked up in sync.notes, a row at a time, by
-- the index of rows (notes_of_rows): the look-ups cost the batch, where
-- reading sync.notes again cost the backlog, every pass of it.
INSERT INTO sync_pass_changed (table_name, key, note)
    SELECT c.table_name, c.key, ( SELECT max(n.id) FROM sync.notes n WHERE n.table_name = c.table_name AND n.key = c.key) AS note
    FROM (SELECT DISTINCT table_name, key FROM sync_pass_notes) AS c

-- name: CHANGED_ROWS_OF_WHOLE_BATCH
-- The same when the batch holds every note the snapshot sees (fewer than
-- a batch were read): every row's newest note is in it.
INSERT INTO sync_pass_changed (table_name, key, note)
    SELECT table_name, key, max(id)
    FROM sync_pass_notes
    GROUP BY table_name, key

-- name: TOUCHED
INSERT INTO sync_pass_touched (replica, table_name, key)
    SELECT NULL::uuid AS replica, table_name, key
    FROM sync_pass_changed
    UNION
    SELECT NULL::uuid, table_name, key
    FROM sync_pass_group_notes
    WHERE key IS NOT NULL

-- name: RELEASE_CHANGED
-- A row set aside that changed since may go through now.
DELETE
    FROM sync.quarantine q
    USING sync_pass_changed c
    WHERE q.table_name = c.table_name AND q.key = c.key AND c.note > q.note

-- name: RELEASE_DUE
-- Rows whose retry is due are planned again, for every replica; those of
-- the tables stopped ($1) stay set aside until the fix.
WITH due AS (DELETE FROM sync.quarantine WHERE retry_at <= now() AND NOT table_name = ANY ($1::text[]) RETURNING table_name, key)
    INSERT INTO sync_pass_touched
    SELECT NULL, table_name, key
    FROM due

-- name: REFUSED_DUE
-- Rows a replica refused are sent it again (or their deletes) when their
-- retry is due, or when a relay starts: a deploy on either side may have
-- fixed the cause. For that replica only.
-- Not those of the tables stopped ($2): they keep their retry until the fix.
WITH due AS ( UPDATE sync.held_recorded SET retry_at = now() + current_setting('magic_sync.retry_every')::interval WHERE refused IS NOT NULL AND ($1 OR retry_at IS NULL OR retry_at <= now()) AND NOT table_name = ANY ($2::text[]) RETURNING replica, table_name, key)
    INSERT INTO sync_pass_touched
    SELECT replica, table_name, key
    FROM due

-- name: BLOCKED
-- What cannot go: the rows set aside, and, a round at a time, every row
-- that points at one (a row that follows one points at it).
INSERT INTO sync_pass_blocked (replica, table_name, key)
    SELECT NULL::uuid, table_name, key
    FROM sync.quarantine

-- name: DEFER_PROVISIONING
-- While tables are stopped, no replica (nor stand-in) is provisioned: a
-- snapshot planned without them would take their rows back. It keeps its
-- flag, and is provisioned by the first pass after the fix.
DELETE FROM sync_pass_replicas WHERE provision

-- name: REPLICAS
-- A replica provisioned again for some tables only is provisioned
-- (relay/plan/snapshot.rs plans it the difference outside them).
INSERT INTO sync_pass_replicas (id, provision, partition)
    SELECT id, provision OR provision_only IS NOT NULL, partition
    FROM sync.replicas
    WHERE live

-- name: TAKE_BACK_LET_GO
-- The tables no longer mirrored ($1, relay/redeclared.rs): every row of
-- them a replica kept up to date holds is taken back, at the version it
-- holds (unless planned already, by a note of it still pending); and one
-- provisioned again for some tables only, which keeps what it holds of
-- the others.
INSERT INTO sync_pass_plan (replica, table_name, key, op, note)
    SELECT h.replica, h.table_name, h.key, 'd', h.note
    FROM sync.held_recorded h
    JOIN sync_pass_replicas c ON c.id = h.replica
    LEFT
    JOIN sync.replicas s ON s.id = c.id
    WHERE (NOT c.provision OR (NOT s.provision AND s.provision_only IS NOT NULL)) AND h.table_name = ANY ($1::text[]) AND h.leaving IS NULL AND NOT EXISTS ( SELECT 1 FROM sync_pass_plan p WHERE p.replica = h.replica AND p.table_name = h.table_name AND p.key = h.key)

-- name: RESEND_HELD
-- The tables whose columns changed, and nothing else of them ($1,
-- relay/redeclared.rs): every row of them a replica kept up to date holds
-- (or a stand-in) is sent again, at the version it holds, but those
-- planned already (a note of it pending) and those that cannot go. Which
-- replica holds which row did not change: nothing is planned for them.
INSERT INTO sync_pass_plan (replica, table_name, key, op, note)
    SELECT h.replica, h.table_name, h.key, 'u', h.note
    FROM sync.held_recorded h
    JOIN sync_pass_current c ON c.id = h.replica
    WHERE h.table_name = ANY ($1::text[]) AND h.leaving IS NULL AND NOT EXISTS ( SELECT 1 FROM sync_pass_plan p WHERE p.replica = h.replica AND p.table_name = h.table_name AND p.key = h.key) AND NOT EXISTS ( SELECT 1 FROM sync_pass_blocked b WHERE b.table_name = h.table_name AND b.key = h.key)
