-- The fixed statements of pg_magic_sync/src/relay/plan/behind.rs, by name: the build
-- makes each a constant of crate::statements::relay::plan::behind (build.rs).

-- name: PASSED_OVER_BEFORE
-- Whether a replica owes rows, and whether a follower was not sent its
-- stand-in's messages: what the rest of this file has to do.
SELECT EXISTS (SELECT 1 FROM sync.owed), EXISTS (SELECT 1 FROM sync.followers WHERE behind_since IS NOT NULL)

-- name: FORGET_OWED_OF_PROVISIONED
-- A replica provisioned, or no longer live, owes nothing: a snapshot sends
-- it everything as it is.
DELETE FROM sync.owed o
    WHERE NOT EXISTS ( SELECT 1 FROM sync.replicas s WHERE s.id = o.replica AND s.live AND NOT s.provision AND s.provision_only IS NULL)

-- name: BEHIND
-- The replicas kept up to date (and, for a follower, its stand-in's last
-- message before the pass) with $1 messages or more waiting for them in
-- their outbox, the oldest written $2 milliseconds ago or more
-- (magic_sync.behind_after, a second by default): not acknowledged
-- (the queue deletes what it acknowledges), nor said applied (nats keeps
-- them until the worker's checks). A register that keeps up acknowledges
-- at once, and says what it applied within its loop's report_after (100
-- ms): over nats, a few passes in that time leave it $1 behind by its
-- reports alone, and it is not passed over for that. Not one whose build
-- gained a column (its rows are sent again this pass). Only those whose
-- last report leaves $1 or more unapplied are looked for, each in its
-- outbox's index, $1 messages at most: what waits is among what was not
-- said applied.
INSERT INTO sync_pass_behind (id, follows, stand_in_last)
    SELECT r.id, i.last_sequence IS NOT NULL, i.last_sequence
    FROM sync_pass_replicas r
    LEFT
    JOIN sync.followers f ON f.replica = r.id
    LEFT
    JOIN sync.stand_ins i ON i.id = f.stand_in
    JOIN sync.replicas s ON s.id = r.id
    CROSS
    JOIN LATERAL (SELECT CASE WHEN s.applied_epoch IS NOT DISTINCT FROM s.epoch THEN s.applied_sequence ELSE 0 END AS applied) AS a
    WHERE NOT r.provision AND s.last_sequence - a.applied >= $1 AND ( SELECT count(*) FROM ( SELECT 1 FROM sync.outbox o WHERE o.replica = r.id AND o.position > a.applied AND o.kind <> 'filed' LIMIT $1) AS w) >= $1 AND ( SELECT o.written_at FROM sync.outbox o WHERE o.replica = r.id AND o.position > a.applied AND o.kind <> 'filed' ORDER BY o.position LIMIT 1) <= now() - make_interval(secs => $2 / 1000.0) AND NOT EXISTS (SELECT 1 FROM sync_pass_resent x WHERE x.replica IS NULL OR x.replica = r.id)

-- name: OWE_TOUCHED
-- What each replica passed over is owed: the rows touched, for every replica
-- or for it, each with the newest note of it the pass saw (0: none); not
-- the journaled tables ($1) of a follower, which its catching up sends it
-- from the stand-in's rows (left out before the join: a pass of journaled
-- changes alone owes followers nothing, and pairs none with them).
INSERT INTO sync.owed (replica, table_name, key, note)
    SELECT o.replica, o.table_name, o.key, max(coalesce(c.note, 0))
    FROM ( SELECT h.id AS replica, t.table_name, t.key FROM sync_pass_behind h CROSS JOIN sync_pass_touched t WHERE t.replica IS NULL AND NOT h.follows UNION ALL SELECT h.id, t.table_name, t.key FROM sync_pass_behind h CROSS JOIN ( SELECT table_name, key FROM sync_pass_touched WHERE replica IS NULL AND table_name <> ALL ($1::text[])) AS t WHERE h.follows UNION ALL SELECT h.id, t.table_name, t.key FROM sync_pass_behind h JOIN sync_pass_touched t ON t.replica = h.id WHERE NOT (h.follows AND t.table_name = ANY ($1::text[]))) AS o
    LEFT
    JOIN sync_pass_changed c ON c.table_name = o.table_name AND c.key = o.key
    GROUP BY o.replica, o.table_name, o.key
    ON CONFLICT (replica, table_name, key) DO UPDATE SET note = greatest(sync.owed.note, excluded.note)

-- name: OWE_OLD_POINTERS
-- And what the changed rows pointed at before (sync_pass_old_pointers): a
-- parent held only for a row that moved away is taken back then.
INSERT INTO sync.owed (replica, table_name, key, note)
    SELECT DISTINCT h.id, o.parent, o.parent_key, 0::bigint
    FROM sync_pass_behind h
    CROSS
    JOIN sync_pass_old_pointers o
    WHERE NOT (h.follows AND o.parent = ANY ($1::text[]))
    ON CONFLICT (replica, table_name, key) DO NOTHING

