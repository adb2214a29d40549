-- The fixed statements of pg_magic_sync/src/relay/plan/snapshot.rs, by name: the build
-- makes each a constant of crate::statements::relay::plan::snapshot (build.rs).

-- name: PROVISIONING
INSERT INTO sync_pass_provisioning (id, partition)
    SELECT id, partition
    FROM sync_pass_replicas
    WHERE provision

-- name: ADVANCE
-- Rows of the frontier not planned for their replica yet: added to the
-- plan, and kept as the next round's frontier.
WITH added AS ( INSERT INTO sync_pass_plan (replica, table_name, key, op, note) SELECT DISTINCT c.replica, c.table_name, c.key, 'u', 0 FROM sync_pass_reached c WHERE NOT EXISTS (SELECT 1 FROM sync_pass_plan p WHERE p.replica = c.replica AND p.table_name = c.table_name AND p.key = c.key) AND NOT EXISTS (SELECT 1 FROM sync_pass_whole w WHERE w.replica = c.replica AND w.table_name = c.table_name) AND NOT EXISTS (SELECT 1 FROM sync_pass_blocked b WHERE b.table_name = c.table_name AND b.key = c.key) RETURNING replica, table_name, key)
    INSERT INTO sync_pass_frontier
    SELECT *
    FROM added

-- name: VERSIONS
-- A snapshot row's version: the newest note of it the pass sees, or 0.
UPDATE sync_pass_plan p
    SET note = n.note
    FROM (SELECT table_name, key, max(id) AS note FROM sync.notes GROUP BY table_name, key) AS n, sync_pass_provisioning r
    WHERE p.replica = r.id AND p.table_name = n.table_name AND p.key = n.key

-- name: WHOLE_OUTSIDE_SCOPE
-- A replica provisioned again for some tables only is sent no table whole
-- outside them: its rows are listed (snapshot.rs), to send only those it
-- lacks or holds at an older version.
DELETE FROM sync_pass_whole w
    USING sync.replicas s
    WHERE s.id = w.replica AND NOT s.provision AND s.provision_only IS NOT NULL AND NOT (w.table_name = ANY (s.provision_only))

-- name: TAKE_BACK_OUTSIDE_SCOPE
-- What a replica provisioned again for some tables only holds of the
-- others ($1: the tables that go down), and should not: taken back, as the
-- snapshot's end sweeps none of it.
INSERT INTO sync_pass_plan (replica, table_name, key, op, note)
    SELECT h.replica, h.table_name, h.key, 'd', coalesce(c.note, h.note, 0)
    FROM sync_pass_provisioning r
    JOIN sync.replicas s ON s.id = r.id AND NOT s.provision AND s.provision_only IS NOT NULL
    JOIN sync.held_recorded h ON h.replica = r.id
    LEFT
    JOIN sync_pass_changed c ON c.table_name = h.table_name AND c.key = h.key
    WHERE h.leaving IS NULL AND h.table_name = ANY ($1::text[]) AND NOT (h.table_name = ANY (s.provision_only)) AND NOT EXISTS (SELECT 1 FROM sync_pass_plan p WHERE p.replica = h.replica AND p.table_name = h.table_name AND p.key = h.key)

-- name: KEEP_HELD_OUTSIDE_SCOPE
-- What it holds of the others as they are, it is not sent again; nor
-- their keys recorded of a setting, which only a snapshot naming the
-- setting reads.
DELETE FROM sync_pass_plan p
    USING sync.replicas s
    WHERE s.id = p.replica AND NOT s.provision AND s.provision_only IS NOT NULL AND NOT (p.table_name = ANY (s.provision_only)) AND (p.op = 'r' OR p.op = 'u' AND EXISTS (SELECT 1 FROM sync.held_recorded h WHERE h.replica = p.replica AND h.table_name = p.table_name AND h.key = p.key AND h.leaving IS NULL AND h.refused IS NULL AND h.note >= p.note))
