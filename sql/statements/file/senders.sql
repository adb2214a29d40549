-- The fixed statements of pg_magic_sync/src/file/senders.rs, by name: the build
-- makes each a constant of crate::statements::file::senders (build.rs).

-- name: ROLE_SETTING
-- The role setting, as SET ROLE left it ('none': the session's user).
SELECT pg_catalog.current_setting('role')

-- name: SET_ROLE_SETTING
SELECT pg_catalog.set_config('role', $1, true)

-- name: HOOKS
-- The hooks declared (sync.declare_senders), if any.
SELECT jsonb_build_object('known', known, 'filing', filing, 'place', place) FROM sync.senders
