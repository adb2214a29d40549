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

-- Drift stops only what it concerns (issue 36): sync.drift names the tables
-- each problem stops (NULL: the whole relay), the check records them, and
-- the status reads count a replica awaiting a fix only where a problem
-- concerns it; the health's drift entries name the tables.
ALTER TABLE sync.drift ADD COLUMN tables text[];
DROP FUNCTION sync_internal.record_drift(text[], text[]);
CREATE FUNCTION sync_internal.record_drift(problems text[], fixes text[], tables jsonb) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM sync.drift d WHERE NOT d.problem = ANY (problems);
    INSERT INTO sync.drift AS d (problem, fix, tables)
    SELECT n.p, n.f,
           CASE WHEN jsonb_typeof(tables -> (n.i::integer - 1)) = 'array'
                THEN ARRAY(SELECT jsonb_array_elements_text(tables -> (n.i::integer - 1))) END
    FROM unnest(problems, fixes) WITH ORDINALITY AS n(p, f, i)
    ON CONFLICT (problem) DO UPDATE SET fix = excluded.fix, tables = excluded.tables
    WHERE d.fix IS DISTINCT FROM excluded.fix OR d.tables IS DISTINCT FROM excluded.tables;
$$;
REVOKE ALL ON FUNCTION sync_internal.record_drift(text[], text[], jsonb) FROM PUBLIC;

