-- The fixed statements of pg_magic_sync/src/file/acting.rs, by name: the build
-- makes each a constant of crate::statements::file::acting (build.rs).

-- name: EXTENSION_OWNER
-- The extension's owner: the role the engine's tables belong to.
SELECT e.extowner
    FROM pg_catalog.pg_extension AS e
    WHERE e.extname OPERATOR(pg_catalog.=) 'magic_sync'
