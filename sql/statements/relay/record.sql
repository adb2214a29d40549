-- The fixed statements of pg_magic_sync/src/relay/record.rs, by name: the build
-- makes each a constant of crate::statements::relay::record (build.rs).

-- name: PARTS
-- Which tables each cohort has rows of, to delete and to upsert ('w': the
-- whole table).
SELECT DISTINCT r.cohort, r.replica, p.table_name, p.op
    FROM sync_pass_representatives r
    JOIN sync_pass_plan p ON p.replica = r.replica
    UNION
    SELECT r.cohort, r.replica, w.table_name, 'w'
    FROM sync_pass_representatives r
    JOIN sync_pass_whole w ON w.replica = r.replica
    ORDER BY 1

-- name: MEMBERS
-- The replicas of each cohort, stand-ins first: a follower is sent the
-- stand-in's messages, which it numbers first.
SELECT c.cohort, c.replica, c.provision, s.last_sequence, s.last_nonce, false, r.partition, CASE WHEN s.provision THEN NULL ELSE s.provision_only END
    FROM sync_pass_cohorts c
    JOIN sync.replicas s ON s.id = c.replica
    JOIN sync_pass_replicas r ON r.id = c.replica
    UNION ALL
    SELECT c.cohort, c.replica, c.provision, s.last_sequence, s.last_nonce, true, s.partition, NULL
    FROM sync_pass_cohorts c
    JOIN sync.stand_ins s ON s.id = c.replica
    ORDER BY 1, 6 DESC, 2

-- name: STAND_INS_OF_PASS
-- Every stand-in of the pass (one with nothing to send has no cohort, and
-- is up to date all the same).
SELECT s.id, s.partition, s.last_sequence
    FROM sync.stand_ins s
    JOIN sync_pass_replicas r ON r.id = s.id

-- name: FOLLOWERS
-- The followers kept up to date this pass, each with its stand-in: each
-- is sent its stand-in's messages, in its stand-in's cohort (one passed over,
-- relay/plan/behind.rs, is not among them).
SELECT f.replica, f.stand_in, s.last_sequence, s.last_nonce
    FROM sync.followers f
    JOIN sync_pass_current c ON c.id = f.replica
    JOIN sync.replicas s ON s.id = f.replica
    ORDER BY f.replica

-- name: FORGET_PROVISIONED
-- A replica provisioned again holds nothing the server knows of until its
-- snapshot's rows are recorded. (It stopped following as the pass began:
-- `journal::prepare`.) One provisioned again for some tables only
-- (provision_only) holds the others as recorded, but the rows it is sent
-- again of them, which are recorded afresh, and the journaled tables ($1)
-- when it begins following a stand-in of its partition: it holds the
-- stand-in's rows from this pass on (it parted as the pass began).
DELETE
    FROM sync.held_recorded h
    USING sync_pass_cohorts c
    LEFT
    JOIN sync.replicas s ON s.id = c.replica
    WHERE c.provision AND h.replica = c.replica AND (s.provision_only IS NULL OR s.provision OR h.table_name = ANY (s.provision_only) OR EXISTS (SELECT 1 FROM sync_pass_plan p WHERE p.replica = h.replica AND p.table_name = h.table_name AND p.key = h.key AND p.op = 'u') OR h.table_name = ANY ($1::text[]) AND EXISTS (SELECT 1 FROM sync.stand_ins i JOIN sync_pass_replicas r ON r.id = i.id WHERE i.partition IS NOT DISTINCT FROM s.partition))

-- name: BEGIN_FOLLOWING
-- A replica provisioned with its snapshot while its stand-in is kept up to
-- date holds the stand-in's rows of journaled tables after this pass: it
-- follows it from its last message of the pass.
INSERT INTO sync.followers (replica, stand_in, since, since_sequence)
    SELECT *
    FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::bigint[])

-- name: FOLLOWER_MESSAGES
INSERT INTO sync.follower_messages (replica, stand_in_sequence, sequence)
    SELECT *
    FROM unnest($1::uuid[], $2::bigint[], $3::bigint[])

-- name: ADVANCE_STAND_INS
UPDATE sync.stand_ins s
    SET epoch = $1, last_sequence = u.last_sequence, last_nonce = u.last_nonce, provision = false
    FROM unnest($2::uuid[], $3::bigint[], $4::bigint[]) AS u(id, last_sequence, last_nonce)
    WHERE s.id = u.id

-- name: STORE_BODIES
INSERT INTO sync.bodies (bytes)
    SELECT b
    FROM unnest($1::bytea[]) WITH ORDINALITY AS u(b, n)
    ORDER BY n
    RETURNING id

-- name: WRITE_OUTBOX
INSERT INTO sync.outbox (replica, position, id, kind, head, body)
    SELECT *
    FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::bytea[], $6::bigint[])

-- name: CARRIED
-- Which message carried each row, for every replica that was sent it.
-- A replica that begins following records no rows of journaled tables
-- (`$11`) of its own (`m.follows`).
SELECT m.replica, r.table_name, r.key, r.note, m.sequence, r.op, m.fresh
    FROM unnest($1::int[], $2::uuid[], $3::bigint[], $9::bool[], $10::bool[]) AS m(body, replica, sequence, fresh, follows)
    JOIN unnest($4::int[], $5::text[], $6::text[], $7::bigint[], $8::text[]) AS r(body, table_name, key, note, op) ON r.body = m.body
    WHERE NOT (m.follows AND r.table_name = ANY($11::text[]))

-- name: ADVANCE_CHAINS
UPDATE sync.replicas s
    SET epoch = $1, last_sequence = u.last_sequence, last_nonce = u.last_nonce, provision = false, provision_only = NULL, written_at = now(), snapshot_id = coalesce(u.snapshot_id, s.snapshot_id), snapshot_sequence = coalesce(u.snapshot_sequence, s.snapshot_sequence)
    FROM unnest($2::uuid[], $3::bigint[], $4::bigint[], $5::uuid[], $6::bigint[]) AS u(id, last_sequence, last_nonce, snapshot_id, snapshot_sequence)
    WHERE s.id = u.id