CREATE OR REPLACE FUNCTION sync_internal.replica_states(scope jsonb)
RETURNS TABLE (
    id uuid, partition text, state text, rank integer,
    -- Notes (and group notes) not yet planned that may concern it.
    pending bigint,
    -- Messages and answers waiting in its outbox, not yet taken.
    owed bigint,
    -- The last message written for it is not confirmed applied.
    unconfirmed boolean,
    -- It is to be provisioned (now, or once its time has come).
    provisioning boolean,
    -- Its backlog, as it last said it: not empty.
    backlog boolean,
    -- Rows set aside that may concern it (sync.quarantine: every replica).
    set_aside bigint,
    -- Rows it refused because it held them back (nothing at fault), and
    -- uploads of its waiting for its provisioning to be confirmed.
    held_back bigint, waiting bigint,
    -- Its own that wait for a fix: rows it refused, uploads in the inbox.
    refused bigint, kept bigint,
    -- The database differs from the declarations (sync.drift) where it
    -- concerns this replica: the relay does not run at all, or a table it
    -- holds is stopped, or it is to be provisioned, which waits while any
    -- table is stopped.
    drift boolean,
    -- Sends failing to it (sync.sends).
    failures integer, last_error text, failed_at timestamptz,
    -- Messages that wait for it beyond the last it applied, and since when
    -- its position has not moved while they waited; it is stalled when that
    -- is longer than magic_sync.stalled_after and it was heard since (alive,
    -- taking nothing: sql/stalls.sql); the steps the worker took with it.
    messages_waiting bigint, stalled_since timestamptz, stalled boolean, stall_heals integer,
    heard_at timestamptz, applied_at timestamptz,
    backlog_tables jsonb, backlog_said_at timestamptz,
    -- Its wishes by where they stand (sql/wishes.sql): one pending (not
    -- answered, or answered of a version replaced since) keeps it catching
    -- up; one waiting is answered, and the replica tries it again itself.
    wishes jsonb, wishes_pending bigint
)
LANGUAGE sql STABLE AS $$
    WITH s AS (
        SELECT r.*, (r.last_sequence > r.applied_sequence
                     OR r.applied_epoch IS DISTINCT FROM r.epoch) AS unconfirmed
        FROM sync_internal.scope_replicas(scope) AS sc
        JOIN sync.replicas r ON r.id = sc.id
    ),
    -- Notes by partition: a note of no partition may concern every replica.
    notes AS (SELECT n.partition, count(*) AS n FROM sync.notes n GROUP BY n.partition),
    -- A group note naming a replica concerns that one; one naming a member,
    -- every replica.
    group_notes AS (
        SELECT g.replica, count(*) AS n FROM sync.group_notes g GROUP BY g.replica
    ),
    quarantined AS (SELECT count(*) AS n FROM sync.quarantine),
    drifted AS (
        SELECT EXISTS (SELECT 1 FROM sync.drift WHERE tables IS NULL) AS whole,
               EXISTS (SELECT 1 FROM sync.drift) AS stops,
               ARRAY(SELECT DISTINCT t FROM sync.drift, unnest(tables) AS t) AS stopped
    ),
    refused AS (
        SELECT h.replica, count(*) FILTER (WHERE NOT h.held_back) AS fix,
               count(*) FILTER (WHERE h.held_back) AS wait
        FROM sync.held h WHERE h.refused IS NOT NULL GROUP BY h.replica
    ),
    inbox AS (
        SELECT i.replica, count(*) FILTER (WHERE NOT i.waiting) AS fix,
               count(*) FILTER (WHERE i.waiting) AS wait
        FROM sync.inbox i GROUP BY i.replica
    ),
    outbox AS (SELECT o.replica, count(*) AS n FROM sync.outbox o
                WHERE NOT o.published GROUP BY o.replica),
    wishes AS (
        SELECT w.replica, count(*) FILTER (WHERE w.state = 'pending') AS pending,
               jsonb_build_object(
                   'pending', count(*) FILTER (WHERE w.state = 'pending'),
                   'waiting', count(*) FILTER (WHERE w.state = 'waiting'),
                   'refused', count(*) FILTER (WHERE w.state = 'refused'),
                   'superseded', count(*) FILTER (WHERE w.state = 'superseded'),
                   'applied', count(*) FILTER (WHERE w.state = 'applied')) AS counts
        FROM (SELECT w.replica, sync_internal.wish_state(w.version, w.answered, w.outcome) AS state
              FROM sync.sync_wishes w) AS w
        GROUP BY w.replica
    ),
    figures AS (
        SELECT s.id, s.partition, s.unconfirmed,
               coalesce((SELECT sum(n.n) FROM notes n
                         WHERE n.partition IS NULL OR s.partition IS NULL
                            OR n.partition = s.partition), 0)::bigint
               + coalesce((SELECT sum(g.n) FROM group_notes g
                           WHERE g.replica IS NULL OR g.replica = s.id), 0)::bigint AS pending,
               coalesce(o.n, 0) AS owed,
               s.provision OR s.provision_at IS NOT NULL AS provisioning,
               coalesce(NOT b.empty, false) AS backlog,
               q.n AS set_aside,
               coalesce(rf.wait, 0) AS held_back, coalesce(ib.wait, 0) AS waiting,
               coalesce(rf.fix, 0) AS refused, coalesce(ib.fix, 0) AS kept,
               (d.whole OR (d.stops AND (s.provision OR s.provision_at IS NOT NULL
                                         OR EXISTS (SELECT 1 FROM sync.held h
                                                    WHERE h.replica = s.id
                                                      AND h.table_name COLLATE "C" = ANY (d.stopped)))))
                   AS drift,
               se.failures, se.last_error, se.failed_at,
               st.messages AS messages_waiting,
               CASE WHEN st.stalled THEN st.since END AS stalled_since,
               st.stalled, st.heals AS stall_heals,
               s.heard_at, s.applied_at, b.tables AS backlog_tables, b.said_at AS backlog_said_at,
               coalesce(w.counts, sync_internal.no_wishes()) AS wishes,
               coalesce(w.pending, 0) AS wishes_pending
        FROM s
        CROSS JOIN quarantined q
        CROSS JOIN drifted d
        LEFT JOIN outbox o ON o.replica = s.id
        LEFT JOIN sync.backlogs b ON b.replica = s.id
        LEFT JOIN refused rf ON rf.replica = s.id
        LEFT JOIN inbox ib ON ib.replica = s.id
        LEFT JOIN sync.sends se ON se.replica = s.id
        LEFT JOIN wishes w ON w.replica = s.id
        CROSS JOIN LATERAL sync_internal.stall_of(
            s.id, s.epoch, s.applied_epoch, s.applied_sequence, s.applied_at, s.heard_at,
            s.provision OR s.provision_at IS NOT NULL, s.stall_heals, s.stall_healed_at,
            sync_internal.stalled_after()) st
    )
    SELECT f.id, f.partition, st.state, st.rank, f.pending, f.owed, f.unconfirmed,
           f.provisioning, f.backlog, f.set_aside, f.held_back, f.waiting, f.refused, f.kept,
           f.drift, f.failures, f.last_error, f.failed_at,
           f.messages_waiting, f.stalled_since, f.stalled, f.stall_heals,
           f.heard_at, f.applied_at,
           f.backlog_tables, f.backlog_said_at, f.wishes, f.wishes_pending
    FROM figures f
    CROSS JOIN LATERAL (
        SELECT CASE
            -- What is its own (a row it refused, an upload of its kept), or
            -- the database differing from the declarations where it
            -- concerns this replica (a table it holds stopped, or the
            -- whole relay).
            WHEN f.refused > 0 OR f.kept > 0 OR f.drift THEN 'awaiting_fix'
            WHEN f.failures IS NOT NULL THEN 'unreachable'
            WHEN f.stalled THEN 'stalled'
            -- Passed over far behind (relay/plan/behind.rs): what it missed
            -- is sent it by the next pass, its outbox empty meanwhile.
            WHEN f.pending > 0 OR f.owed > 0 OR f.unconfirmed OR f.provisioning OR f.backlog
                 OR EXISTS (SELECT 1 FROM sync.owed w WHERE w.replica = f.id)
                 OR EXISTS (SELECT 1 FROM sync.followers fl
                            WHERE fl.replica = f.id AND fl.behind_since IS NOT NULL)
                 OR f.set_aside > 0 OR f.held_back > 0 OR f.waiting > 0
                 OR f.wishes_pending > 0 THEN 'catching_up'
            ELSE 'synced'
        END AS state
    ) AS named
    CROSS JOIN LATERAL (
        SELECT named.state,
               array_position(sync_internal.status_states(), named.state) - 1 AS rank
    ) AS st
