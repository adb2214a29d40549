-- The fixed statements of pg_magic_sync/src/relay/plan/incremental.rs, by name: the build
-- makes each a constant of crate::statements::relay::plan::incremental (build.rs).

-- name: CURRENT
INSERT INTO sync_pass_current (id, partition)
    SELECT id, partition
    FROM sync_pass_replicas
    WHERE NOT provision

-- name: TOUCHED_HELD_LOOKED_UP
-- What the replicas hold of the rows touched (leaving or not), for every
-- replica or for one: read from sync.held once, for every step after. A
-- row touched for every replica is looked up once, all its replicas' rows
-- side by side (index held_rows); a row touched for one replica, as that
-- pair. OFFSET 0 keeps the planner from joining otherwise, when the pairs
-- are few beside sync.held: see `few_pairs_touched`.
INSERT INTO sync_pass_touched_held
    SELECT h.*
    FROM (SELECT DISTINCT table_name, key FROM sync_pass_touched WHERE replica IS NULL) AS t
    CROSS
    JOIN LATERAL ( SELECT h.replica, h.table_name, h.key, h.note, h.leaving, h.refused IS NOT NULL FROM sync.held_recorded h WHERE h.table_name = t.table_name AND h.key = t.key OFFSET 0) AS h
    WHERE EXISTS (SELECT 1 FROM sync_pass_current r WHERE r.id = h.replica)
    UNION
    SELECT h.*
    FROM ( SELECT DISTINCT t.replica, t.table_name, t.key FROM sync_pass_touched t JOIN sync_pass_current r ON r.id = t.replica) AS p
    CROSS
    JOIN LATERAL ( SELECT h.replica, h.table_name, h.key, h.note, h.leaving, h.refused IS NOT NULL FROM sync.held_recorded h WHERE h.replica = p.replica AND h.table_name = p.table_name AND h.key = p.key OFFSET 0) AS h

-- name: FEW_PAIRS_TOUCHED
-- Whether the pairs (replica, row touched) are fewer than an eighth of the
-- rows of sync.held. Measured on 1,000,000 held rows of 10 replicas,
-- looking 13,000 pairs up a row at a time took 26 ms (a pair at a time,
-- 150 ms), reading sync.held whole 0.33 s; the planner, which costs a
-- look-up as a read from disk, would read it whole. Its rows are
-- what statistics last counted or the live rows the server counts as it
-- goes, whichever is more: a table filled since it was last analyzed (a
-- fleet just provisioned) has no statistics yet.
SELECT (SELECT count(*) FROM sync_pass_touched WHERE replica IS NULL) * (SELECT count(*) FROM sync_pass_current) + (SELECT count(*) FROM sync_pass_touched WHERE replica IS NOT NULL) < greatest((SELECT reltuples FROM pg_class WHERE oid = 'sync.held_recorded'::regclass), pg_stat_get_live_tuples('sync.held_recorded'::regclass)) / 8

-- name: TOUCHED_HELD
-- The same, by the planner's choice.
INSERT INTO sync_pass_touched_held
    SELECT h.replica, h.table_name, h.key, h.note, h.leaving, h.refused IS NOT NULL
    FROM sync_pass_touched t
    CROSS
    JOIN sync_pass_current r
    JOIN sync.held_recorded h ON h.replica = r.id AND h.table_name = t.table_name AND h.key = t.key
    WHERE t.replica IS NULL
    UNION
    SELECT h.replica, h.table_name, h.key, h.note, h.leaving, h.refused IS NOT NULL
    FROM sync_pass_touched t
    JOIN sync_pass_current r ON r.id = t.replica
    JOIN sync.held_recorded h ON h.replica = r.id AND h.table_name = t.table_name AND h.key = t.key

-- name: TOUCHED_AND_HELD
-- The held rows touched are in question.
INSERT INTO sync_pass_question
    SELECT replica, table_name, key
    FROM sync_pass_touched_held
    WHERE leaving IS NULL

-- name: QUESTION_HELD_REACHED
-- Rows reached from the frontier that the replica holds (not leaving) and
-- that are not in question yet: in question now, and the next frontier.
-- Not the rows of the tables in $1, which every replica keeps whatever
-- leans on them (incremental.rs, `kept_by_their_rule`).
WITH added AS ( INSERT INTO sync_pass_question SELECT DISTINCT c.replica, c.table_name, c.key FROM sync_pass_reached c JOIN sync.held_recorded h ON h.replica = c.replica AND h.table_name = c.table_name AND h.key = c.key WHERE h.leaving IS NULL AND c.table_name <> ALL ($1::text[]) AND NOT EXISTS ( SELECT 1 FROM sync_pass_question q WHERE q.replica = c.replica AND q.table_name = c.table_name AND q.key = c.key) RETURNING replica, table_name, key)
    INSERT INTO sync_pass_frontier
    SELECT *
    FROM added

-- name: CANDIDATES_TOUCHED
-- The rows whose reasons to be held may have changed, for each replica:
-- the rows touched, and (when rows lean on others) the rows in question.
SELECT r.id AS replica, t.table_name, t.key
    FROM sync_pass_touched t
    CROSS
    JOIN sync_pass_current r
    WHERE t.replica IS NULL
    UNION
    SELECT t.replica, t.table_name, t.key
    FROM sync_pass_touched t
    JOIN sync_pass_current r ON r.id = t.replica

