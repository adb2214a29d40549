-- Who may call the engine's own functions: no one but the engine's callers.
-- Run last (finalize), once every function of schema sync_internal exists,
-- those of the other files and those pgrx writes for the Rust ones
-- (#[pg_extern(schema = "sync_internal")]).
--
-- A function is created with EXECUTE granted to PUBLIC; these are taken
-- back. The trigger functions of sync stay callable: a trigger runs as
-- whoever writes the table.
REVOKE ALL ON ALL ROUTINES IN SCHEMA sync_internal FROM PUBLIC;

-- Starting and stopping the relay's background worker is the owner's:
-- whoever runs the server decides where a relay runs.
REVOKE ALL ON FUNCTION sync.start_relay(), sync.stop_relay() FROM PUBLIC;
