-- The counts of sync.held_recorded (docs/src/status.md, "How rows in flight
-- are counted"): sync.held_counts, kept by statement triggers on it, so
-- that the status reads count the rows in flight from a few thousand counts
-- rather than from every row sent while replicas are catching up.
--
-- Each statement that writes sync.held_recorded adds one grouped INSERT of what it
-- changed, by (replica, table, sent, leaving): never an UPDATE of a shared
-- counter, so the relay's pass and the filing of Ups, which write the table
-- at once, never wait on each other here. A stand-in's rows are counted as
-- its own; the status reads count them for its followers (sql/status.sql). Rows refused are not counted:
-- they are never in flight.

-- Rows inserted, counted in, or deleted, counted out: both triggers name
-- their transition table held_rows.
CREATE FUNCTION sync_internal.count_held_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sync.held_counts (replica, table_name, sent, leaving, n)
    SELECT h.replica, h.table_name, h.sent, h.leaving IS NOT NULL,
           CASE TG_OP WHEN 'DELETE' THEN -count(*) ELSE count(*) END
    FROM held_rows h WHERE h.refused IS NULL
    GROUP BY 1, 2, 3, 4;
    RETURN NULL;
END
$$;

-- Rows updated: counted out as they were, in as they are; an update that
-- changes nothing counted (a retry's time, a note) adds nothing.
CREATE FUNCTION sync_internal.count_held_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sync.held_counts (replica, table_name, sent, leaving, n)
    SELECT d.replica, d.table_name, d.sent, d.leaving, sum(d.n)
    FROM (SELECT h.replica, h.table_name, h.sent, h.leaving IS NOT NULL AS leaving, 1 AS n
          FROM held_after h WHERE h.refused IS NULL
          UNION ALL
          SELECT h.replica, h.table_name, h.sent, h.leaving IS NOT NULL, -1
          FROM held_before h WHERE h.refused IS NULL) AS d
    GROUP BY 1, 2, 3, 4
    HAVING sum(d.n) <> 0;
    RETURN NULL;
END
$$;

-- sync.held_recorded emptied at once: so are its counts.
CREATE FUNCTION sync_internal.count_held_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM sync.held_counts;
    RETURN NULL;
END
$$;

-- A trigger with transition tables takes one event only: one each.
CREATE TRIGGER held_counts_insert AFTER INSERT ON sync.held_recorded
    REFERENCING NEW TABLE AS held_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sync_internal.count_held_rows();
CREATE TRIGGER held_counts_update AFTER UPDATE ON sync.held_recorded
    REFERENCING OLD TABLE AS held_before NEW TABLE AS held_after
    FOR EACH STATEMENT EXECUTE FUNCTION sync_internal.count_held_updated();
CREATE TRIGGER held_counts_delete AFTER DELETE ON sync.held_recorded
    REFERENCING OLD TABLE AS held_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sync_internal.count_held_rows();
CREATE TRIGGER held_counts_truncate AFTER TRUNCATE ON sync.held_recorded
    FOR EACH STATEMENT EXECUTE FUNCTION sync_internal.count_held_truncated();

-- Folds the counts together: every count's rows summed into one by
-- (replica, table, sent, leaving), those summing to nothing dropped, and
-- those that can never count as in flight again folded into one per
-- (replica, table) at sent 0: rows not leaving, sent in a message the
-- replica said it applied. That holds because a replica's applied_sequence
-- never goes down (file/applied.rs counts only a later message; message
-- numbers come from one sequence, so a new epoch's are higher than any
-- before), and a row sent again is counted out at its old sent, in at its
-- new one. Leaving rows are in flight whatever sent them: folded at sent 0
-- too. Answers how many count rows it took away.
--
-- Run before every 16th pass (sync_internal.before_pass). One compaction at a
-- time: another finding one at work leaves it to it. The DELETE and the
-- INSERT are one statement, so what it adds is exactly what it took, even
-- alongside writers of sync.held_recorded adding counts meanwhile.
CREATE FUNCTION sync_internal.compact_held_counts() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    folded bigint;
BEGIN
    -- locks.rs's COUNTS.
    IF NOT pg_try_advisory_xact_lock(7809643163296757361) THEN
        RETURN 0;
    END IF;
    WITH gone AS (DELETE FROM sync.held_counts RETURNING *),
    kept AS (
        INSERT INTO sync.held_counts (replica, table_name, sent, leaving, n)
        SELECT g.replica, g.table_name,
               CASE WHEN g.leaving OR g.sent <= r.applied_sequence THEN 0
                    -- A stand-in's rows whose message every follower
                    -- applied (none has it unconfirmed).
                    WHEN r.id IS NULL AND NOT EXISTS (
                        SELECT 1 FROM sync.follower_messages m WHERE m.stand_in_sequence = g.sent)
                        THEN 0
                    ELSE g.sent END,
               g.leaving, sum(g.n)
        FROM gone g LEFT JOIN sync.replicas r ON r.id = g.replica
        GROUP BY 1, 2, 3, 4
        HAVING sum(g.n) <> 0
        RETURNING 1)
    SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM kept) INTO folded;
    RETURN folded;
EXCEPTION WHEN serialization_failure OR deadlock_detected THEN
    -- Only in a transaction that is not READ COMMITTED (a snapshot older
    -- than another compaction's commit): the next one folds instead.
    RETURN 0;
END
$$;

-- Counts sync.held_recorded again from scratch, replacing every count: what a relay
-- that starts does, for a database whose sync.held_recorded was written with its
-- triggers off (a data-only restore with --disable-triggers). Waits for a
-- compaction at work; in one statement, so a writer's counts that commit
-- meanwhile are neither lost nor counted twice. Answers the counts written.
CREATE FUNCTION sync_internal.recount_held() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    written bigint;
BEGIN
    -- locks.rs's COUNTS.
    PERFORM pg_advisory_xact_lock(7809643163296757361);
    WITH gone AS (DELETE FROM sync.held_counts RETURNING 1),
    counted AS (
        INSERT INTO sync.held_counts (replica, table_name, sent, leaving, n)
        SELECT h.replica, h.table_name, h.sent, h.leaving IS NOT NULL, count(*)
        FROM sync.held_recorded h WHERE h.refused IS NULL
        GROUP BY 1, 2, 3, 4
        RETURNING 1)
    SELECT count(*) FROM counted INTO written;
    RETURN written;
END
$$;
