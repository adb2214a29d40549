-- The fixed statements of pg_magic_sync/src/file/rejections.rs, by name: the build
-- makes each a constant of crate::statements::file::rejections (build.rs).

-- name: RECORDED
SELECT sent, leaving
    FROM sync.held_recorded
    WHERE replica = $1 AND table_name = $2 AND key = $3 FOR
    UPDATE

-- name: REFUSE
UPDATE sync.held_recorded
    SET leaving = NULL, refused = $5, refused_by = $4, refused_at = now(), held_back = $6, retry_at = now() + make_interval(secs => $7)
    WHERE replica = $1 AND table_name = $2 AND key = $3

-- name: REFUSED_SWEEP
INSERT INTO sync.held_recorded (replica, table_name, key, note, sent, refused, refused_by, refused_at, held_back, retry_at)
    VALUES ($1, $2, $3, 0, $4, $5, $4, now(), $6, now() + make_interval(secs => $7))

-- name: FOLLOWING
-- A follower's message that ended its provisioning: sync.held shows each
-- row its snapshot carried of the stand-in's as sent in it.
SELECT since_sequence
    FROM sync.followers
    WHERE replica = $1
