-- The replicas' declaration: the row of sync.replica_source as one jsonb
-- keyed by column name (only_one and declared_at left out), what
-- catalog/store.rs reads as a ReplicaSourceRow; no row when the replicas
-- are not declared. No parameters.
SELECT to_jsonb(r) - 'only_one' - 'declared_at'
  FROM sync.replica_source r
