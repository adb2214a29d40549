-- The fixed statements of pg_magic_sync/src/version.rs, by name: the build
-- makes each a constant of crate::statements::version (build.rs).

-- name: INSTALLED
-- The version of the extension's SQL installed in this database, if any.
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'magic_sync'
