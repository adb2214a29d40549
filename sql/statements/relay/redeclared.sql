-- The fixed statements of pg_magic_sync/src/relay/redeclared.rs, by name: the build
-- makes each a constant of crate::statements::relay::redeclared (build.rs).

-- name: SENT_PER_TABLE
-- What a pass sent the replicas kept up to date, per table: rows sent
-- ('u') and taken back ('d'), and to how many replicas. A stand-in's rows
-- count for each of its followers the pass kept up to date, who are sent
-- its messages; a stand-in with none counts for none.
WITH per AS ( SELECT p.replica, p.table_name, p.op, count(*) AS n FROM sync_pass_plan p JOIN sync_pass_current c ON c.id = p.replica GROUP BY 1, 2, 3),
    weighted AS ( SELECT per.*, CASE WHEN EXISTS (SELECT 1 FROM sync.stand_ins s WHERE s.id = per.replica) THEN (SELECT count(*) FROM sync.followers f JOIN sync_pass_current c ON c.id = f.replica WHERE f.stand_in = per.replica) ELSE 1 END AS replicas FROM per)
    SELECT table_name::text, op, sum(n * replicas)::bigint, sum(replicas)::bigint
    FROM weighted
    WHERE replicas > 0
    GROUP BY 1, 2
    ORDER BY 1, 2
