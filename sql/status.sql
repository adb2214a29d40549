-- Where things stand, from any SQL client (docs/src/status.md): the status
-- reads. Each answers jsonb carrying `contract` (the version of its JSON:
-- a field renamed or a meaning changed raises it) and `now` (the server's
-- time, which every time in the answer is measured against), reads one
-- snapshot (each is STABLE: inside a READ COMMITTED transaction it answers
-- from its statement's moment, inside REPEATABLE READ from the caller's),
-- and takes a scope, counting only live replicas.
--
-- A scope, as jsonb:
--   NULL, '{}' or '"all"'                every live replica;
--   '{"replicas": ["<uuid>", ...]}'      those of them that are live;
--   '{"partition": "<partition>"}'       the live replicas of a partition.

-- The live replicas of a scope, with their partitions. A scope of any other
-- shape is refused with an error naming what is wrong with it.
CREATE FUNCTION sync_internal.scope_replicas(scope jsonb)
RETURNS TABLE (id uuid, partition text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    kind text := jsonb_typeof(scope);
    keys text[];
BEGIN
    IF scope IS NULL OR scope = '{}'::jsonb OR scope = '"all"'::jsonb THEN
        RETURN QUERY SELECT r.id, r.partition FROM sync.replicas r WHERE r.live;
        RETURN;
    END IF;
    IF kind <> 'object' THEN
        RAISE EXCEPTION 'magic_sync: a scope is an object, "all" or NULL, not %', scope
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass {"replicas": [...]}, {"partition": "..."}, or NULL for every replica.';
    END IF;
    SELECT array_agg(k ORDER BY k) INTO keys FROM jsonb_object_keys(scope) AS k;
    IF keys = ARRAY['replicas'] THEN
        IF jsonb_typeof(scope->'replicas') <> 'array' THEN
            RAISE EXCEPTION 'magic_sync: a scope''s "replicas" is an array of replica ids, not %',
                scope->'replicas' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN QUERY
            SELECT r.id, r.partition FROM sync.replicas r
            WHERE r.live AND r.id = ANY (sync_internal.scope_ids(scope->'replicas'));
    ELSIF keys = ARRAY['partition'] THEN
        IF jsonb_typeof(scope->'partition') NOT IN ('string', 'number') THEN
            RAISE EXCEPTION 'magic_sync: a scope''s "partition" is a partition''s value, not %',
                scope->'partition' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN QUERY
            SELECT r.id, r.partition FROM sync.replicas r
            WHERE r.live AND r.partition = scope->>'partition';
    ELSE
        RAISE EXCEPTION 'magic_sync: a scope names "replicas" or "partition", not %',
            array_to_string(keys, ', ')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass {"replicas": [...]}, {"partition": "..."}, or NULL for every replica.';
    END IF;
END
$$;

-- The replica ids of a scope's "replicas", each checked to be a uuid.
CREATE FUNCTION sync_internal.scope_ids(ids jsonb) RETURNS uuid[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    id jsonb;
    parsed uuid[] := '{}';
BEGIN
    FOR id IN SELECT jsonb_array_elements(ids) LOOP
        IF jsonb_typeof(id) <> 'string' THEN
            RAISE EXCEPTION 'magic_sync: a replica id in a scope is a uuid, not %', id
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        BEGIN
            parsed := parsed || (id #>> '{}')::uuid;
        EXCEPTION WHEN invalid_text_representation THEN
            RAISE EXCEPTION 'magic_sync: a replica id in a scope is a uuid, not %', id
                USING ERRCODE = 'invalid_parameter_value';
        END;
    END LOOP;
    RETURN parsed;
END
$$;
