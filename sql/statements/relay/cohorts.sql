-- The fixed statements of pg_magic_sync/src/relay/cohorts.rs, by name: the build
-- makes each a constant of crate::statements::relay::cohorts (build.rs).

-- name: COHORTS
-- Replicas with the same plan share a cohort. Plans are compared by their
-- size and two independent hashes of their rows; a whole table sent counts
-- with the partition it is read for, since its rows are read for the
-- cohort's representative (replicas of two partitions provisioned in one
-- pass were one cohort, and the second was sent the first's rows). A
-- snapshot of some tables only ends naming them: replicas provisioned for
-- other tables are not one cohort. Each cohort's plan is read
-- from one of its replicas: its representative.
INSERT INTO sync_pass_cohorts (replica, provision, cohort)
    SELECT r.id AS replica, r.provision, (dense_rank() OVER (ORDER BY r.provision, coalesce(o.provision_only, '{}'), coalesce(s.n, 0), s.h1, s.h2))::int AS cohort
    FROM sync_pass_replicas r
    LEFT
    JOIN (SELECT id, CASE WHEN provision THEN NULL ELSE provision_only END AS provision_only FROM sync.replicas) AS o ON o.id = r.id
    LEFT
    JOIN (SELECT replica, count(*) AS n, sum(hashtextextended(table_name || '/' || op || '/' || key, 0)::numeric) AS h1, bit_xor(hashtextextended(table_name || '/' || op || '/' || key, 1)) AS h2 FROM (SELECT replica, table_name, op, key FROM sync_pass_plan UNION ALL SELECT w.replica, w.table_name, 'w', coalesce('in ' || r.partition, '') FROM sync_pass_whole w JOIN sync_pass_replicas r ON r.id = w.replica) AS p GROUP BY replica) AS s ON s.replica = r.id
    WHERE r.provision OR s.n > 0;
    INSERT INTO sync_pass_representatives (cohort, replica)
    SELECT cohort, (array_agg(replica ORDER BY replica))[1] AS replica
    FROM sync_pass_cohorts
    GROUP BY cohort
