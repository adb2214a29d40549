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
