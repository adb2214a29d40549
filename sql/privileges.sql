-- Who may call the engine's own functions: no one but the engine's callers.
-- Run last (finalize), once every function of schema sync_internal exists,
-- those of the other files and those pgrx writes for the Rust ones
-- (#[pg_extern(schema = "sync_internal")]).
--
-- A function is created with EXECUTE granted to PUBLIC; these are taken
-- back. The trigger functions of sync stay callable: a trigger runs as
-- whoever writes the table.
REVOKE ALL ON ALL ROUTINES IN SCHEMA sync_internal FROM PUBLIC;

-- What a user calls in sync is the owner's too, until granted: a role
-- given USAGE on sync to read the status (sync.allow_reading()) may not
-- take messages, file uploads, declare or relay. The trigger functions
-- stay callable: a trigger runs as whoever writes the table.
REVOKE ALL ON ALL ROUTINES IN SCHEMA sync FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.note_row(), sync.note_group(), sync.refuse_truncate() TO PUBLIC;

-- (So are starting and stopping the relay's background worker: whoever
-- runs the server decides where a relay runs.)

-- The status reads run as the extension's owner, with a search_path of
-- their own, so that a dashboard's role needs EXECUTE on them and nothing
-- else; only the roles sync.allow_reading() names have it.
ALTER FUNCTION sync.overview(jsonb, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION sync.listing(jsonb, text, integer, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION sync.health(jsonb, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION sync.progress(jsonb) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION sync.row_progress(jsonb, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION sync.explain(uuid, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION sync.metrics(boolean) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION sync.overview(jsonb, integer), sync.listing(jsonb, text, integer, integer),
    sync.health(jsonb, integer), sync.progress(jsonb), sync.row_progress(jsonb, text, text),
    sync.explain(uuid, text, text) FROM PUBLIC;
