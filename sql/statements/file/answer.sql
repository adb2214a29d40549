-- The fixed statements of pg_magic_sync/src/file/answer.rs, by name: the build
-- makes each a constant of crate::statements::file::answer (build.rs).

-- name: REMEMBER
-- (An Up may name a number twice: once each.)
INSERT INTO sync.answered (replica, number)
    SELECT DISTINCT $1::uuid, n
    FROM unnest($2::bigint[]) AS n
    ON CONFLICT (replica, number) DO
    UPDATE
    SET answered_at = now()

-- name: FORGET_OLD
-- Forgets the replica's numbers answered over an hour ago: a transport
-- redelivers within minutes.
DELETE
    FROM sync.answered
    WHERE replica = $1 AND answered_at < now() - interval '1 hour'

-- name: ANSWERED_ALREADY
SELECT EXISTS (SELECT 1 FROM sync.answered WHERE replica = $1 AND number = ANY($2::bigint[]))