-- name: MARK_BEHIND
-- A follower passed over is sent none of its stand-in's messages: the last
-- it was sent, kept from the pass that first passed it over.
UPDATE sync.followers f
    SET behind_since = h.stand_in_last
    FROM sync_pass_behind h
    WHERE f.replica = h.id AND h.follows AND f.behind_since IS NULL

-- name: LEAVE_OUT_BEHIND
-- Nothing is planned or sent them this pass.
DELETE FROM sync_pass_replicas r
    USING sync_pass_behind h
    WHERE r.id = h.id

-- name: RELEASED
-- The replicas kept up to date this pass that are owed rows.
INSERT INTO sync_pass_released (id)
    SELECT r.id
    FROM sync_pass_replicas r
    WHERE NOT r.provision AND EXISTS (SELECT 1 FROM sync.owed o WHERE o.replica = r.id)

-- name: TOUCH_OWED
-- What they are owed is touched for them; not the rows of the tables
-- stopped ($1: the database differs from their declarations), which stay
-- owed until they flow again.
INSERT INTO sync_pass_touched (replica, table_name, key)
    SELECT o.replica, o.table_name, o.key
    FROM sync.owed o
    JOIN sync_pass_released r ON r.id = o.replica
    WHERE o.table_name <> ALL ($1::text[])

-- name: VERSIONS_OWED
-- With the newest note of each, where this pass read none: a row held at
-- an older version is sent (incremental.sql, PLAN_SENDS). For any replica
-- the note is the row's newest: one not passed over was sent it.
INSERT INTO sync_pass_changed (table_name, key, note)
    SELECT o.table_name, o.key, max(o.note)
    FROM sync.owed o
    JOIN sync_pass_released r ON r.id = o.replica
    WHERE o.note > 0 AND o.table_name <> ALL ($1::text[]) AND NOT EXISTS ( SELECT 1 FROM sync_pass_changed c WHERE c.table_name = o.table_name AND c.key = o.key)
    GROUP BY o.table_name, o.key

-- name: FORGET_RELEASED
DELETE FROM sync.owed o
    USING sync_pass_released r
    WHERE o.replica = r.id AND o.table_name <> ALL ($1::text[])

-- name: CATCH_UP_JOURNAL
-- A follower kept up to date again after it was passed over is sent, as rows
-- of its own plan, what its stand-in's messages it was not sent changed:
-- each row sent after behind_since and held, as the stand-in holds it now,
-- and the take-back of each row taken back since; not those the stand-in's
-- message of this pass carries, which it is sent too (relay/record). A row
-- taken back is taken back whether or not the follower held it: the
-- message that last sent it tells not whether an older version of it was
-- the follower's (found by the NATS fault loop: a product changed, then
-- deleted, while a register was passed over stayed on it), and the
-- take-back of a row a replica lacks changes nothing.
INSERT INTO sync_pass_plan (replica, table_name, key, op, note)
    SELECT f.replica, h.table_name, h.key, CASE WHEN h.leaving IS NULL THEN 'u' ELSE 'd' END, h.note
    FROM sync.followers f
    JOIN sync_pass_current c ON c.id = f.replica
    JOIN sync.held_recorded h ON h.replica = f.stand_in
    WHERE f.behind_since IS NOT NULL AND ( h.leaving IS NULL AND h.sent > f.behind_since OR h.leaving > f.behind_since) AND NOT EXISTS ( SELECT 1 FROM sync_pass_plan p WHERE p.replica = f.stand_in AND p.table_name = h.table_name AND p.key = h.key)

-- name: MAP_SKIPPED
-- Once the pass recorded: each stand-in message a follower passed over was
-- not sent is mapped to its next message, the one that will carry what it
-- changed (the journal keeps a row leaving until every follower's message
-- that takes it back is applied: sql/journal.sql).
INSERT INTO sync.follower_messages (replica, stand_in_sequence, sequence)
    SELECT h.id, g.s, r.last_sequence + 1
    FROM sync_pass_behind h
    JOIN sync.followers f ON f.replica = h.id
    JOIN sync.stand_ins i ON i.id = f.stand_in
    JOIN sync.replicas r ON r.id = h.id
    CROSS
    JOIN LATERAL generate_series(h.stand_in_last + 1, i.last_sequence) AS g(s)
    ON CONFLICT (replica, stand_in_sequence) DO NOTHING

-- name: MAP_CAUGHT_UP
-- And a follower that caught up: every stand-in message since
-- behind_since counts as carried by its last message of the pass.
UPDATE sync.follower_messages m
    SET sequence = r.last_sequence
    FROM sync.followers f
    JOIN sync_pass_current c ON c.id = f.replica
    JOIN sync.replicas r ON r.id = f.replica
    WHERE f.behind_since IS NOT NULL AND m.replica = f.replica AND m.stand_in_sequence > f.behind_since

-- name: CAUGHT_UP
UPDATE sync.followers f
    SET behind_since = NULL
    FROM sync_pass_current c
    WHERE c.id = f.replica AND f.behind_since IS NOT NULL

-- name: ANY_CATCHING_UP
SELECT EXISTS ( SELECT 1 FROM sync.followers f JOIN sync_pass_current c ON c.id = f.replica WHERE f.behind_since IS NOT NULL)
