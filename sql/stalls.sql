-- Stalls: a live replica whose applied position has not moved for
-- magic_sync.stalled_after while messages wait for it (docs/src/
-- how-it-works.md, "A replica that stops moving"). The status reads show
-- it; the relay worker's checks heal it where the transport can
-- (pg_magic_sync/src/publish/stalls.rs).

-- magic_sync.stalled_after as an interval; two minutes in a session that
-- has not loaded the library (which defines the setting).
CREATE FUNCTION sync_internal.stalled_after() RETURNS interval
LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('magic_sync.stalled_after', true), ''), '120s')::interval
$$;

-- Whether the transport in use is one the relay worker pushes to (nats):
-- a message waits in it for a replica once published; with the queue, as
-- soon as it is written.
CREATE FUNCTION sync_internal.pushed() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('magic_sync.transport', true) = 'nats', false)
$$;

-- How many steps the worker takes with a stalled replica over the
-- transport in use. Over nats two: its consumer made again, then, if it
-- still does not move while it is heard, provisioned again through a fresh
-- consumer. Over the queue one, the alarm only: nothing the server holds
-- there can keep a device from taking its messages, so one that is heard
-- and takes nothing is held back on its side (a message of a later
-- protocol, its storage), which a fix on the device mends.
CREATE FUNCTION sync_internal.stall_steps() RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT CASE current_setting('magic_sync.transport', true) WHEN 'nats' THEN 2 ELSE 1 END
$$;

-- What a stalled replica waits for: 'wait' while the worker has a step
-- left to take with it, 'fix' once it has none.
CREATE FUNCTION sync_internal.stall_remedy(heals integer) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN heals < sync_internal.stall_steps() THEN 'wait' ELSE 'fix' END
$$;

-- One replica's stall, from its row of sync.replicas: the messages that
-- wait for it in the transport (beyond the last it applied; a Filed, which
-- no replica confirms, aside; over nats, once published) and since when its position has not moved while they
-- waited; whether that is longer than `stalled_after` (overdue); whether
-- it was heard since (it is alive and not taking its messages, where
-- otherwise it is only away); whether it is stalled, as the status reads
-- say: overdue, heard, and not about to be provisioned; and the steps the
-- worker took with it since it last moved.
CREATE FUNCTION sync_internal.stall_of(replica uuid, epoch uuid, applied_epoch uuid,
                                       applied_sequence bigint, applied_at timestamptz,
                                       heard_at timestamptz, provisioning boolean,
                                       stall_heals integer, stall_healed_at timestamptz,
                                       stalled_after interval)
RETURNS TABLE (messages bigint, since timestamptz, overdue boolean, heard boolean,
               stalled boolean, heals integer)
LANGUAGE sql STABLE AS $$
    SELECT w.messages, w.since, w.overdue, w.heard,
           w.overdue AND w.heard AND NOT provisioning,
           CASE WHEN stall_healed_at > coalesce(applied_at, '-infinity') THEN stall_heals ELSE 0 END
      FROM (SELECT v.messages, v.since,
                   coalesce(v.since < statement_timestamp() - stalled_after, false) AS overdue,
                   coalesce(heard_at > v.since, false) AS heard
              FROM (SELECT count(*) AS messages,
                           CASE WHEN count(*) > 0
                                THEN greatest(min(o.written_at), applied_at) END AS since
                      FROM sync.outbox o
                     WHERE o.replica = stall_of.replica AND o.kind <> 'filed'
                       AND (o.published OR NOT sync_internal.pushed())
                       AND (applied_epoch IS DISTINCT FROM epoch
                            OR o.position > applied_sequence)) v) w
$$;

-- Each stalled replica of `replicas`, as sync.health() lists it.
CREATE FUNCTION sync_internal.stalled(replicas uuid[])
RETURNS TABLE (replica uuid, since timestamptz, messages bigint, heard_at timestamptz,
               heals integer, healed_at timestamptz, remedy text)
LANGUAGE sql STABLE AS $$
    SELECT r.id, st.since, st.messages, r.heard_at, st.heals,
           CASE WHEN st.heals > 0 THEN r.stall_healed_at END,
           sync_internal.stall_remedy(st.heals)
      FROM sync.replicas r
     CROSS JOIN LATERAL sync_internal.stall_of(
               r.id, r.epoch, r.applied_epoch, r.applied_sequence, r.applied_at, r.heard_at,
               r.provision OR r.provision_at IS NOT NULL, r.stall_heals, r.stall_healed_at,
               sync_internal.stalled_after()) st
     WHERE r.id = ANY (replicas) AND r.live AND st.stalled
       AND (r.applied_epoch IS DISTINCT FROM r.epoch OR r.applied_sequence < r.last_sequence)
