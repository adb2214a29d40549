-- The fixed statements of pg_magic_sync/src/status/mod.rs, by name: the build
-- makes each a constant of crate::statements::status (build.rs).

-- name: SCOPE
-- The scope's live replicas, as should.rs's `scope` takes them: the scope
-- is the statement's first argument.
SELECT id, partition FROM sync_internal.scope_replicas($1)

-- name: NOW
-- The server's time, as every answer gives it.
SELECT to_jsonb(now())

-- name: SCOPE_IDS
-- The ids of a scope's live replicas; a scope of the wrong shape is
-- refused as `scope_replicas` refuses it.
SELECT coalesce(array_agg(id), '{}') FROM sync_internal.scope_replicas($1)
