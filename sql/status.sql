-- Where things stand, from any SQL client (docs/src/status.md): the status
-- reads. Each answers jsonb carrying `contract` (the version of its JSON:
-- a field renamed or a meaning changed raises it) and `now` (the server's
-- time, which every time in the answer is measured against), reads one
-- snapshot (each is STABLE: inside a READ COMMITTED transaction it answers
-- from its statement's moment, inside REPEATABLE READ from the caller's),
-- and takes a scope, counting only live replicas.
--
-- A scope, as jsonb:
--   NULL, '{}' or '"all"'                every live replica;
--   '{"replicas": ["<uuid>", ...]}'      those of them that are live;
--   '{"partition": "<partition>"}'       the live replicas of a partition.

-- The live replicas of a scope, with their partitions. A scope of any other
-- shape is refused with an error naming what is wrong with it.
CREATE FUNCTION sync_internal.scope_replicas(scope jsonb)
RETURNS TABLE (id uuid, partition text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    kind text := jsonb_typeof(scope);
    keys text[];
BEGIN
    IF scope IS NULL OR scope = '{}'::jsonb OR scope = '"all"'::jsonb THEN
        RETURN QUERY SELECT r.id, r.partition FROM sync.replicas r WHERE r.live;
        RETURN;
    END IF;
    IF kind <> 'object' THEN
        PERFORM sync_internal.refuse('22023',
            format('magic_sync: a scope is an object, "all" or NULL, not %s', scope),
            'Pass {"replicas": [...]}, {"partition": "..."}, or NULL for every replica.');
    END IF;
    SELECT array_agg(k ORDER BY k) INTO keys FROM jsonb_object_keys(scope) AS k;
    IF keys = ARRAY['replicas'] THEN
        IF jsonb_typeof(scope->'replicas') <> 'array' THEN
            PERFORM sync_internal.refuse('22023',
                format('magic_sync: a scope''s "replicas" is an array of replica ids, not %s',
                       scope->'replicas'));
        END IF;
        RETURN QUERY
            SELECT r.id, r.partition FROM sync.replicas r
            WHERE r.live AND r.id = ANY (sync_internal.scope_ids(scope->'replicas'));
    ELSIF keys = ARRAY['partition'] THEN
        IF jsonb_typeof(scope->'partition') NOT IN ('string', 'number') THEN
            PERFORM sync_internal.refuse('22023',
                format('magic_sync: a scope''s "partition" is a partition''s value, not %s',
                       scope->'partition'));
        END IF;
        RETURN QUERY
            SELECT r.id, r.partition FROM sync.replicas r
            WHERE r.live AND r.partition = scope->>'partition';
    ELSE
        PERFORM sync_internal.refuse('22023',
            format('magic_sync: a scope names "replicas" or "partition", not %s',
                   array_to_string(keys, ', ')),
            'Pass {"replicas": [...]}, {"partition": "..."}, or NULL for every replica.');
    END IF;
END
$$;

-- The replica ids of a scope's "replicas", each checked to be a uuid.
CREATE FUNCTION sync_internal.scope_ids(ids jsonb) RETURNS uuid[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    id jsonb;
    parsed uuid[] := '{}';
BEGIN
    FOR id IN SELECT jsonb_array_elements(ids) LOOP
        IF jsonb_typeof(id) <> 'string' THEN
            PERFORM sync_internal.refuse('22023',
                format('magic_sync: a replica id in a scope is a uuid, not %s', id));
        END IF;
        BEGIN
            parsed := parsed || (id #>> '{}')::uuid;
        EXCEPTION WHEN invalid_text_representation THEN
            PERFORM sync_internal.refuse('22023',
                format('magic_sync: a replica id in a scope is a uuid, not %s', id));
        END;
    END LOOP;
    RETURN parsed;
END
$$;

-- ---------------------------------------------------------------------------
-- Where each replica stands.

-- The version of the reads' JSON: a field renamed, or a meaning changed,
-- raises it.
CREATE FUNCTION sync_internal.status_contract() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;

-- A count a read is given (lim, offset): 0 or more. NULL or a negative one
-- is refused, naming the argument.
CREATE FUNCTION sync_internal.status_count(what text, n integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF n IS NULL OR n < 0 THEN
        PERFORM sync_internal.refuse('22023',
            format('magic_sync: %s is a count, 0 or more, not %s', what, coalesce(n::text, 'NULL')));
    END IF;
    RETURN n;
END
$$;

-- Where a wish stands: as its answer says only while that answer is of its
-- version (protocol A.6); pending until then.
CREATE FUNCTION sync_internal.wish_state(version bigint, answered bigint, outcome text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN answered IS NOT DISTINCT FROM version AND outcome IS NOT NULL
                THEN outcome ELSE 'pending' END
$$;

-- A replica's wishes counted by where they stand, when it has none.
CREATE FUNCTION sync_internal.no_wishes() RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT '{"pending": 0, "waiting": 0, "refused": 0, "superseded": 0, "applied": 0}'::jsonb
$$;

-- The states a replica is in, worst first.
CREATE FUNCTION sync_internal.status_states() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['awaiting_fix', 'unreachable', 'stalled', 'catching_up', 'synced']
$$;

-- Each live replica of the scope, its state and what makes it so
-- (docs/src/status.md, "The states"). It reads only what the engine
-- records, never the rows a replica should hold: a change a replica lacks
-- is a note not yet planned, a message it has not confirmed, a
-- provisioning due, or a row set aside, and each of those is counted here.
-- `rank` orders the states worst first (0: awaiting_fix ... 4: synced).
CREATE FUNCTION sync_internal.replica_states(scope jsonb)
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

-- One replica as the overview and the listing show it.
CREATE FUNCTION sync_internal.replica_json(r record) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object(
        'id', r.id,
        'partition', r.partition,
        'state', r.state,
        'why', jsonb_build_object(
            'pending', r.pending,
            'unconfirmed', r.unconfirmed,
            'provisioning', r.provisioning,
            'backlog', r.backlog,
            'set_aside', r.set_aside,
            'held_back', r.held_back,
            'waiting', r.waiting,
            'refused', r.refused,
            'kept', r.kept,
            'drift', r.drift,
            'failures', coalesce(r.failures, 0),
            'last_error', r.last_error,
            'failed_at', r.failed_at,
            'messages_waiting', r.messages_waiting,
            'stalled_since', r.stalled_since),
        'heard_at', r.heard_at,
        'applied_at', r.applied_at,
        'backlog', CASE WHEN r.backlog_said_at IS NULL THEN NULL
                        ELSE jsonb_build_object('tables', r.backlog_tables,
                                                'said_at', r.backlog_said_at) END,
        'owed', r.owed,
        'wishes', r.wishes);
END
$$;

-- A page of the scope's replicas in one state (NULL: every state), worst
-- first, the longest silent first within a state: (total, the page).
CREATE FUNCTION sync_internal.replica_page(scope jsonb, state text, skip integer, lim integer,
                                          OUT total bigint, OUT page jsonb)
-- In plpgsql, which keeps its plan, as the overview does.
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    WITH r AS (
        SELECT * FROM sync_internal.replica_states(scope) r
        WHERE replica_page.state IS NULL OR r.state = replica_page.state
    )
    SELECT (SELECT count(*) FROM r),
           coalesce((SELECT jsonb_agg(sync_internal.replica_json(p) ORDER BY p.rank, p.heard_at NULLS FIRST, p.id)
                     FROM (SELECT * FROM r ORDER BY r.rank, r.heard_at NULLS FIRST, r.id
                           OFFSET skip LIMIT lim) p), '[]')
    INTO total, page;
END
$$;

-- Per declared table, over the scope's replicas: notes not yet planned,
-- rows on their way (in messages not confirmed), rows set aside (on the
-- server, or refused by a replica), rows written by replicas and not filed
-- (as their backlogs said, and kept in the inbox), and whether the table is
-- where it should be on every one of them.
--
-- Written in plpgsql so that its plan is kept for the session: planning it
-- cost more than running it while every replica is caught up.
CREATE FUNCTION sync_internal.table_figures(scope jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN (
    WITH s AS (
        SELECT r.id, r.partition, r.applied_sequence,
               (r.last_sequence > r.applied_sequence
                OR r.applied_epoch IS DISTINCT FROM r.epoch) AS unconfirmed,
               -- A provisioning due or a snapshot not confirmed: it may lack
               -- rows of any table that nothing else records.
               (r.provision OR r.provision_at IS NOT NULL
                OR r.applied_epoch IS DISTINCT FROM r.epoch
                OR coalesce(r.snapshot_sequence > r.applied_sequence, false)) AS provisioning
        FROM sync_internal.scope_replicas(scope) AS sc
        JOIN sync.replicas r ON r.id = sc.id
    ),
    pending AS MATERIALIZED (
        SELECT n.table_name, count(*) AS n FROM sync.notes n
        WHERE EXISTS (SELECT 1 FROM s WHERE n.partition IS NULL OR s.partition IS NULL
                                           OR n.partition = s.partition)
        GROUP BY n.table_name
        UNION ALL
        SELECT g.table_name, count(*) FROM sync.group_notes g
        WHERE EXISTS (SELECT 1 FROM s WHERE g.replica IS NULL OR g.replica = s.id)
        GROUP BY g.table_name
    ),
    -- Rows on their way to the replicas with something unconfirmed: held,
    -- not refused, and sent in a message not confirmed or leaving. Read
    -- from sync.held's counts (sql/held_counts.sql), not row by row, and
    -- not at all while every replica is confirmed (a one-time filter).
    in_flight AS MATERIALIZED (
        SELECT c.table_name, sum(c.n) AS n
        FROM sync.held_counts c JOIN s ON s.id = c.replica
        WHERE s.unconfirmed AND (c.leaving OR c.sent > s.applied_sequence)
          AND EXISTS (SELECT 1 FROM s WHERE s.unconfirmed)
        GROUP BY c.table_name
        UNION ALL
        -- A follower's share of its stand-in's rows (schema.sql's view
        -- sync.held): sent before it began following, in flight while its
        -- first message as a follower is unconfirmed; sent since, while its
        -- message that carried them is.
        SELECT c.table_name, sum(c.n)
        FROM sync.followers f JOIN s ON s.id = f.replica
        JOIN sync.held_counts c ON c.replica = f.stand_in AND NOT c.leaving
        WHERE s.unconfirmed
          AND ((c.sent <= f.since AND f.since_sequence > s.applied_sequence)
               OR (c.sent > f.since AND EXISTS (
                   SELECT 1 FROM sync.follower_messages m
                   WHERE m.replica = f.replica AND m.stand_in_sequence = c.sent
                     AND m.sequence > s.applied_sequence)))
        GROUP BY c.table_name
        UNION ALL
        -- Its stand-in's rows taken back by a message it has not applied.
        SELECT h.table_name, count(*)
        FROM sync.followers f JOIN s ON s.id = f.replica
        JOIN sync.held_recorded h ON h.replica = f.stand_in AND h.leaving IS NOT NULL
        JOIN sync.follower_messages m ON m.replica = f.replica AND m.stand_in_sequence = h.leaving
        WHERE s.unconfirmed AND m.sequence > s.applied_sequence
        GROUP BY h.table_name
    ),
    set_aside AS MATERIALIZED (
        SELECT q.table_name, count(*) AS n FROM sync.quarantine q GROUP BY q.table_name
        UNION ALL
        SELECT h.table_name, count(*) FROM sync.held h JOIN s ON s.id = h.replica
        WHERE h.refused IS NOT NULL GROUP BY h.table_name
    ),
    unfiled AS MATERIALIZED (
        SELECT i.table_name, count(*) AS n FROM sync.inbox i JOIN s ON s.id = i.replica
        GROUP BY i.table_name
        UNION ALL
        SELECT t ->> 'table', sum(coalesce((t ->> 'unsent')::bigint, 0)
                                  + coalesce((t ->> 'unfiled')::bigint, 0))::bigint
        FROM sync.backlogs b JOIN s ON s.id = b.replica
        CROSS JOIN LATERAL jsonb_array_elements(b.tables) AS t
        WHERE NOT b.empty
        GROUP BY 1
    ),
    figures AS MATERIALIZED (
        SELECT t.name, t.position, t.mirror,
               coalesce((SELECT sum(p.n) FROM pending p WHERE p.table_name = t.name), 0)::bigint AS pending,
               coalesce((SELECT sum(f.n) FROM in_flight f WHERE f.table_name = t.name), 0)::bigint AS in_flight,
               coalesce((SELECT sum(a.n) FROM set_aside a WHERE a.table_name = t.name), 0)::bigint AS set_aside,
               coalesce((SELECT sum(u.n) FROM unfiled u WHERE u.table_name = t.name), 0)::bigint AS unfiled
        FROM sync.tables t
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'table', f.name,
               'pending', f.pending,
               'in_flight', f.in_flight,
               'set_aside', f.set_aside,
               'unfiled', f.unfiled,
               'synced', f.pending = 0 AND f.in_flight = 0 AND f.set_aside = 0 AND f.unfiled = 0
                         -- A table that goes down is not synced on a replica
                         -- being provisioned.
                         AND (f.mirror IN ('record', 'setting')
                              OR NOT EXISTS (SELECT 1 FROM s WHERE s.provisioning)))
             ORDER BY f.position, f.name), '[]')
    FROM figures f
    );
END
$$;

-- What the engine waits on over a scope, each list cut at lim (its total
-- uncut), each item saying whether it waits for the network and the relay
-- ("wait") or for a fix to be deployed ("fix"). In plpgsql, which keeps its
-- plan, as table_figures does.
CREATE FUNCTION sync_internal.health(scope jsonb, lim integer) RETURNS jsonb
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

-- ---------------------------------------------------------------------------
-- The reads.

-- Is everything where it should be? (docs/src/status.md, "sync.overview")
CREATE FUNCTION sync.overview(scope jsonb DEFAULT NULL, lim integer DEFAULT 20) RETURNS jsonb
LANGUAGE plpgsql STABLE
-- Compiling the plan costs more than running it (hundreds of milliseconds),
-- and so does planning it: plpgsql keeps a generic plan for the session,
-- as it does table_figures's and health's.
SET jit = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN (
    WITH r AS (SELECT * FROM sync_internal.replica_states(scope)),
    health AS (SELECT sync_internal.health(scope, sync_internal.status_count('lim', lim)) AS h)
    SELECT jsonb_build_object(
        'contract', sync_internal.status_contract(),
        'now', statement_timestamp(),
        'healthy', (SELECT (h ->> 'healthy')::boolean FROM health),
        'states', (SELECT jsonb_object_agg(st, coalesce(c.n, 0))
                   FROM unnest(sync_internal.status_states()) AS st
                   LEFT JOIN (SELECT r.state, count(*) AS n FROM r GROUP BY r.state) c
                          ON c.state = st),
        'replicas', jsonb_build_object(
            'first', (SELECT coalesce(jsonb_agg(sync_internal.replica_json(p)
                                                ORDER BY p.rank, p.heard_at NULLS FIRST, p.id), '[]')
                      FROM (SELECT * FROM r ORDER BY r.rank, r.heard_at NULLS FIRST, r.id
                            LIMIT sync_internal.status_count('lim', lim)) p),
            'total', (SELECT count(*) FROM r)),
        'tables', sync_internal.table_figures(scope),
        'health', (SELECT h FROM health))
    );
END
$$;

-- The scope's replicas a page at a time, in the overview's order, in one
-- state or in all. (docs/src/status.md, "sync.listing")
CREATE FUNCTION sync.listing(scope jsonb DEFAULT NULL, state text DEFAULT NULL,
                             "offset" integer DEFAULT 0, lim integer DEFAULT 20)
RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off AS $$
DECLARE
    page record;
BEGIN
    IF state IS NOT NULL AND NOT state = ANY (sync_internal.status_states()) THEN
        PERFORM sync_internal.refuse('22023',
            format('magic_sync: a replica is in no state "%s"', state),
            'The states are ' || array_to_string(sync_internal.status_states(), ', ')
            || ', or NULL for all of them.');
    END IF;
    SELECT * INTO page FROM sync_internal.replica_page(scope, state,
        sync_internal.status_count('offset', "offset"), sync_internal.status_count('lim', lim));
    RETURN jsonb_build_object(
        'contract', sync_internal.status_contract(),
        'now', statement_timestamp(),
        'state', state,
        'offset', "offset",
        'lim', lim,
        'total', page.total,
        'replicas', page.page);
END
$$;

-- What the engine waits on, and whether anything waits for a fix.
-- (docs/src/status.md, "sync.health")
CREATE FUNCTION sync.health(scope jsonb DEFAULT NULL, lim integer DEFAULT 20) RETURNS jsonb
LANGUAGE sql STABLE SET jit = off AS $$
    SELECT jsonb_build_object('contract', sync_internal.status_contract(),
                              'now', statement_timestamp())
           || sync_internal.health(scope, sync_internal.status_count('lim', lim))
$$;

-- A label's value as OpenMetrics writes it: backslash, double quote and
-- newline escaped.
CREATE FUNCTION sync_internal.metric_label(value text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT replace(replace(replace(value, E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n')
$$;

-- The same figures as the overview, in Prometheus's text format (0.0.4,
-- which `promtool check metrics` holds it to) for a scrape through a SQL
-- exporter (docs/src/status.md, "sync.metrics"):
-- gauges labelled by state and by table, never by replica unless
-- `by_replica` asks (a fleet's ids would make a series each). In plpgsql,
-- which keeps its plan, as the overview does.
CREATE FUNCTION sync.metrics(by_replica boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql STABLE SET jit = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN (
    WITH r AS (SELECT * FROM sync_internal.replica_states(NULL)),
    h AS (SELECT sync_internal.health(NULL, 0) AS h),
    -- Worked out once: read once in a subquery of each of five families,
    -- it would be inlined there and worked out for each.
    t AS MATERIALIZED (SELECT jsonb_array_elements(sync_internal.table_figures(NULL)) AS t),
    lines AS (
        SELECT 1 AS part, 0 AS n, '# TYPE magic_sync_replicas gauge' || E'\n'
               || '# HELP magic_sync_replicas Live replicas in each state.' AS line
        UNION ALL
        SELECT 1, 1 + array_position(sync_internal.status_states(), st),
               format('magic_sync_replicas{state="%s"} %s', st,
                      (SELECT count(*) FROM r WHERE r.state = st))
        FROM unnest(sync_internal.status_states()) AS st
        UNION ALL
        SELECT 2, 0, '# TYPE magic_sync_healthy gauge' || E'\n'
               || '# HELP magic_sync_healthy 1 while nothing waits for a fix.' || E'\n'
               || format('magic_sync_healthy %s', CASE WHEN (h.h->>'healthy')::boolean THEN 1 ELSE 0 END)
               || E'\n' || '# TYPE magic_sync_notes_pending gauge' || E'\n'
               || '# HELP magic_sync_notes_pending Changes noted and not yet planned.' || E'\n'
               || format('magic_sync_notes_pending %s', h.h->'notes'->>'pending')
               || E'\n' || '# TYPE magic_sync_notes_oldest_age_seconds gauge' || E'\n'
               || '# HELP magic_sync_notes_oldest_age_seconds How long the oldest change not yet planned has waited.' || E'\n'
               || format('magic_sync_notes_oldest_age_seconds %s',
                         coalesce(h.h->'notes'->>'oldest_age_seconds', '0'))
               || E'\n' || '# TYPE magic_sync_waiting gauge' || E'\n'
               || '# HELP magic_sync_waiting What the engine waits on: the items of sync.health(), counted by kind.' || E'\n'
               || format('magic_sync_waiting{kind="set_aside"} %s', h.h->'set_aside'->>'total') || E'\n'
               || format('magic_sync_waiting{kind="refused"} %s', h.h->'refused'->>'total') || E'\n'
               || format('magic_sync_waiting{kind="inbox"} %s', h.h->'inbox'->>'total') || E'\n'
               || format('magic_sync_waiting{kind="failing"} %s', h.h->'failing'->>'total') || E'\n'
               || format('magic_sync_waiting{kind="stalled"} %s', h.h->'stalled'->>'total') || E'\n'
               || format('magic_sync_waiting{kind="drift"} %s', h.h->'drift'->>'total')
        FROM h
        UNION ALL
        SELECT 3, f.position,
               format('# TYPE magic_sync_table_%1$s gauge' || E'\n'
                      || '# HELP magic_sync_table_%1$s %2$s', f.name, f.help)
               || coalesce(E'\n' || (
                      SELECT string_agg(format('magic_sync_table_%s{table="%s"} %s', f.name,
                                               sync_internal.metric_label(t.t->>'table'),
                                               CASE WHEN f.name <> 'synced' THEN t.t->>f.name
                                                    WHEN (t.t->>'synced')::boolean THEN '1'
                                                    ELSE '0' END),
                                        E'\n' ORDER BY t.t->>'table')
                      FROM t), '')
        FROM (VALUES (1, 'pending', 'Changes of the table not yet planned.'),
                     (2, 'in_flight', 'Rows of the table in messages not yet confirmed.'),
                     (3, 'set_aside', 'Rows of the table set aside.'),
                     (4, 'unfiled', 'Rows written on replicas and not filed yet.'),
                     (5, 'synced', '1 while the table is where it should be on every replica.'))
             AS f(position, name, help)
        UNION ALL
        SELECT 5, 0, '# TYPE magic_sync_relay_passes_total counter' || E'\n'
               || '# HELP magic_sync_relay_passes_total Relay passes run.' || E'\n'
               || format('magic_sync_relay_passes_total %s',
                         coalesce((SELECT passes FROM sync.relay_state), 0))
               || E'\n' || '# TYPE magic_sync_alarms_total counter' || E'\n'
               || '# HELP magic_sync_alarms_total Alarms raised (sync.alarms).' || E'\n'
               || format('magic_sync_alarms_total %s', (SELECT count(*) FROM sync.alarms))
        UNION ALL
        SELECT 6, 0, '# TYPE magic_sync_replica_state gauge' || E'\n'
               || '# HELP magic_sync_replica_state 1 for the state each replica is in.'
        WHERE by_replica
        UNION ALL
        SELECT 7, 0, string_agg(format('magic_sync_replica_state{replica="%s",state="%s"} 1',
                                       r.id, r.state), E'\n' ORDER BY r.id)
        FROM r WHERE by_replica
        HAVING count(*) > 0
    )
    SELECT string_agg(line, E'\n' ORDER BY part, n) || E'\n'
    FROM lines WHERE line IS NOT NULL
    );
END
$$;

-- Lets `reader` use the status reads and nothing else: USAGE on schema sync
-- and EXECUTE on the seven reads, which run as the extension's owner
-- (sql/privileges.sql), so the reader is given no engine table (not the
-- secrets of sync.epochs, not the messages of sync.outbox) and no
-- function of sync_internal. The owner's to call.
CREATE FUNCTION sync.allow_reading(reader regrole) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- A regrole prints as a quoted identifier.
    EXECUTE format('GRANT USAGE ON SCHEMA sync TO %s', reader);
    EXECUTE format('GRANT EXECUTE ON FUNCTION sync.overview(jsonb, integer), '
                   'sync.listing(jsonb, text, integer, integer), sync.health(jsonb, integer), '
                   'sync.progress(jsonb), sync.row_progress(jsonb, text, text), '
                   'sync.explain(uuid, text, text), sync.metrics(boolean), '
                   'sync.wishes(jsonb, text, integer, integer) TO %s', reader);
END
$$;

-- Lets `gateway` (a device gateway's role) take and acknowledge messages
-- and file uploads, and nothing else: USAGE on schema sync and EXECUTE on
-- sync.next, sync.ack, sync.ack_next, sync.take and sync.receive. They run
-- as the extension's owner (sql/privileges.sql), so the gateway is given no
-- engine table and no function of sync_internal; the rows it files are
-- written as it (or as the role the senders' filing hook takes), so the
-- host grants it those.
-- The owner's to call.
CREATE FUNCTION sync.allow_gateway(gateway regrole) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- A regrole prints as a quoted identifier.
    EXECUTE format('GRANT USAGE ON SCHEMA sync TO %s', gateway);
    EXECUTE format('GRANT EXECUTE ON FUNCTION sync.next(uuid), sync.ack(uuid, text), '
                   'sync.ack_next(uuid, text), sync.take(uuid, text, bytea), '
                   'sync.receive(uuid, bytea) TO %s', gateway);
END
$$;
