-- The fixed statements of pg_magic_sync/src/file/inbox.rs, by name: the build
-- makes each a constant of crate::statements::file::inbox (build.rs).

-- name: DROP_DONE
DELETE
    FROM sync.inbox i
    USING unnest($2::text[], $3::text[]) AS d(table_name, key)
    WHERE i.replica = $1 AND i.table_name = d.table_name AND i.key = d.key

-- name: KEEP
INSERT INTO sync.inbox AS i (replica, table_name, key, op, row, restated, applied_epoch, applied_sequence, reason, waiting, retry_at)
    SELECT $1, k.table_name, k.key, k.op, k.row, k.restated, k.applied_epoch, k.applied_sequence, k.reason, k.waiting, now() + make_interval(secs => $12)
    FROM unnest($2::text[], $3::text[], $4::text[], $5::jsonb[], $6::bool[], $7::uuid[], $8::bigint[], $9::text[], $10::bool[]) AS k(table_name, key, op, row, restated, applied_epoch, applied_sequence, reason, waiting)
    ON CONFLICT (replica, table_name, key) DO
    UPDATE
    SET op = excluded.op, row = excluded.row, restated = excluded.restated, applied_epoch = excluded.applied_epoch, applied_sequence = excluded.applied_sequence, reason = excluded.reason, waiting = excluded.waiting, retry_at = excluded.retry_at, kept_at = CASE WHEN $11 THEN i.kept_at ELSE now() END, tries = CASE WHEN $11 THEN i.tries + 1 ELSE 1 END

-- name: ENTRIES
SELECT table_name, key, row, restated, applied_epoch, applied_sequence
    FROM sync.inbox
    WHERE replica = $1 AND (waiting OR $2 OR retry_at <= now()) AND (NOT $3 OR waiting)
    ORDER BY table_name, op, key FOR
    UPDATE SKIP LOCKED

-- name: DUE
-- The replicas with entries to file again.
SELECT DISTINCT replica
    FROM sync.inbox
    WHERE waiting OR $1 OR retry_at <= now()
