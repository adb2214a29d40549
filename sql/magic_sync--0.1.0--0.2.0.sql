-- magic_sync 0.1.0 to 0.2.0: `ALTER EXTENSION magic_sync UPDATE TO '0.2.0'`.
-- Every change to the extension's SQL after 0.1.0 is written here, in
-- order, so that a database upgraded from 0.1.0 ends exactly as one where
-- 0.2.0 was installed fresh (tests/tests/upgrade.rs compares the two).
-- Once 0.2.0 is released (sql/releases.txt), this file is never edited
-- again, and the next change starts magic_sync--0.2.0--0.3.0.sql.

-- A relay starting tries what was set aside once a pass, not once a round
-- of it: a row still too large no longer fails every pass.
CREATE OR REPLACE FUNCTION sync_internal.pass(starts boolean) RETURNS jsonb
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