$$;

CREATE OR REPLACE FUNCTION sync_internal.health(scope jsonb, lim integer) RETURNS jsonb
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN (
    WITH s AS (SELECT * FROM sync_internal.scope_replicas(scope)),
    notes AS (
        SELECT n.noted_at FROM sync.notes n
        WHERE EXISTS (SELECT 1 FROM s WHERE n.partition IS NULL OR s.partition IS NULL
                                           OR n.partition = s.partition)
        UNION ALL
        SELECT g.noted_at FROM sync.group_notes g
        WHERE EXISTS (SELECT 1 FROM s WHERE g.replica IS NULL OR g.replica = s.id)
    ),
    set_aside AS (
        SELECT q.*, 'fix' AS remedy FROM sync.quarantine q
    ),
    refused AS (
        SELECT h.replica, h.table_name, h.key, h.refused, h.refused_by, h.refused_at,
               h.held_back, h.retry_at,
               CASE WHEN h.held_back THEN 'wait' ELSE 'fix' END AS remedy
        FROM sync.held h JOIN s ON s.id = h.replica
        WHERE h.refused IS NOT NULL
    ),
    inbox AS (
        SELECT i.replica, i.table_name, i.key, i.op, i.reason, i.waiting, i.kept_at, i.tries,
               i.retry_at, CASE WHEN i.waiting THEN 'wait' ELSE 'fix' END AS remedy
        FROM sync.inbox i JOIN s ON s.id = i.replica
    ),
    failing AS (
        SELECT se.*, 'wait' AS remedy FROM sync.sends se JOIN s ON s.id = se.replica
    ),
    stalled AS (
        SELECT * FROM sync_internal.stalled(ARRAY(SELECT s.id FROM s))
    ),
    drift AS (
        SELECT d.*, 'fix' AS remedy FROM sync.drift d
    ),
    -- The last declaration change no difference could say (a key or a
    -- relation changed: relay/redeclared.rs), while replicas of the scope
    -- it provisioned again, or any since, have not confirmed a snapshot.
    redeclared AS (
        SELECT a.what, a.raised_at, 'wait' AS remedy,
               (SELECT count(*) FROM sync.replicas r JOIN s ON s.id = r.id
                WHERE r.live AND (r.provision
                      OR coalesce(r.snapshot_sequence > r.applied_sequence, false))) AS provisioning
        FROM sync.alarms a
        WHERE a.id = (SELECT max(x.id) FROM sync.alarms x
                      WHERE x.what LIKE 'magic_sync: a declaration change provisions again %')
    )
    SELECT jsonb_build_object(
        'healthy', NOT EXISTS (SELECT 1 FROM set_aside WHERE remedy = 'fix')
                   AND NOT EXISTS (SELECT 1 FROM refused WHERE remedy = 'fix')
                   AND NOT EXISTS (SELECT 1 FROM inbox WHERE remedy = 'fix')
                   AND NOT EXISTS (SELECT 1 FROM stalled WHERE remedy = 'fix')
                   AND NOT EXISTS (SELECT 1 FROM drift),
        'notes', (SELECT jsonb_build_object(
                      'pending', count(*),
                      'oldest_at', min(noted_at),
                      'oldest_age_seconds',
                          round(extract(epoch FROM statement_timestamp() - min(noted_at)), 3),
                      'remedy', 'wait')
                  FROM notes),
        'set_aside', jsonb_build_object(
            'total', (SELECT count(*) FROM set_aside),
            'first', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                          'table', a.table_name, 'key', a.key, 'reason', a.reason,
                          'since', a.since, 'retry_at', a.retry_at, 'remedy', a.remedy)
                          ORDER BY a.since, a.table_name, a.key), '[]')
                      FROM (SELECT * FROM set_aside ORDER BY since, table_name, key LIMIT lim) a)),
        'refused', jsonb_build_object(
            'total', (SELECT count(*) FROM refused),
            'first', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                          'replica', r.replica, 'table', r.table_name, 'key', r.key,
                          'reason', r.refused, 'message', r.refused_by,
                          'refused_at', r.refused_at, 'held_back', r.held_back,
                          'retry_at', r.retry_at, 'remedy', r.remedy)
                          ORDER BY r.remedy, r.refused_at, r.replica, r.table_name, r.key), '[]')
                      FROM (SELECT * FROM refused
                            ORDER BY remedy, refused_at, replica, table_name, key
                            LIMIT lim) r)),
        'inbox', jsonb_build_object(
            'total', (SELECT count(*) FROM inbox),
            'first', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                          'replica', i.replica, 'table', i.table_name, 'key', i.key,
                          'op', i.op, 'reason', i.reason, 'waiting', i.waiting,
                          'kept_at', i.kept_at, 'tries', i.tries, 'retry_at', i.retry_at,
                          'remedy', i.remedy)
                          ORDER BY i.remedy, i.kept_at, i.replica, i.table_name, i.key), '[]')
                      FROM (SELECT * FROM inbox
                            ORDER BY remedy, kept_at, replica, table_name, key
                            LIMIT lim) i)),
        'failing', jsonb_build_object(
            'total', (SELECT count(*) FROM failing),
            'first', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                          'replica', f.replica, 'failures', f.failures,
                          'refusals', f.refusals, 'message', f.message,
                          'last_error', f.last_error, 'failed_at', f.failed_at,
                          'retry_at', f.retry_at, 'remedy', f.remedy)
                          ORDER BY f.failed_at, f.replica), '[]')
                      FROM (SELECT * FROM failing ORDER BY failed_at, replica LIMIT lim) f)),
        'stalled', jsonb_build_object(
            'total', (SELECT count(*) FROM stalled),
            'first', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                          'replica', t.replica, 'since', t.since, 'messages', t.messages,
                          'heard_at', t.heard_at, 'heals', t.heals, 'healed_at', t.healed_at,
                          'remedy', t.remedy)
                          ORDER BY t.remedy, t.since, t.replica), '[]')
                      FROM (SELECT * FROM stalled ORDER BY remedy, since, replica LIMIT lim) t)),
        'drift', jsonb_build_object(
            'total', (SELECT count(*) FROM drift),
            'first', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                          'problem', d.problem, 'fix', d.fix, 'found_at', d.found_at,
                          'tables', d.tables, 'remedy', d.remedy)
                          ORDER BY d.found_at, d.problem), '[]')
                      FROM (SELECT * FROM drift ORDER BY found_at, problem LIMIT lim) d)))
    -- Only while it lasts: a health with nothing of it reads as before.
    || (SELECT CASE WHEN count(*) = 0 THEN '{}'::jsonb ELSE jsonb_build_object(
            'redeclared', jsonb_build_object(
                'total', count(*),
                'first', CASE WHEN lim > 0 THEN jsonb_agg(jsonb_build_object(
                             'what', r.what, 'raised_at', r.raised_at,
                             'provisioning', r.provisioning, 'remedy', r.remedy))
                         ELSE '[]'::jsonb END)) END
        FROM redeclared r WHERE r.provisioning > 0)
    );
