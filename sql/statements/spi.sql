-- The fixed statements of pg_magic_sync/src/spi.rs, by name: the build
-- makes each a constant of crate::statements::spi (build.rs).

-- name: SETTING_NOW
SELECT current_setting($1)

-- name: SET_FOR_THE_TRANSACTION
SELECT set_config($1, $2, true)
