-- The status reads of rows (docs/src/status-rows.md): sync.progress(),
-- sync.row_progress() and sync.explain(), written in Rust
-- (pg_magic_sync/src/status/), which work out what each replica should
-- hold with SELECTs only and read each row's state here, so every read
-- names a row's state the same way.

-- Whether a replica confirmed the message `sequence`: it said it applied
-- that message or a later one, in the epoch its messages are numbered in
-- (a confirmation of another epoch's chain confirms nothing of this one).
CREATE FUNCTION sync_internal.confirmed(
    sequence bigint, epoch uuid, applied_epoch uuid, applied_sequence bigint)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT sequence IS NOT NULL AND epoch IS NOT NULL
       AND applied_epoch = epoch AND sequence <= applied_sequence
$$;

-- A row's state on one replica, or NULL when it has nothing to do with the
-- replica (neither held nor reached, or taken back and confirmed so):
--   set_aside   its rules reach it but it, or a row it points at, is set
--               aside (sync.quarantine); or it should hold it and refused it;
--   missing     it should hold it and nothing of it is on its way;
--   on_its_way  it should hold it and the message carrying it is unconfirmed;
--   outdated    it holds it, confirmed, at a version older than a pending note;
--   holds       it holds it, confirmed, at its newest version;
--   leaving     it holds a row it should not (or a take-back is on its way).
-- `should` is whether the replica should hold it (reached and not blocked),
-- `blocked` whether its rules reach it though it cannot go; the held
-- columns are NULL for a row sync.held has no row of.
CREATE FUNCTION sync_internal.row_state(
    should boolean, blocked boolean, held boolean, refused text,
    sent bigint, leaving bigint, note bigint, newest bigint,
    epoch uuid, applied_epoch uuid, applied_sequence bigint)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN coalesce(blocked, false) THEN 'set_aside'
        WHEN should AND held AND leaving IS NULL AND refused IS NOT NULL THEN 'set_aside'
        WHEN should THEN CASE
            WHEN NOT coalesce(held, false) THEN 'missing'
            WHEN leaving IS NOT NULL THEN CASE
                WHEN sync_internal.confirmed(leaving, epoch, applied_epoch, applied_sequence)
                    THEN 'missing'
                ELSE 'leaving' END
            WHEN NOT sync_internal.confirmed(sent, epoch, applied_epoch, applied_sequence)
                THEN 'on_its_way'
            WHEN newest > note THEN 'outdated'
            ELSE 'holds' END
        WHEN coalesce(held, false) AND NOT (leaving IS NOT NULL
             AND sync_internal.confirmed(leaving, epoch, applied_epoch, applied_sequence))
            THEN 'leaving'
    END
$$;

-- Where one row is, per live replica of the scope (docs/src/status-rows.md,
-- "sync.row_progress"). Written in Rust (pg_magic_sync/src/api/status.rs)
-- as a plain C function, so that the document its query builds, a place
-- per replica, is handed back as it is rather than read into Rust and
-- written again. Its plan's estimates run high enough to set the JIT
-- compiling for longer than it runs: it runs without. Planning its query
-- took longer than running it (2 ms of 6, a product on 200 replicas): the
-- plan kept for the session is the generic one, whose row and scope are
-- parameters looked up by index whatever their values.
CREATE FUNCTION sync.row_progress(scope jsonb, table_name text, key text) RETURNS jsonb
LANGUAGE c STABLE SET jit = off SET plan_cache_mode = force_generic_plan
AS 'MODULE_PATHNAME', 'status_row_progress';