END
$$;

-- Issue 37: a pass costs its batch, not the backlog: the notes are read
-- oldest first from an index, and a row's newest note is one look-up
-- (sql/schema.sql says why each write pays for them).
CREATE INDEX notes_in_order ON sync.notes (id);
CREATE INDEX notes_of_rows ON sync.notes (table_name, key, id);

-- sync.what_if (issue 36): a migration tried in a relay pass that is rolled
-- back, answering what the pass would send and let go of.
-- Who is sent what, before the pass: each replica's rows, the message
-- that carried each, and whether one is leaving.
CREATE FUNCTION sync_internal.what_if_held() RETURNS TABLE (
    replica uuid, table_name text, key text, sent bigint, leaving boolean)
LANGUAGE sql STABLE AS $$
    SELECT h.replica, h.table_name, h.key, h.sent, h.leaving IS NOT NULL FROM sync.held h
$$;

-- CALL it outside a transaction block: it commits what came before it, as
-- sync.relay() does, and runs in a REPEATABLE READ transaction of its own
-- (a pass's), which it ends having changed nothing.
CREATE PROCEDURE sync.what_if(migration text, INOUT answer jsonb DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    summary jsonb;
BEGIN
    PERFORM sync_internal.outside_a_transaction_block();
    COMMIT;
    LOOP
        SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
        summary := NULL;
        BEGIN
            -- What each replica holds as the engine records it, before.
            CREATE TEMP TABLE sync_what_if_before ON COMMIT DROP AS
                SELECT * FROM sync_internal.what_if_held();
            EXECUTE migration;
            summary := sync_internal.pass(false);
            IF summary IS NOT NULL THEN
                -- A row sent: one each replica holds after the pass, not
                -- leaving, that a message of the pass carried (it held no
                -- such row before, or held it as another message carried
                -- it). A row let go of: one it held, not leaving, that it
                -- holds no more, or that a message of the pass takes back.
                WITH after AS (SELECT * FROM sync_internal.what_if_held()),
                sent AS (
                    SELECT a.replica, a.table_name, count(*) AS n FROM after a
                    WHERE NOT a.leaving
                      AND NOT EXISTS (SELECT 1 FROM sync_what_if_before b
                                      WHERE b.replica = a.replica AND b.table_name = a.table_name
                                        AND b.key = a.key AND b.sent = a.sent AND NOT b.leaving)
                    GROUP BY 1, 2),
                let_go AS (
                    SELECT b.replica, b.table_name, count(*) AS n FROM sync_what_if_before b
                    WHERE NOT b.leaving
                      AND NOT EXISTS (SELECT 1 FROM after a
                                      WHERE a.replica = b.replica AND a.table_name = b.table_name
                                        AND a.key = b.key AND NOT a.leaving)
                    GROUP BY 1, 2),
                per AS (
                    SELECT coalesce(s.replica, l.replica) AS replica,
                           coalesce(s.table_name, l.table_name) AS table_name,
                           coalesce(s.n, 0) AS sent, coalesce(l.n, 0) AS let_go
                    FROM sent s FULL JOIN let_go l
                      ON l.replica = s.replica AND l.table_name = s.table_name),
                by_replica AS (
                    SELECT p.replica, sum(p.sent) AS sent, sum(p.let_go) AS let_go,
                           jsonb_agg(jsonb_build_object('table', p.table_name, 'sent', p.sent,
                                                        'let_go', p.let_go)
                                     ORDER BY p.table_name) AS tables
                    FROM per p GROUP BY p.replica),
                by_table AS (
                    SELECT p.table_name, sum(p.sent) AS sent, sum(p.let_go) AS let_go,
                           count(*) AS replicas
                    FROM per p GROUP BY p.table_name)
                SELECT jsonb_build_object(
                    'contract', 1,
                    'redeclared', summary->'redeclared',
                    'replicas', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                              'replica', r.replica, 'sent', r.sent,
                                              'let_go', r.let_go, 'tables', r.tables)
                                              ORDER BY r.replica) FROM by_replica r), '[]'),
                    'tables', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                            'table', t.table_name, 'sent', t.sent,
                                            'let_go', t.let_go, 'replicas', t.replicas)
                                            ORDER BY t.table_name) FROM by_table t), '[]'),
                    'total', jsonb_build_object(
                        'sent', coalesce((SELECT sum(sent) FROM per), 0),
                        'let_go', coalesce((SELECT sum(let_go) FROM per), 0),
                        'replicas', (SELECT count(*) FROM by_replica)),
                    'pass', summary)
                INTO answer;
            END IF;
            -- Undoes the migration and the pass (the block is a
            -- subtransaction); the answer, a variable, stays.
            RAISE EXCEPTION USING ERRCODE = 'MSWI1', MESSAGE = 'magic_sync: what if, undone';
        EXCEPTION
            WHEN SQLSTATE 'MSWI1' THEN
                NULL;
            WHEN serialization_failure THEN
                summary := NULL;
        END;
        -- NULL: another pass committed after this snapshot was taken; tried
        -- again in a fresh one.
        EXIT WHEN summary IS NOT NULL;
        ROLLBACK;
    END LOOP;
    COMMIT;
