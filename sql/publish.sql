-- Publishing through a transport the relay worker pushes to (nats): what
-- is due to go, what got through, and what failed (pg_magic_sync/src/
-- publish/outbox.rs). The queue needs none of it: devices take from the
-- outbox themselves.

-- The messages due to go, per replica in order: the first
-- `messages_at_most` of each of `replicas_at_most` replicas at most whose
-- sends are not waiting out a backoff, cut at `bytes_at_most` in all
-- (always at least one).
-- `begins_snapshot` marks the first message of a provisioning: everything
-- the transport holds for the replica before it is superseded.
CREATE FUNCTION sync_internal.outbox_due(replicas_at_most integer, messages_at_most integer,
                                          bytes_at_most bigint)
RETURNS TABLE (replica uuid, id text, kind text, head bytea, body bytea, begins_snapshot boolean)
LANGUAGE sql STABLE AS $$
    WITH waiting AS (
        SELECT DISTINCT o.replica FROM sync.outbox o
         WHERE NOT o.published
           AND NOT EXISTS (SELECT 1 FROM sync.sends s
                            WHERE s.replica = o.replica AND s.retry_at > now())
         LIMIT replicas_at_most
    ), due AS (
        SELECT o.replica, o.id, o.kind, o.head, b.bytes, o.position,
               sum(octet_length(o.head) + coalesce(octet_length(b.bytes), 0))
                   OVER (ORDER BY o.replica, o.position) AS running,
               row_number() OVER (ORDER BY o.replica, o.position) AS n,
               o.position = r.snapshot_sequence AS begins_snapshot
          FROM waiting w
          JOIN sync.replicas r ON r.id = w.replica
          CROSS JOIN LATERAL (SELECT * FROM sync.outbox o
                               WHERE o.replica = w.replica AND NOT o.published
                               ORDER BY o.position LIMIT messages_at_most) o
          LEFT JOIN sync.bodies b ON b.id = o.body
    )
    SELECT d.replica, d.id, d.kind, d.head, d.bytes, coalesce(d.begins_snapshot, false)
      FROM due d
     WHERE d.running <= bytes_at_most OR d.n = 1
     ORDER BY d.replica, d.position;
$$;

