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
-- 0: it took no message out; 1: it took one; 2: it took one, and the
-- replica was passed over (relay/plan/behind.rs: it owes rows, or was not
-- sent its stand-in's messages), which a pass may send it now. One value:
-- a statement that writes answers through spi::one alone.
WITH taken AS (DELETE FROM sync.outbox WHERE replica = $1 AND id = $2 RETURNING 1)
    SELECT CASE WHEN count(*) = 0 THEN 0 WHEN EXISTS (SELECT 1 FROM sync.owed WHERE replica = $1) OR EXISTS (SELECT 1 FROM sync.followers WHERE replica = $1 AND behind_since IS NOT NULL) THEN 2 ELSE 1 END
    FROM taken