$$;

-- The worker's check of stalls, every few seconds: each live replica
-- stalled and not being provisioned whose next step is due takes it, and
-- is answered for the worker to carry out what is the transport's (over
-- nats, its consumer made again: pg_magic_sync/src/publish/stalls.rs):
--   step 1, as soon as it is stalled, heard or not: noticed, and over nats
--     its consumer made again (a replica only away costs that, once until
--     it moves);
--   step 2 (nats), `stalled_after` after step 1, if it was heard since and
--     still does not move: provisioned again, through a fresh consumer.
-- A replica heard while stalled raises an alarm at each step; one still
-- stalled with no step left waits for a fix on its side (sync.health()).
-- Answers [{replica, step, messages, since, heard}].
CREATE FUNCTION sync_internal.stall_checks(stalled_after interval) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    steps integer := sync_internal.stall_steps();
    taken jsonb;
BEGIN
    WITH stalled AS (
        SELECT r.id, st.messages, st.since, st.heard, st.heals, r.heard_at, r.stall_healed_at
          FROM sync.replicas r
         CROSS JOIN LATERAL sync_internal.stall_of(
                   r.id, r.epoch, r.applied_epoch, r.applied_sequence, r.applied_at,
                   r.heard_at, false, r.stall_heals, r.stall_healed_at, stalled_after) st
         WHERE r.live AND NOT r.provision AND r.provision_at IS NULL AND st.overdue
           -- Only a replica with something unconfirmed can be overdue: a
           -- fleet caught up costs this check no look at the outbox.
           AND (r.applied_epoch IS DISTINCT FROM r.epoch OR r.applied_sequence < r.last_sequence)
           AND coalesce(r.applied_at, '-infinity') < now() - stalled_after
    ), due AS (
        SELECT s.*, s.heals + 1 AS step FROM stalled s
         WHERE s.heals < steps
           AND (s.heals = 0
                OR (s.stall_healed_at < now() - stalled_after AND s.heard_at > s.stall_healed_at))
    ), taken AS (
        UPDATE sync.replicas r
           SET stall_heals = due.step, stall_healed_at = now(),
               provision = r.provision OR due.step = 2
          FROM due
         WHERE r.id = due.id
        RETURNING due.*
    ), alarmed AS (
        INSERT INTO sync.alarms (replica, what)
        SELECT t.id,
               format('it has applied nothing for %s s while %s message(s) wait for it, '
                      'though it is heard: %s (magic_sync.stalled_after %s s)',
                      round(extract(epoch FROM now() - t.since)), t.messages,
                      CASE WHEN t.step = 2 THEN 'provisioned again through a fresh consumer'
                           WHEN steps = 2 THEN 'its consumer made again'
                           ELSE 'nothing the server holds keeps it from them: '
                                'see the device''s own log' END,
                      extract(epoch FROM stalled_after)::bigint)
          FROM taken t WHERE t.heard OR t.step = 2
        RETURNING 1
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'replica', t.id, 'step', t.step, 'messages', t.messages,
               'since', t.since, 'heard', t.heard) ORDER BY t.id), '[]')
      INTO taken
      FROM taken t;
    RETURN taken;
END
$$;

-- Stalled replicas whose consumer, made again, finds the stream holding
-- nothing for them, though messages were published for them that they
-- have not applied: the transport lost those (a server killed before it
-- wrote them down). Each is provisioned again, with an alarm, at once
-- rather than after magic_sync.unconfirmed_after. Answers how many.
CREATE FUNCTION sync_internal.stall_lost(replicas uuid[]) RETURNS bigint
LANGUAGE sql AS $$
    WITH marked AS (
        UPDATE sync.replicas r
           SET provision = true, stall_heals = greatest(r.stall_heals, 2),
               stall_healed_at = now()
         WHERE r.id = ANY (replicas) AND r.live AND NOT r.provision
        RETURNING r.id
    ), alarmed AS (
        INSERT INTO sync.alarms (replica, what)
        SELECT id, 'the stream holds none of the messages published for it, which it has '
                   'not applied: the transport lost them; provisioned again'
          FROM marked
        RETURNING 1
    )
    SELECT count(*) FROM alarmed
$$;