END
$$;
REVOKE ALL ON FUNCTION sync_internal.what_if_held() FROM PUBLIC;
REVOKE ALL ON PROCEDURE sync.what_if(text, jsonb) FROM PUBLIC;

-- A table declared for the first time sends only its rows (issue 36): the
-- relay keeps the declarations' digest in parts too. A database upgraded
-- has none yet: its first declaration change provisions every replica, as
-- before, and records them.
ALTER TABLE sync.relay_state ADD COLUMN declared_parts jsonb;

-- A delivery in one call (issue 37): sync.take acknowledges what a device
-- applied, files its report, and answers the next message and whether more
-- waits. It files as sync.receive does, switching itself (so no SECURITY
-- DEFINER). Roles let take and acknowledge before (sync.allow_gateway) are
-- let call it too, as the function now grants.
CREATE FUNCTION sync."take"(
	"replica" uuid,
	"ack" TEXT,
	"report" bytea
) RETURNS TABLE (
	"id" TEXT,
	"message" bytea,
	"reported" bool,
	"more" bool
)
VOLATILE
LANGUAGE c
AS 'MODULE_PATHNAME', 'take_wrapper';
REVOKE ALL ON FUNCTION sync.take(uuid, text, bytea) FROM PUBLIC;
DO $$
DECLARE
    gateway regrole;
