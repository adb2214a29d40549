-- Filing what replicas send up (pg_magic_sync/src/file/): the hooks a
-- host declares for what it knows of a sender, and the PL/pgSQL that files
-- rows with a savepoint around them, so a row the database refuses is kept
-- instead of failing the upload. What users call is in sync
-- (sync.declare_senders); the rest is the engine's own, in sync_internal,
-- called by sync.receive and sync.relay. The tables that keep what an Up says
-- (sync.backlogs, sync.alarms, sync.inbox, sync.senders, and the columns of
-- sync.held and sync.replicas it writes) are in schema.sql.

-- ---------------------------------------------------------------------------
-- What the server knows of a sender: sync.declare_senders().

-- The function a hook names (with or without its argument types),
-- schema-qualified and quoted, when one with these argument types exists;
-- NULL otherwise.
CREATE FUNCTION sync_internal.hook_function(name text, arguments text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    found regprocedure;
BEGIN
    BEGIN
        found := to_regprocedure(format('%s(%s)', split_part(name, '(', 1), arguments));
    EXCEPTION WHEN OTHERS THEN
        RETURN NULL;
    END;
    IF found IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT format('%I.%I', n.nspname, p.proname)
              FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE p.oid = found);
END
$$;

-- Declares what the server knows of a sender; each hook is optional, and a
-- call replaces the last. Answers the declaration as stored.
CREATE FUNCTION sync.declare_senders(known text DEFAULT NULL, filing text DEFAULT NULL,
                                     place text DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    k text := NULL;
    f text := NULL;
    p text := NULL;
    problems text[] := '{}';
    stored sync.senders;
BEGIN
    IF known IS NOT NULL THEN
        k := sync_internal.hook_function(known, 'uuid');
        IF k IS NULL THEN
            problems := problems || format('known: no function %s(uuid)', split_part(known, '(', 1));
        END IF;
    END IF;
    IF filing IS NOT NULL THEN
        f := sync_internal.hook_function(filing, 'uuid, jsonb');
        IF f IS NULL THEN
            problems := problems || format('filing: no function %s(uuid, jsonb)', split_part(filing, '(', 1));
        END IF;
    END IF;
    IF place IS NOT NULL THEN
        p := sync_internal.hook_function(place, 'uuid, jsonb, text, jsonb');
        IF p IS NULL THEN
            problems := problems || format('place: no function %s(uuid, jsonb, text, jsonb)', split_part(place, '(', 1));
        ELSIF (SELECT prorettype FROM pg_proc
                WHERE oid = to_regprocedure(format('%s(uuid, jsonb, text, jsonb)', split_part(place, '(', 1))))
              <> 'jsonb'::regtype THEN
            problems := problems || format('place: %s must return jsonb, the row as it is to be filed', place);
        END IF;
    END IF;
    IF cardinality(problems) > 0 THEN
        PERFORM sync_internal.refuse('22023',
            'magic_sync: ' || array_to_string(problems, '; '),
            'known(replica uuid) answers what you know of a sender (NULL: unknown); '
            || 'filing(replica uuid, known jsonb) runs before its rows are filed; '
            || 'place(replica uuid, known jsonb, table_name text, row jsonb) answers a row as it is to be filed.');
    END IF;
    INSERT INTO sync.senders AS s (known, filing, place) VALUES (k, f, p)
        ON CONFLICT (only_one) DO UPDATE
        SET known = excluded.known, filing = excluded.filing, place = excluded.place, declared_at = now()
        RETURNING * INTO stored;
    RETURN jsonb_build_object('known', stored.known, 'filing', stored.filing, 'place', stored.place);
END
$$;

-- ---------------------------------------------------------------------------
-- Filing with a savepoint around it.

-- Whether an error is one a resend may cure: the database was busy, short
-- of something, going away, or the transaction lost a race. Everything else
-- (a constraint, a value that does not read, a trigger's own error, a bug)
-- is permanent: the rows are kept and filed after a deploy.
CREATE FUNCTION sync_internal.is_transient(state text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT state IN ('40001', '40P01', '40003', '55P03', '55006', '57014')
        OR left(state, 2) IN ('08', '53', '57', '58', 'HV')
$$;

-- Runs one filing statement over rows ($1 jsonb, then the sender, what is
-- known of it and the table as $2 to $4) in a savepoint, as the role
-- `runs_as` (the caller of sync.receive, or the role its filing hook took)
-- with the caller's `search_path` (sync_internal.file_as switches to them
-- and back), answering how many rows it filed, or why the database refused
-- it. A transient error fails the call: the upload must come again.
CREATE FUNCTION sync_internal.file_together(statement text, rows jsonb, replica uuid,
                                            known jsonb, table_name text, runs_as oid,
                                            search_path text,
                                            OUT filed bigint, OUT failure text)
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        filed := sync_internal.file_as(runs_as, search_path, statement, rows, replica,
                                       known, table_name);
    EXCEPTION WHEN OTHERS THEN
        -- The savepoint is undone, and who the statement ran as with it.
        IF sync_internal.is_transient(SQLSTATE) THEN
            RAISE;
        END IF;
        filed := 0;
        failure := SQLERRM;
    END;
END
$$;

-- The same statement, one row at a time, each in a savepoint of its own
-- (sync_internal.file_together's): per row (at, from 0), how many it filed,
-- or why it was refused.
CREATE FUNCTION sync_internal.file_each(statement text, rows jsonb, replica uuid, known jsonb,
                                        table_name text, runs_as oid, search_path text)
RETURNS TABLE (at integer, filed bigint, failure text)
LANGUAGE sql AS $$
    SELECT i, one.filed, one.failure
    FROM pg_catalog.generate_series(0, pg_catalog.jsonb_array_length(rows) - 1) AS i
    CROSS JOIN LATERAL sync_internal.file_together(statement, pg_catalog.jsonb_build_array(rows -> i),
                                                   replica, known, table_name, runs_as,
                                                   search_path) AS one
    ORDER BY i;
$$;

-- Each row run through the host's place function (its name as
-- sync.senders keeps it, quoted), one at a time in a savepoint of its own,
-- as `runs_as` with `search_path` (sync_internal.place_as): per row (at,
-- from 0), the row as it is to be filed, or why the function failed on it.
CREATE FUNCTION sync_internal.place_each(place text, rows jsonb, replica uuid, known jsonb,
                                         table_name text, runs_as oid, search_path text)
RETURNS TABLE (at integer, placed jsonb, failure text)
LANGUAGE plpgsql AS $$
DECLARE
    i integer;
BEGIN
    FOR i IN 0 .. pg_catalog.jsonb_array_length(rows) - 1 LOOP
        at := i;
        placed := NULL;
        failure := NULL;
        BEGIN
            placed := sync_internal.place_as(runs_as, search_path, place, replica, known,
                                             table_name, rows -> i);
        EXCEPTION WHEN OTHERS THEN
            IF sync_internal.is_transient(SQLSTATE) THEN
                RAISE;
            END IF;
            failure := SQLERRM;
        END;
        RETURN NEXT;
    END LOOP;
END
$$;

-- (The sender's filing hook runs in a savepoint of Rust's, as the caller:
-- a hook may SET LOCAL ROLE, which PostgreSQL refuses inside a function
-- run as another user. pg_magic_sync/src/file/acting.rs.)

-- For the relay, before a pass: replicas whose provisioning was noted for
-- later (they said of themselves they needed one sooner than they may) and
-- whose time has come are provisioned. Answers how many.
CREATE FUNCTION sync_internal.provision_due() RETURNS bigint
LANGUAGE sql AS $$
    WITH due AS (
        UPDATE sync.replicas SET provision = true, provision_at = NULL,
               said_provisioned_at = now(), said_times = said_times + 1
        WHERE live AND provision_at <= now() RETURNING 1)
    SELECT count(*) FROM due;
$$;
