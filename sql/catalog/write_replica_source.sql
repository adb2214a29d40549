-- Declares the replicas: writes the one row of sync.replica_source, in
-- place of the one there, and stamps declared_at.
-- $1 jsonb: a ReplicaSourceRow of catalog/store.rs, keyed by column name
-- (relation, id_column, live, partition_column).
INSERT INTO sync.replica_source (relation, id_column, live, partition_column)
SELECT relation, id_column, live, partition_column
  FROM jsonb_populate_record(NULL::sync.replica_source, $1)
    ON CONFLICT (only_one) DO UPDATE
   SET relation = excluded.relation,
       id_column = excluded.id_column,
       live = excluded.live,
       partition_column = excluded.partition_column,
       declared_at = now()
