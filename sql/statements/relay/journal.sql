-- The fixed statements of pg_magic_sync/src/relay/journal.rs, by name: the build
-- makes each a constant of crate::statements::relay::journal (build.rs).

-- name: STAND_INS
-- The stand-ins are replicas of the pass, planned the journaled tables.
INSERT INTO sync_pass_replicas (id, provision, partition)
    SELECT id, provision, partition
    FROM sync.stand_ins