BEGIN
    FOR gateway IN
        SELECT a.grantee::regrole
        FROM pg_proc p, aclexplode(p.proacl) a
        WHERE p.oid = 'sync.ack_next(uuid, text)'::regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION sync.take(uuid, text, bytea) TO %s', gateway);
    END LOOP;
END
$$;
CREATE OR REPLACE FUNCTION sync.allow_gateway(gateway regrole) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- A regrole prints as a quoted identifier.
    EXECUTE format('GRANT USAGE ON SCHEMA sync TO %s', gateway);
    EXECUTE format('GRANT EXECUTE ON FUNCTION sync.next(uuid), sync.ack(uuid, text), '
                   'sync.ack_next(uuid, text), sync.take(uuid, text, bytea), '
                   'sync.receive(uuid, bytea) TO %s', gateway);
END
$$;

-- A column added reaches a register's build when it has it (issue 36): a
-- replica says the columns its build holds of each table the server sends
-- it once per open (Up.columns); the server keeps them, and notes a table
-- whose columns grew by one it sends, whose rows the replica holds the
-- next pass sends again.
CREATE TABLE sync.replica_columns (
    replica       uuid NOT NULL,
    table_name    text COLLATE "C" NOT NULL,
    columns       text[] NOT NULL,
    said_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (replica, table_name)
);
CREATE TABLE sync.columns_gained (
    replica       uuid NOT NULL,
    table_name    text COLLATE "C" NOT NULL,
    columns       text[] NOT NULL,
    since         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (replica, table_name)
);
SELECT pg_catalog.pg_extension_config_dump('sync.replica_columns', '');
SELECT pg_catalog.pg_extension_config_dump('sync.columns_gained', '');

