-- Where wishes stand (docs/src/wishes.md): sync.wishes, a status read as
-- the others are (sql/status.sql): jsonb carrying `contract` and `now`, one
-- snapshot, a scope of live replicas. sync.desire and sync.withdraw are
-- Rust (pg_magic_sync/src/api/wishing.rs).

-- The table of wishes is noted as a table written on both sides is
-- (pg_magic_sync/src/catalog/wishes.rs; a change of only the replica's
-- answer, or of when it was filed, is not noted), and refuses TRUNCATE. Its
-- triggers are the extension's, so a dump restored has them; the relay's
-- check holds them to what the engine would write, as every table's.
CREATE TRIGGER sync_note_row AFTER INSERT OR UPDATE OR DELETE ON sync.sync_wishes
    FOR EACH ROW EXECUTE FUNCTION sync.note_row('sync_wishes', '', '1', 'id', '0',
        '5', 'answered', 'outcome', 'reason', 'answered_at', 'filed_at');
CREATE TRIGGER sync_refuse_truncate BEFORE TRUNCATE ON sync.sync_wishes
    FOR EACH STATEMENT EXECUTE FUNCTION sync.refuse_truncate();

-- The states a wish is in, those that need attention first: refused (the
-- replica will not), waiting (it will once it can), pending (on its way,
-- or not answered yet), superseded (changed on the replica first), applied.
CREATE FUNCTION sync_internal.wish_states() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['refused', 'waiting', 'pending', 'superseded', 'applied']
$$;

-- The row of the setting `table_name` whose key is `key`, as the server
-- holds it from its replica: its travelling columns as jsonb, or NULL.
CREATE FUNCTION sync_internal.setting_row(table_name text, key text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t sync.tables;
    matches text;
    held jsonb;
BEGIN
    SELECT * INTO t FROM sync.tables s WHERE s.name = setting_row.table_name AND s.mirror = 'setting';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT string_agg(
               CASE WHEN cardinality(t.key_columns) = 1
                    THEN format('s.%I = $1::%s', c.col,
                                CASE c.ty WHEN 'uuid' THEN 'uuid' ELSE 'bigint' END)
                    ELSE format('s.%I = split_part($1, ''|'', %s)::%s', c.col, c.n,
                                CASE c.ty WHEN 'uuid' THEN 'uuid' ELSE 'bigint' END) END,
               ' AND ' ORDER BY c.n)
    INTO matches
    FROM unnest(t.key_columns, t.key_types) WITH ORDINALITY AS c(col, ty, n);
    BEGIN
        EXECUTE format('SELECT (SELECT pg_catalog.jsonb_object_agg(e.key, e.value) '
                       'FROM pg_catalog.jsonb_each(pg_catalog.to_jsonb(s)) AS e '
                       'WHERE e.key = ANY ($2)) FROM %s AS s WHERE %s', t.relation, matches)
        INTO held USING key, t.columns;
    EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
        -- A key that is not the table's names no row.
        RETURN NULL;
    END;
    RETURN held;
END
$$;

-- Why the values of a wish do not read as the columns of the setting
-- `relation` (quoted): PostgreSQL's own words, or NULL when they do.
CREATE FUNCTION sync_internal.wish_values_refused(relation text, wished jsonb) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    EXECUTE format('SELECT pg_catalog.jsonb_populate_record(NULL::%s, $1)', relation) USING wished;
    RETURN NULL;
EXCEPTION WHEN data_exception THEN
    RETURN SQLERRM;
END
$$;

-- The wishes of the scope's replicas, in one state or all, those that need
-- attention first (in the order of wish_states), the oldest wish first
-- within a state. (docs/src/wishes.md, "sync.wishes")
CREATE FUNCTION sync.wishes(scope jsonb DEFAULT NULL, state text DEFAULT NULL,
                            "offset" integer DEFAULT 0, lim integer DEFAULT 20)
RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off AS $$
DECLARE
    skip integer := sync_internal.status_count('offset', "offset");
    most integer := sync_internal.status_count('lim', lim);
    total bigint;
    page jsonb;
BEGIN
    IF state IS NOT NULL AND NOT state = ANY (sync_internal.wish_states()) THEN
        PERFORM sync_internal.refuse('22023',
            format('magic_sync: a wish is in no state "%s"', state),
            'The states are ' || array_to_string(sync_internal.wish_states(), ', ')
            || ', or NULL for all of them.');
    END IF;
    WITH w AS (
        SELECT w.*, sync_internal.wish_state(w.version, w.answered, w.outcome) AS stands
        FROM sync.sync_wishes w
        JOIN sync_internal.scope_replicas(scope) AS sc ON sc.id = w.replica
    ),
    chosen AS (
        SELECT w.*, array_position(sync_internal.wish_states(), w.stands) AS rank
        FROM w WHERE wishes.state IS NULL OR w.stands = wishes.state
    )
    SELECT (SELECT count(*) FROM chosen),
           coalesce((SELECT jsonb_agg(jsonb_build_object(
                         'id', p.id,
                         'replica', p.replica,
                         'table', p.table_name,
                         'key', p.key,
                         'wanted', p.wanted,
                         'based_on', p.based_on,
                         'version', p.version::text,
                         'note', p.note,
                         'wished_at', p.wished_at,
                         'state', p.stands,
                         -- The answer the replica gave, of this version or
                         -- of one replaced since.
                         'answered', p.answered::text,
                         'outcome', p.outcome,
                         'reason', p.reason,
                         'answered_at', p.answered_at,
                         'reported', sync_internal.setting_row(p.table_name, p.key))
                         ORDER BY p.rank, p.wished_at, p.id)
                     FROM (SELECT * FROM chosen ORDER BY rank, wished_at, id
                           OFFSET skip LIMIT most) AS p), '[]')
    INTO total, page;
    RETURN jsonb_build_object(
        'contract', sync_internal.status_contract(),
        'now', statement_timestamp(),
        'state', state,
        'offset', skip,
        'lim', most,
        'total', total,
        'wishes', page);
END
$$;
