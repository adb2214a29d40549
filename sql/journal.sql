-- The journal of broadcast tables (schema.sql's sync.stand_ins,
-- sync.followers, sync.follower_messages; docs/src/decisions.md): what
-- makes a follower stop following, and what the reports of followers and
-- the passes let go of.

-- A follower that stops following keeps what it holds, as rows of its own:
-- its stand-in's rows, each under the follower's own message that carried
-- it. What a follower refuses is recorded on rows of its own (file/
-- rejections.rs), so it parts first. The view reads the follower as it was
-- before the statement's delete. Answers whether it was following.
CREATE FUNCTION sync_internal.part(replica uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sync.followers f WHERE f.replica = part.replica) THEN
        RETURN false;
    END IF;
    -- One far behind was not sent some of its stand-in's messages
    -- (relay/plan/behind.rs): it does not hold the stand-in's rows, and is
    -- provisioned again instead.
    IF EXISTS (SELECT 1 FROM sync.followers f
               WHERE f.replica = part.replica AND f.behind_since IS NOT NULL) THEN
        UPDATE sync.replicas r SET provision = true WHERE r.id = part.replica;
        DELETE FROM sync.followers f WHERE f.replica = part.replica;
        DELETE FROM sync.follower_messages m WHERE m.replica = part.replica;
        RETURN true;
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

-- Followers of a stand-in about to be provisioned keep what they hold as
-- rows of their own (one provisioned as well lets go of them anyway); a
-- replica provisioned again holds nothing yet: it stops following, and is
-- planned every journaled table's snapshot. One provisioned again for
-- some tables only (provision_only) keeps what it holds of the others, the
-- journaled ones too: it parts (relay/redeclared.rs). Most passes
-- provision nothing: each part is looked for first.
CREATE FUNCTION sync_internal.stop_following_provisioned() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM sync.stand_ins WHERE provision) THEN
        PERFORM sync_internal.part(f.replica) FROM sync.followers f
        JOIN sync.stand_ins s ON s.id = f.stand_in WHERE s.provision;
    END IF;
    IF EXISTS (SELECT 1 FROM sync.replicas WHERE provision) THEN
        DELETE FROM sync.followers f USING sync.replicas r
        WHERE r.id = f.replica AND r.provision;
        DELETE FROM sync.follower_messages m USING sync.replicas r
        WHERE r.id = m.replica AND r.provision;
    END IF;
    IF EXISTS (SELECT 1 FROM sync.replicas WHERE provision_only IS NOT NULL AND NOT provision) THEN
        PERFORM sync_internal.part(r.id) FROM sync.replicas r
        WHERE r.live AND r.provision_only IS NOT NULL AND NOT r.provision;
    END IF;
END
$$;

-- The journal's part of a pass, before its replicas are listed: a stand-in
-- for every partition a live replica is in (sync_pass_live), each whose
-- chain is in another epoch than `current_epoch` begun again from scratch,
-- followers of what is provisioned parted or stopped, and the take-backs
-- every follower applied let go of. One function, so its plans are kept
-- for the session as a worker passes again and again.
CREATE FUNCTION sync_internal.prepare_journal(current_epoch uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sync.stand_ins (partition) SELECT DISTINCT partition FROM sync_pass_live
    ON CONFLICT (partition) DO NOTHING;
    UPDATE sync.stand_ins SET provision = true
    WHERE NOT provision AND epoch IS DISTINCT FROM current_epoch;
    PERFORM sync_internal.stop_following_provisioned();
    PERFORM sync_internal.let_go_of_journal();
END
$$;

-- With no table journaled any more, the stand-ins and their rows go, their
-- followers parted first. Called only when the declarations changed, and
-- so every stand-in is marked for provisioning already (relay/mod.rs).
CREATE FUNCTION sync_internal.drop_journal() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sync_internal.stop_following_provisioned();
    DELETE FROM sync.held_recorded h USING sync.stand_ins s WHERE h.replica = s.id;
    DELETE FROM sync.stand_ins;
END
$$;