-- name: KEEP_REACHED
-- Rows reached from the frontier that are not kept yet: kept now; those
-- the replica lacks, or that are in question, are the next frontier. The
-- two as a UNION ALL of joins, not one condition with OR: an OR of two
-- subqueries runs the second for each row, reading the rows in question
-- whole each time (hours with a declaration change over 200 replicas).
WITH added AS ( INSERT INTO sync_pass_want SELECT DISTINCT c.replica, c.table_name, c.key FROM sync_pass_reached c WHERE NOT EXISTS (SELECT 1 FROM sync_pass_want w WHERE w.replica = c.replica AND w.table_name = c.table_name AND w.key = c.key) AND NOT EXISTS (SELECT 1 FROM sync_pass_blocked b WHERE b.table_name = c.table_name AND b.key = c.key) RETURNING replica, table_name, key)
    INSERT INTO sync_pass_frontier
    SELECT a.*
    FROM added a
    WHERE NOT EXISTS (SELECT 1 FROM sync.held_recorded h WHERE h.replica = a.replica AND h.table_name = a.table_name AND h.key = a.key AND h.leaving IS NULL)
    UNION ALL
    SELECT a.*
    FROM added a
    WHERE EXISTS (SELECT 1 FROM sync.held_recorded h WHERE h.replica = a.replica AND h.table_name = a.table_name AND h.key = a.key AND h.leaving IS NULL) AND EXISTS (SELECT 1 FROM sync_pass_question q WHERE q.replica = a.replica AND q.table_name = a.table_name AND q.key = a.key)

-- name: PLAN_SENDS
-- What is kept and lacked, held at an older version, or refused, is sent;
-- and what is kept and held of a table whose bytes a declaration changed
-- (sync_pass_resent: a column added or dropped), at the version held;
-- for one replica, when its build gained a column (relay/columns_gained.rs).
INSERT INTO sync_pass_plan (replica, table_name, key, op, note)
    SELECT w.replica, w.table_name, w.key, 'u', coalesce(c.note, h.note, 0)
    FROM (SELECT DISTINCT replica, table_name, key FROM sync_pass_want) AS w
    LEFT
    JOIN sync.held_recorded h ON h.replica = w.replica AND h.table_name = w.table_name AND h.key = w.key
    LEFT
    JOIN sync_pass_changed c ON c.table_name = w.table_name AND c.key = w.key
    WHERE h.key IS NULL OR h.leaving IS NOT NULL OR h.note < c.note OR h.refused IS NOT NULL OR EXISTS (SELECT 1 FROM sync_pass_resent r WHERE r.table_name = w.table_name AND (r.replica IS NULL OR r.replica = w.replica))

-- name: PLAN_SENDS_OF_TOUCHED
-- The same, when every row kept was touched (no row leans on another, so
-- nothing is kept beyond them): what is held of them was read already.
INSERT INTO sync_pass_plan (replica, table_name, key, op, note)
    SELECT w.replica, w.table_name, w.key, 'u', coalesce(c.note, h.note, 0)
    FROM (SELECT DISTINCT replica, table_name, key FROM sync_pass_want) AS w
    LEFT
    JOIN sync_pass_touched_held h ON h.replica = w.replica AND h.table_name = w.table_name AND h.key = w.key
    LEFT
    JOIN sync_pass_changed c ON c.table_name = w.table_name AND c.key = w.key
    WHERE h.key IS NULL OR h.leaving IS NOT NULL OR h.note < c.note OR h.refused OR EXISTS (SELECT 1 FROM sync_pass_resent r WHERE r.table_name = w.table_name AND (r.replica IS NULL OR r.replica = w.replica))

-- name: PLAN_TAKE_BACKS
-- What is in question and not kept is taken back.
INSERT INTO sync_pass_plan (replica, table_name, key, op, note)
    SELECT q.replica, q.table_name, q.key, 'd', coalesce(c.note, h.note, 0)
    FROM (SELECT DISTINCT replica, table_name, key FROM sync_pass_question) AS q
    JOIN sync.held_recorded h ON h.replica = q.replica AND h.table_name = q.table_name AND h.key = q.key
    LEFT
    JOIN sync_pass_changed c ON c.table_name = q.table_name AND c.key = q.key
    WHERE NOT EXISTS (SELECT 1 FROM sync_pass_want w WHERE w.replica = q.replica AND w.table_name = q.table_name AND w.key = q.key)

-- name: PLAN_TAKE_BACKS_OF_TOUCHED
-- The same, when no row leans on another: the rows in question are the
-- touched rows held, whose versions were read already.
INSERT INTO sync_pass_plan (replica, table_name, key, op, note)
    SELECT h.replica, h.table_name, h.key, 'd', coalesce(c.note, h.note, 0)
    FROM sync_pass_touched_held h
    LEFT
    JOIN sync_pass_changed c ON c.table_name = h.table_name AND c.key = h.key
    WHERE h.leaving IS NULL AND NOT EXISTS ( SELECT 1 FROM sync_pass_want w WHERE w.replica = h.replica AND w.table_name = h.table_name AND w.key = h.key)
