-- The fixed statements of pg_magic_sync/src/relay/observe.rs, by name: the build
-- makes each a constant of crate::statements::relay::observe (build.rs).

-- name: BECOME_LIVE
-- A replica that became live, or moved to another partition, is
-- provisioned from scratch.
WITH back AS ( INSERT INTO sync.replicas AS s (id, live, provision, partition) SELECT id, true, true, partition FROM sync_pass_live ON CONFLICT (id) DO UPDATE SET live = true, provision = true, partition = excluded.partition, seen_at = now() WHERE NOT s.live OR s.partition IS DISTINCT FROM excluded.partition RETURNING 1)
    SELECT count(*)
    FROM back

-- name: ANY_GONE
-- Whether a replica recorded as live is live no more: FORGET, whose four
-- writes cost a pass about a millisecond even when they write nothing,
-- runs only then.
SELECT EXISTS (SELECT 1 FROM sync.replicas s WHERE s.live AND NOT EXISTS (SELECT 1 FROM sync_pass_live l WHERE l.id = s.id))

-- name: FORGET
WITH gone AS ( UPDATE sync.replicas s SET live = false, provision = false, epoch = NULL, last_sequence = 0, last_nonce = 0, snapshot_id = NULL, snapshot_sequence = NULL WHERE s.live AND NOT EXISTS (SELECT 1 FROM sync_pass_live l WHERE l.id = s.id) RETURNING s.id), unheld AS (DELETE FROM sync.held_recorded h USING gone WHERE h.replica = gone.id), unfollowed AS (DELETE FROM sync.followers f USING gone WHERE f.replica = gone.id), unmapped AS (DELETE FROM sync.follower_messages m USING gone WHERE m.replica = gone.id), unsent AS (DELETE FROM sync.outbox o USING gone WHERE o.replica = gone.id)
    SELECT count(*)
    FROM gone

-- name: DROP_SUPERSEDED
-- What a replica being provisioned was owed before is dropped: the
-- snapshot carries it.
DELETE
    FROM sync.outbox o
    USING sync.replicas s
    WHERE s.live AND s.provision AND o.replica = s.id AND o.kind <> 'filed'
