-- The fixed statements of pg_magic_sync/src/publish/outbox.rs, by name: the build
-- makes each a constant of crate::statements::publish::outbox (build.rs).

-- name: DUE
SELECT * FROM sync_internal.outbox_due($1, $2, $3)

-- name: SENT
SELECT sync_internal.sent($1, $2)

-- name: FAILED
SELECT sync_internal.send_failed($1, $2, $3, $4, $5)

-- name: NEXT_SEND_AT
SELECT extract(epoch FROM sync_internal.next_send_at() - now())::float8
