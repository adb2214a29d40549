-- The fixed statements of pg_magic_sync/src/wishes/answers.rs, by name: the build
-- makes each a constant of crate::statements::wishes::answers (build.rs).

-- name: FILE_ANSWERS
-- Files answers (`$1`, a jsonb array of `{id, answered, outcome, reason,
-- answered_at}`) of the replica `$2`'s wishes; `$3`: whether they were
-- re-stated. Answers how many it took.
WITH a AS (SELECT * FROM jsonb_to_recordset($1) AS a(id uuid, answered bigint, outcome text, reason text, answered_at timestamptz)), filed AS ( UPDATE sync.sync_wishes w SET answered = a.answered, outcome = a.outcome, reason = a.reason, answered_at = a.answered_at, filed_at = now() FROM a WHERE w.id = a.id AND w.replica = $2 AND ($3 OR w.answered IS DISTINCT FROM w.version OR w.outcome NOT IN ('applied', 'refused', 'superseded')) RETURNING 1)
    SELECT count(*)
    FROM filed
