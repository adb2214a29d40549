-- The fixed statements of pg_magic_sync/src/publish/queue.rs, by name: the build
-- makes each a constant of crate::statements::publish::queue (build.rs).

-- name: HEAD_OF_QUEUE
-- The head, and the message behind it, if any: whether more waits.
SELECT o.id, o.kind, o.head, b.bytes
    FROM sync.outbox o
    LEFT
    JOIN sync.bodies b ON b.id = o.body
    WHERE o.replica = $1
    ORDER BY o.position
    LIMIT 2

-- name: ACK
WITH taken AS (DELETE FROM sync.outbox WHERE replica = $1 AND id = $2 RETURNING 1)
    SELECT count(*) > 0
    FROM taken

