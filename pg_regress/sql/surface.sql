-- The SQL surface: schema sync holds what users call (\df sync.* lists
-- it), and schema sync_internal the engine's own functions, which PUBLIC
-- may neither use nor execute.
CREATE EXTENSION magic_sync;

-- Every function and procedure of sync, then of sync_internal.
SELECT n.nspname AS schema, p.proname AS name, p.prokind AS kind,
       pg_get_function_identity_arguments(p.oid) AS arguments
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname IN ('sync', 'sync_internal')
 ORDER BY n.nspname, p.proname, arguments;

-- A role given nothing has what PUBLIC has: no use of sync_internal, and
-- EXECUTE on none of its functions.
CREATE ROLE magic_sync_surface_nobody NOLOGIN;
SELECT has_schema_privilege('magic_sync_surface_nobody', 'sync_internal', 'USAGE') AS uses_sync_internal;
SELECT count(*) AS functions,
       count(*) FILTER (WHERE has_function_privilege('magic_sync_surface_nobody', p.oid, 'EXECUTE')) AS executable
  FROM pg_proc p
 WHERE p.pronamespace = 'sync_internal'::regnamespace;
-- The trigger functions stay callable: a trigger runs as whoever writes the
-- table.
SELECT p.proname AS trigger_function,
       has_function_privilege('magic_sync_surface_nobody', p.oid, 'EXECUTE') AS executable
  FROM pg_proc p
 WHERE p.pronamespace = 'sync'::regnamespace AND p.prorettype = 'trigger'::regtype
 ORDER BY 1;
SET ROLE magic_sync_surface_nobody;
SELECT sync_internal.is_transient('40001');
RESET ROLE;

-- Leave the database as it was found: sync_internal goes with the
-- extension.
DROP EXTENSION magic_sync;
SELECT count(*) AS sync_internal FROM pg_namespace WHERE nspname = 'sync_internal';
DROP ROLE magic_sync_surface_nobody;