-- The transport took these messages (replicas[i]'s ids[i]): they are
-- published, and stay until the replica applied them, or one after them
-- (outbox_checks lets them go); a replica a send got through to waits no
-- more. A Filed, which no replica confirms, stays too, until the replica
-- applied a message written after it (it was handed over before that
-- one) or for an hour: with the transport switched to the queue before
-- the replica took it, the queue hands it over.
CREATE FUNCTION sync_internal.sent(replicas uuid[], ids text[]) RETURNS void
LANGUAGE sql AS $$
    UPDATE sync.outbox o SET published = true
      FROM unnest(replicas, ids) AS s(replica, id)
     WHERE o.replica = s.replica AND o.id = s.id;
    DELETE FROM sync.sends s WHERE s.replica = ANY (replicas);
$$;

-- A send to `replica` failed on message `message`: it waits out a backoff
-- (0.1 s doubling to a minute for the network; a minute doubling to
-- retry_every for a refusal) while every other replica's sends go on. The
-- same message refused for good three times in a row is dropped with the
-- rest of the outbox, and the replica provisioned again, with an alarm.
-- Answers whether it was.
CREATE FUNCTION sync_internal.send_failed(to_replica uuid, message_id text, for_good boolean,
                                          said text, retry_every double precision)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    tried sync.sends;
BEGIN
    INSERT INTO sync.sends AS s (replica, failures, refusals, message, last_error, retry_at)
    VALUES (to_replica, 1, for_good::int, message_id, said, now())
    ON CONFLICT (replica) DO UPDATE
       SET failures = s.failures + 1,
           refusals = CASE WHEN NOT for_good THEN 0
                           WHEN s.message = EXCLUDED.message THEN s.refusals + 1
                           ELSE 1 END,
           message = EXCLUDED.message,
           last_error = EXCLUDED.last_error,
           failed_at = now()
    RETURNING * INTO tried;
    IF tried.refusals >= 3 THEN
        UPDATE sync.replicas SET provision = true WHERE id = to_replica;
        INSERT INTO sync.alarms (replica, what)
        VALUES (to_replica, format('the transport refused message %s three times (%s): '
                                   'provisioned again', message_id, said));
        UPDATE sync.sends SET refusals = 0, retry_at = now() WHERE replica = to_replica;
        RETURN true;
    END IF;
    UPDATE sync.sends
       SET retry_at = now() + CASE
           WHEN for_good THEN least(60 * 2 ^ least(tried.refusals - 1, 20), greatest(retry_every, 60))
           ELSE least(0.1 * 2 ^ least(tried.failures - 1, 20), 60) END * interval '1 second'
     WHERE replica = to_replica;
    RETURN false;
END
$$;

-- When the next send waiting out a backoff is due, if any.
CREATE FUNCTION sync_internal.next_send_at() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT min(s.retry_at) FROM sync.sends s
     WHERE EXISTS (SELECT 1 FROM sync.outbox o WHERE o.replica = s.replica AND NOT o.published);
$$;

-- The checks of what went out, every few seconds (the relay worker's):
--   - published messages a replica applied (or applied one after) go: a
--     report of what was applied leaves them, so that filing it costs the
--     worker nothing more, and they go here, all at once; a published
--     Filed goes once the replica applied one after it, or after an hour;
--   - an outbox grown past `messages_at_most` messages or `bytes_at_most`
--     bytes behind the snapshot it begins with (a replica long away) is
--     dropped, and the replica provisioned again, with an alarm; published
--     messages count until the replica applied them, since a transport
--     that holds them (a stream) holds them for the same replica away;
--   - a replica that left what it was sent unconfirmed for longer than
--     `unconfirmed_after` seconds while nothing newer went to it is
--     provisioned again: the transport may have lost it.
-- The pass that provisions drops the outbox. Answers how many of each.
CREATE FUNCTION sync_internal.outbox_checks(messages_at_most bigint, bytes_at_most bigint,
                                            unconfirmed_after double precision)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    outgrown integer;
    unconfirmed integer;
BEGIN
    DELETE FROM sync.outbox o USING sync.replicas r
     WHERE o.published AND o.replica = r.id
       AND ((r.applied_epoch = r.epoch AND o.position <= r.applied_sequence)
            -- A replica that did not take its answer within the hour has
            -- sent its upload again since, and been answered again.
            OR (o.kind = 'filed' AND o.written_at < now() - interval '1 hour'));

    WITH behind AS (
        SELECT o.replica, count(*) AS messages,
               sum(octet_length(o.head) + coalesce(octet_length(b.bytes), 0)) AS bytes
          FROM sync.outbox o
          LEFT JOIN sync.bodies b ON b.id = o.body
         WHERE o.kind <> 'filed'
           AND NOT EXISTS (SELECT 1 FROM sync.outbox e
                            WHERE e.replica = o.replica AND e.kind = 'end'
                              AND e.position >= o.position)
         GROUP BY o.replica
    ), marked AS (
        UPDATE sync.replicas r SET provision = true
          FROM behind
         WHERE r.id = behind.replica AND r.live AND NOT r.provision
           AND (behind.messages > messages_at_most OR behind.bytes > bytes_at_most)
        RETURNING r.id, behind.messages, behind.bytes
    ), alarmed AS (
        INSERT INTO sync.alarms (replica, what)
        SELECT id, format('its outbox outgrew its bound (%s messages, %s bytes; '
                          'magic_sync.outbox_messages %s, magic_sync.outbox_bytes %s): '
                          'dropped, and the replica provisioned again',
                          messages, bytes, messages_at_most, bytes_at_most)
          FROM marked
        RETURNING 1
    )
    SELECT count(*) INTO outgrown FROM alarmed;

    WITH marked AS (
        UPDATE sync.replicas r SET provision = true
         WHERE r.live AND NOT r.provision AND r.epoch IS NOT NULL
           AND r.written_at < now() - unconfirmed_after * interval '1 second'
           AND (r.applied_epoch IS DISTINCT FROM r.epoch OR r.applied_sequence < r.last_sequence)
           AND NOT EXISTS (SELECT 1 FROM sync.outbox o
                            WHERE o.replica = r.id AND o.kind <> 'filed' AND NOT o.published)
        RETURNING r.id
    ), alarmed AS (
        INSERT INTO sync.alarms (replica, what)
        SELECT id, format('it left what it was sent unconfirmed for longer than '
                          'magic_sync.unconfirmed_after (%s s): provisioned again, '
                          'the transport may have lost it', unconfirmed_after)
          FROM marked
        RETURNING 1
    )
    SELECT count(*) INTO unconfirmed FROM alarmed;
    RETURN jsonb_build_object('outgrown', outgrown, 'unconfirmed', unconfirmed);
END
$$;
