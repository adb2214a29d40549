-- The fixed statements of pg_magic_sync/src/relay/columns_gained.rs, by name: the
-- build makes each a constant of crate::statements::relay::columns_gained
-- (build.rs).

-- name: ANY_GAINED
SELECT EXISTS (SELECT 1 FROM sync.columns_gained)

-- name: FORGET_PROVISIONED
-- A replica provisioned this pass is sent every row with the columns the
-- server sends, and one no longer live is forgotten: what was noted of
-- their columns gained asks nothing more.
DELETE FROM sync.columns_gained g
    WHERE NOT EXISTS ( SELECT 1 FROM sync.replicas r WHERE r.id = g.replica AND r.live AND NOT r.provision)

-- name: PART_FOLLOWERS_GAINING
-- The followers of a stand-in whose columns of a journaled table ($1) grew
-- part, so their rows of it are their own, sent them alone; not for a
-- table stopped ($2).
SELECT sync_internal.part(p.replica)
    FROM ( SELECT DISTINCT g.replica FROM sync.columns_gained g JOIN sync.followers f ON f.replica = g.replica WHERE g.table_name = ANY ($1::text[]) AND NOT g.table_name = ANY ($2::text[])) AS p

-- name: SEND_AGAIN
-- The rows each replica holds of a table whose columns grew are touched
-- for it, and those it keeps are sent it whatever version it holds
-- (sync_pass_resent, read by the planner's PLAN_SENDS); the note is done.
-- Not a table stopped ($1): it waits for the fix. Answers how many rows.
WITH due AS ( DELETE FROM sync.columns_gained g WHERE NOT g.table_name = ANY ($1::text[]) RETURNING g.replica, g.table_name), resent AS ( INSERT INTO sync_pass_resent (replica, table_name) SELECT replica, table_name FROM due), touched AS ( INSERT INTO sync_pass_touched (replica, table_name, key) SELECT h.replica, h.table_name, h.key FROM due d JOIN sync.held_recorded h ON h.replica = d.replica AND h.table_name = d.table_name WHERE h.leaving IS NULL RETURNING 1)
    SELECT count(*)
    FROM touched