-- A key or relation changed provisions again only the tables it concerns
-- (issue 36): the replicas holding the table are sent a snapshot naming
-- those tables (sync.replicas.provision_only), and of the others only what
-- differs; a follower of a stand-in parts, keeping what it holds of the
-- journaled tables as its own, and follows again from the pass's end.
ALTER TABLE sync.replicas ADD COLUMN provision_only text[];
CREATE OR REPLACE FUNCTION sync_internal.stop_following_provisioned() RETURNS void
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

-- A replica far behind is sent what changed in one go once it takes its
-- messages (issue 37, magic_sync.messages_ahead): what it is owed
-- meanwhile, and whether a pass is due to send it.
CREATE TABLE sync.owed (
    replica       uuid NOT NULL,
    table_name    text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    note          bigint NOT NULL,
    PRIMARY KEY (replica, table_name, key)
);
SELECT pg_catalog.pg_extension_config_dump('sync.owed', '');
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
CREATE OR REPLACE FUNCTION sync_internal.work_waits() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM sync.notes)
        OR EXISTS (SELECT 1 FROM sync.group_notes)
        OR EXISTS (SELECT 1 FROM sync.replicas WHERE live AND (provision OR provision_at <= now()))
        OR EXISTS (SELECT 1 FROM sync.quarantine WHERE retry_at <= now())
        OR EXISTS (SELECT 1 FROM sync.held_recorded WHERE refused IS NOT NULL AND retry_at <= now())
        OR EXISTS (SELECT 1 FROM sync.inbox WHERE waiting OR retry_at <= now())
        OR sync_internal.catch_up_due();
$$;
REVOKE ALL ON FUNCTION sync_internal.catch_up_due() FROM PUBLIC;

-- A follower far behind is sent none of its stand-in's messages until it
-- catches up (relay/plan/behind.rs): the last it was sent; one parting
-- meanwhile is provisioned again.
ALTER TABLE sync.followers ADD COLUMN behind_since bigint;
-- A follower that stops following keeps what it holds, as rows of its own:
-- its stand-in's rows, each under the follower's own message that carried
-- it. What a follower refuses is recorded on rows of its own (file/
-- rejections.rs), so it parts first. The view reads the follower as it was
-- before the statement's delete. Answers whether it was following.
CREATE OR REPLACE FUNCTION sync_internal.part(replica uuid) RETURNS boolean
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
