-- Running the relay: the lock, the pass's transaction, in PL/pgSQL around
-- the Rust that plans and records (pg_magic_sync/src/relay/). What users
-- call is in sync (sync.relay, sync.retry, sync.resync); the steps of a
-- pass are the engine's own, in sync_internal.

-- A row's bytes as they travel (pg_magic_sync/src/relay/encode.rs): a JSON
-- object of the values under the names, byte for byte what json_build_object
-- writes, without looking each value's type up again for every row.
CREATE FUNCTION sync_internal.row_bytes(names text[], VARIADIC "any") RETURNS bytea
LANGUAGE c IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'row_bytes';

-- Takes the relay's lock for this transaction, and answers whether the
-- transaction's snapshot is fresh: false when another pass committed after
-- the snapshot was taken (the caller then starts over).
CREATE FUNCTION sync_internal.claim_relay() RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'repeatable read' THEN
        RAISE EXCEPTION 'magic_sync: a relay pass runs in a REPEATABLE READ transaction, not %',
            current_setting('transaction_isolation');
    END IF;
    -- 'magic_sync' as a number: one relay at a time, whoever runs it.
    PERFORM pg_advisory_xact_lock(7809643163296757358);
    INSERT INTO sync.relay_state AS s (passes, last_pass_at) VALUES (1, now())
        ON CONFLICT (only_one) DO UPDATE SET passes = s.passes + 1, last_pass_at = now();
    RETURN true;
EXCEPTION WHEN serialization_failure THEN
    RETURN false;
END
$$;

-- Whether a replica passed over (relay/plan/behind.rs) may be sent what it
-- missed now: it owes rows (sync.owed), or follows a stand-in whose
-- messages it was not sent (sync.followers.behind_since), and fewer than
-- magic_sync.messages_ahead messages wait for it (neither acknowledged
-- nor said applied). Looked for a replica at a time, and only while one
-- is passed over.
CREATE FUNCTION sync_internal.catch_up_due() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT (EXISTS (SELECT 1 FROM sync.owed)
            OR EXISTS (SELECT 1 FROM sync.followers WHERE behind_since IS NOT NULL))
       AND EXISTS (
           SELECT 1
           -- The setting's default (settings.rs) where the library is not
           -- loaded in this session yet.
           FROM (SELECT coalesce(nullif(current_setting('magic_sync.messages_ahead', true), '')::int, 4) AS ahead) AS s,
                sync.replicas r
           WHERE r.live
             AND (EXISTS (SELECT 1 FROM sync.owed o WHERE o.replica = r.id)
                  OR EXISTS (SELECT 1 FROM sync.followers f
                             WHERE f.replica = r.id AND f.behind_since IS NOT NULL))
             AND (s.ahead = 0 OR (SELECT count(*) FROM sync.outbox x
                                  WHERE x.replica = r.id AND x.kind <> 'filed'
                                    AND x.position > CASE WHEN r.applied_epoch IS NOT DISTINCT FROM r.epoch
                                                          THEN r.applied_sequence ELSE 0 END) < s.ahead));
$$;

-- Whether a pass has anything to do but look at the replicas: notes,
-- replicas to provision, retries that are due, uploads to file again. A
-- relay worker woken with nothing of it waiting starts no pass.
CREATE FUNCTION sync_internal.work_waits() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM sync.notes)
        OR EXISTS (SELECT 1 FROM sync.group_notes)
        OR EXISTS (SELECT 1 FROM sync.replicas WHERE live AND (provision OR provision_at <= now()))
        OR EXISTS (SELECT 1 FROM sync.quarantine WHERE retry_at <= now())
        OR EXISTS (SELECT 1 FROM sync.held_recorded WHERE refused IS NOT NULL AND retry_at <= now())
        OR EXISTS (SELECT 1 FROM sync.inbox WHERE waiting OR retry_at <= now())
        OR sync_internal.catch_up_due();
$$;

-- What waits apart from the notes, in a transaction of its own, before a
-- pass: uploads kept in the inbox are filed again when due (all of them
-- when a relay starts: a deploy may have fixed them), and replicas whose
-- provisioning was put off until it may (said of themselves too often) are
-- marked for it; sync.held's counts are folded together every 16th pass
-- (counted again from scratch when a relay starts: sql/held_counts.sql).
-- Answers what it did.
CREATE FUNCTION sync_internal.before_pass(starts boolean) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN jsonb_build_object('refiled', sync.refile(starts),
                              'provision_due', sync_internal.provision_due(),
                              'held_counts', CASE
                                  WHEN starts THEN sync_internal.recount_held()
                                  -- Every 16th pass: folding rewrites every
                                  -- count, a cost that grows with the fleet,
                                  -- while the counts a few passes add are few.
                                  WHEN coalesce((SELECT passes FROM sync.relay_state), 0) % 16 = 0
                                      THEN sync_internal.compact_held_counts()
                                  ELSE 0 END);
