-- The fixed statements of pg_magic_sync/src/wishes/desire.rs, by name: the build
-- makes each a constant of crate::statements::wishes::desire (build.rs).

-- name: WRITE_WISH
-- A wish written, or one replacing the row's: a new version, the answer
-- kept as the replica gave it (it answers the version it names, so the
-- wish is pending again until the replica answers this one).
INSERT INTO sync.sync_wishes AS w (id, replica, table_name, key, wanted, based_on, version, note)
    VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, $6, $7)
    ON CONFLICT (replica, table_name, key) DO
    UPDATE
    SET wanted = excluded.wanted, based_on = excluded.based_on, version = excluded.version, note = excluded.note, wished_at = now()
    RETURNING w.id

-- name: TAKE_BACK
WITH gone AS (DELETE FROM sync.sync_wishes WHERE table_name = $1 AND key = $2 RETURNING 1)
    SELECT count(*)
    FROM gone

-- name: VALUES_REFUSED
-- Why the values given do not read as the setting's columns, in
-- PostgreSQL's words (sql/wishes.sql).
SELECT sync_internal.wish_values_refused($1, $2)
