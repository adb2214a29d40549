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
ALTER FUNCTION sync.wishes(jsonb, text, integer, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION sync.overview(jsonb, integer), sync.listing(jsonb, text, integer, integer),
    sync.health(jsonb, integer), sync.progress(jsonb), sync.row_progress(jsonb, text, text),
    sync.explain(uuid, text, text) FROM PUBLIC;

-- A device gateway's role takes and acknowledges messages and files
-- uploads, and nothing else (sync.allow_gateway()). Taking and
-- acknowledging run as the extension's owner, with a search_path of their
-- own, so the gateway needs no right on sync.outbox or sync.bodies.
ALTER FUNCTION sync.next(uuid) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION sync.ack(uuid, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION sync.ack_next(uuid, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
-- sync.receive(uuid, bytea), and sync.take(uuid, text, bytea), which files
-- a report as sync.receive does, run as the owner too, but switch
-- themselves (pg_magic_sync/src/file/acting.rs): they must know who called
-- and from where, for what the host's tables see is the caller's (its
-- grants, its row policies, the role its filing hook takes, its
-- search_path), and a SECURITY DEFINER function has lost that before its
-- code runs. So they are left SECURITY INVOKER here, without a SET clause.