END
$$;

-- Whether a pass that plans no notes goes through, tried and undone: when
-- it does, a pass of one note that failed failed on that note.
CREATE FUNCTION sync_internal.passes_without_notes(starts boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        PERFORM sync_internal.record_pass(starts, 0);
        RAISE EXCEPTION USING ERRCODE = 'MSU02', MESSAGE = 'magic_sync: a pass of no notes, tried and undone';
    EXCEPTION
        WHEN SQLSTATE 'MSU02' THEN
            RETURN true;
        WHEN OTHERS THEN
            IF sync_internal.is_transient(SQLSTATE) THEN
                RAISE;
            END IF;
            RETURN false;
    END;
END
$$;

-- One relay pass, in the caller's REPEATABLE READ transaction: it takes the
-- relay's lock, reads the notes, plans, loads and records, writing the
-- messages to the outbox and deleting the notes it planned, and wakes the
-- devices waiting on the queue of a replica it wrote to (delivered when the
-- transaction commits). Answers the pass's summary, or NULL when another
-- pass committed after the transaction's snapshot was taken: the caller
-- rolls back and starts over. `starts`: a relay starting, which tries
-- again at once whatever was set aside.
--
-- A pass that fails for good (not a failure a retry may cure) is narrowed
-- to what it is about: it plans half the notes, then half of those, and
-- when one note alone fails while none passes, that note's row is set aside
-- with why, and the pass goes on without it. What no note is about (a
-- database not as declared, a snapshot that cannot be read) fails the pass.
CREATE FUNCTION sync_internal.pass(starts boolean) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    summary jsonb;
    too_large jsonb;
    rounds int := 0;
    -- How many notes to plan: NULL, a whole batch.
    notes integer;
    failure text;
    state text;
    detail text;
    hint text;
    -- Rows set aside for failing the pass: a few at most, so that a failure
    -- that is no note's does not set every note aside.
    narrowed int := 0;
BEGIN
    IF NOT sync_internal.claim_relay() THEN
        RETURN NULL;
    END IF;
    LOOP
        too_large := NULL;
        failure := NULL;
        BEGIN
            summary := sync_internal.record_pass(starts, notes);
            too_large := summary->'unsendable';
            IF too_large IS NOT NULL THEN
                -- Rows no message could carry: this SQLSTATE of the
                -- engine's own undoes the pass's work (the block is a
                -- subtransaction); they are set aside below, and the pass
                -- planned again around them, in the same snapshot.
                RAISE EXCEPTION USING ERRCODE = 'MSU01',
                    MESSAGE = 'magic_sync: rows no message can carry';
            END IF;
        EXCEPTION
            WHEN SQLSTATE 'MSU01' THEN
                NULL;
            WHEN OTHERS THEN
                IF sync_internal.is_transient(SQLSTATE) THEN
                    RAISE;
                END IF;
                GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, failure = MESSAGE_TEXT,
                    detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
        END;
        IF failure IS NOT NULL THEN
            IF notes IS NULL THEN
                notes := (SELECT least(count(*), current_setting('magic_sync.notes_per_pass')::bigint)
                          FROM sync.notes);
            END IF;
            IF notes > 1 THEN
                notes := notes / 2;
            ELSIF notes = 1 AND narrowed < 10 AND sync_internal.passes_without_notes(starts) THEN
                PERFORM sync_internal.set_aside_oldest_note(failure);
                narrowed := narrowed + 1;
                notes := NULL;
                -- What was set aside was tried once in this pass: a
                -- starting relay that tried it again would bring it back.
                starts := false;
            ELSE
                RAISE EXCEPTION USING ERRCODE = state, MESSAGE = failure,
                    DETAIL = coalesce(detail, ''), HINT = coalesce(hint, '');
            END IF;
            CONTINUE;
        END IF;
        EXIT WHEN too_large IS NULL;
        -- Each round sets at least one more row aside; one that keeps coming
        -- back is a fault of the engine, and must not spin for ever.
        rounds := rounds + 1;
        IF rounds > 100 THEN
            RAISE EXCEPTION 'magic_sync: rows set aside keep coming back into the pass'
                USING DETAIL = too_large::text, ERRCODE = 'internal_error';
        END IF;
        PERFORM sync_internal.set_aside(too_large);
        -- Tried once in this pass: a starting relay that tried it again
        -- in the next round would bring it back every round, and a row
        -- still too large would fail every pass of a relay that started.
        starts := false;
    END LOOP;
    -- The queue's publishing: a device (or a gateway) LISTENing on its
    -- replica's channel takes its messages at once instead of polling.
    PERFORM pg_notify('magic_sync:' || o.replica, '')
       FROM (SELECT DISTINCT replica FROM sync.outbox
              WHERE written_at = now() AND kind <> 'filed') AS o;
    RETURN summary;
END
$$;

-- One relay pass, in the calling session: what the background worker does
-- on its own, run by hand (tests use it: it is deterministic). The advisory
-- lock keeps one pass at a time, whoever runs it. A pass run this way is no
-- relay starting: sync.retry() asks for what was set aside to be tried again.
-- It does not close the filing gate (relay/gate.rs) as the worker does: a
-- pass that loses a race with a filing (a serialization failure) starts
-- over with a fresh snapshot instead.
--
-- CALL it outside a transaction block: it commits what came before it.
CREATE PROCEDURE sync.relay(INOUT summary jsonb DEFAULT NULL)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sync_internal.outside_a_transaction_block();
    COMMIT;
    PERFORM sync_internal.before_pass(false);
    COMMIT;
    LOOP
        SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
        BEGIN
            summary := sync_internal.pass(false);
        EXCEPTION WHEN serialization_failure THEN
            summary := NULL;
        END;
        EXIT WHEN summary IS NOT NULL;
        ROLLBACK;
    END LOOP;
    COMMIT;
END
$$;

-- Sets rows aside that no message can carry: [{table, key, note, reason}].
-- A row is set aside at the newest note of it the pass sees (a row read
-- straight from its table carries none), so that only a later change lets
-- it through again.
CREATE FUNCTION sync_internal.set_aside(rows jsonb) RETURNS void
LANGUAGE sql AS $$
    WITH aside AS (
        SELECT DISTINCT ON (1, 2) (r->>'table') COLLATE "C" AS table_name, (r->>'key') COLLATE "C" AS key,
               (r->>'note')::bigint AS note,
               r->>'reason' AS reason
        FROM jsonb_array_elements(rows) AS r
        -- A row too large for one cohort is for another too (a stand-in's).
        ORDER BY 1, 2, 3 DESC)
    INSERT INTO sync.quarantine (table_name, key, note, reason, retry_at)
    SELECT a.table_name, a.key, greatest(a.note, newest.note), a.reason,
           now() + current_setting('magic_sync.retry_every')::interval
    FROM aside AS a
    -- sync.notes has no index: one scan for all the rows, not one each.
    LEFT JOIN (SELECT n.table_name, n.key, max(n.id) AS note
               FROM sync.notes n JOIN aside USING (table_name, key)
               GROUP BY n.table_name, n.key) AS newest USING (table_name, key)
    ON CONFLICT (table_name, key) DO UPDATE
    SET note = excluded.note, reason = excluded.reason, since = now(), retry_at = excluded.retry_at;
$$;

-- Sets the row of the oldest note aside, with why the pass failed on it:
-- planned around until it changes, its retry comes, or a relay starts.
CREATE FUNCTION sync_internal.set_aside_oldest_note(failure text) RETURNS void
LANGUAGE sql AS $$
    SELECT sync_internal.set_aside(jsonb_build_array(jsonb_build_object(
        'table', n.table_name, 'key', n.key, 'note', n.id,
        'reason', 'a pass failed on it: ' || failure)))
    FROM (SELECT id, table_name, key FROM sync.notes ORDER BY id LIMIT 1) AS n;
$$;

-- After a deploy that may have fixed what was set aside: rows no message
-- could carry, rows a replica refused, uploads the database refused — every
-- one of them is tried again at the next pass. Answers how many.
CREATE FUNCTION sync.retry() RETURNS bigint
LANGUAGE sql AS $$
    WITH rows AS (UPDATE sync.quarantine SET retry_at = now() RETURNING 1),
         refused AS (UPDATE sync.held_recorded SET retry_at = now() WHERE refused IS NOT NULL RETURNING 1),
         kept AS (UPDATE sync.inbox SET retry_at = now() RETURNING 1)
    SELECT (SELECT count(*) FROM rows) + (SELECT count(*) FROM refused) + (SELECT count(*) FROM kept);
$$;

-- Provisions a replica again from scratch at the next pass: what an
-- operator's "send it everything again" does. In the caller's transaction.
-- Answers whether the replica is one the relay knows.
CREATE FUNCTION sync.resync(replica uuid) RETURNS boolean
LANGUAGE sql AS $$
    WITH marked AS (UPDATE sync.replicas SET provision = true WHERE id = resync.replica RETURNING 1)
    SELECT count(*) > 0 FROM marked;
$$;
