-- The journal of broadcast tables (schema.sql's sync.stand_ins,
-- sync.followers, sync.follower_messages; docs/src/decisions.md): what
-- makes a follower stop following, and what the reports of followers and
-- the passes let go of.

-- A follower that stops following keeps what it holds, as rows of its own:
-- its stand-in's rows, each under the follower's own message that carried
-- it. What a follower refuses is recorded on rows of its own (receive/
-- rejections.rs), so it parts first. The view reads the follower as it was
-- before the statement's delete. Answers whether it was following.
CREATE FUNCTION sync_internal.part(replica uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sync.followers f WHERE f.replica = part.replica) THEN
        RETURN false;
    END IF;
    INSERT INTO sync.held_recorded (replica, table_name, key, note, sent, leaving)
    SELECT h.replica, h.table_name, h.key, h.note, h.sent, h.leaving
    FROM sync.held h WHERE h.replica = part.replica
      AND EXISTS (SELECT 1 FROM sync.followers f JOIN sync.held_recorded s
                  ON s.replica = f.stand_in AND s.table_name = h.table_name AND s.key = h.key
                  WHERE f.replica = part.replica);
    DELETE FROM sync.followers f WHERE f.replica = part.replica;
    DELETE FROM sync.follower_messages m WHERE m.replica = part.replica;
    RETURN true;
END
$$;

-- A replica that says it applied its message `sequence` has applied every
-- stand-in message that came to it up to there: their rows are held.
CREATE FUNCTION sync_internal.follower_applied(replica uuid, sequence bigint) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM sync.follower_messages m
    WHERE m.replica = follower_applied.replica AND m.sequence <= follower_applied.sequence;
$$;

-- A stand-in's row taken back is gone once every follower applied the
-- message that took it back (none has it unconfirmed). Answers how many.
-- A stand-in at a time: with its id given, its rows leaving are read from
-- the partial index held_leaving (joined to sync.stand_ins, which is seldom
-- analyzed, PostgreSQL read all of sync.held_recorded: 6 ms a pass).
CREATE FUNCTION sync_internal.let_go_of_journal() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    stand_in uuid;
    gone bigint := 0;
    n bigint;
BEGIN
    FOR stand_in IN SELECT id FROM sync.stand_ins LOOP
        -- Looked for first: a DELETE of nothing still runs the counting
        -- triggers (sql/held_counts.sql).
        CONTINUE WHEN NOT EXISTS (
            SELECT 1 FROM sync.held_recorded h
            WHERE h.replica = stand_in AND h.leaving IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM sync.follower_messages m
                              WHERE m.stand_in_sequence = h.leaving));
        DELETE FROM sync.held_recorded h
        WHERE h.replica = stand_in AND h.leaving IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM sync.follower_messages m
                          WHERE m.stand_in_sequence = h.leaving);
        GET DIAGNOSTICS n = ROW_COUNT;
        gone := gone + n;
    END LOOP;
    RETURN gone;
END
$$;
