-- sync.what_if: a migration tried before it is deployed (docs/src/server.md,
-- "What if, before deploying"). It takes the migration's SQL as the deploy
-- will run it (its DDL and its sync.declare_table calls), runs it and then
-- one relay pass in a subtransaction, counts what that pass sends each
-- replica and lets go of, and rolls the subtransaction back: the
-- migration, the pass, the messages and what they record are undone, and
-- the locks the migration took are let go with them. What it answers is
-- what the next pass would send were the migration deployed now, counted
-- from what the engine records (sync.held), as a real pass records it.

-- Who is sent what, before the pass: each replica's rows, the message
-- that carried each, and whether one is leaving.
CREATE FUNCTION sync_internal.what_if_held() RETURNS TABLE (
    replica uuid, table_name text, key text, sent bigint, leaving boolean)
LANGUAGE sql STABLE AS $$
    SELECT h.replica, h.table_name, h.key, h.sent, h.leaving IS NOT NULL FROM sync.held h
$$;

-- CALL it outside a transaction block: it commits what came before it, as
-- sync.relay() does, and runs in a REPEATABLE READ transaction of its own
-- (a pass's), which it ends having changed nothing.
CREATE PROCEDURE sync.what_if(migration text, INOUT answer jsonb DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    summary jsonb;
BEGIN
    PERFORM sync_internal.outside_a_transaction_block();
    COMMIT;
    LOOP
        SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
        summary := NULL;
        BEGIN
            -- What each replica holds as the engine records it, before.
            CREATE TEMP TABLE sync_what_if_before ON COMMIT DROP AS
                SELECT * FROM sync_internal.what_if_held();
            EXECUTE migration;
            summary := sync_internal.pass(false);
            IF summary IS NOT NULL THEN
                -- A row sent: one each replica holds after the pass, not
                -- leaving, that a message of the pass carried (it held no
                -- such row before, or held it as another message carried
                -- it). A row let go of: one it held, not leaving, that it
                -- holds no more, or that a message of the pass takes back.
                WITH after AS (SELECT * FROM sync_internal.what_if_held()),
                sent AS (
                    SELECT a.replica, a.table_name, count(*) AS n FROM after a
                    WHERE NOT a.leaving
                      AND NOT EXISTS (SELECT 1 FROM sync_what_if_before b
                                      WHERE b.replica = a.replica AND b.table_name = a.table_name
                                        AND b.key = a.key AND b.sent = a.sent AND NOT b.leaving)
                    GROUP BY 1, 2),
                let_go AS (
                    SELECT b.replica, b.table_name, count(*) AS n FROM sync_what_if_before b
                    WHERE NOT b.leaving
                      AND NOT EXISTS (SELECT 1 FROM after a
                                      WHERE a.replica = b.replica AND a.table_name = b.table_name
                                        AND a.key = b.key AND NOT a.leaving)
                    GROUP BY 1, 2),
                per AS (
                    SELECT coalesce(s.replica, l.replica) AS replica,
                           coalesce(s.table_name, l.table_name) AS table_name,
                           coalesce(s.n, 0) AS sent, coalesce(l.n, 0) AS let_go
                    FROM sent s FULL JOIN let_go l
                      ON l.replica = s.replica AND l.table_name = s.table_name),
                by_replica AS (
                    SELECT p.replica, sum(p.sent) AS sent, sum(p.let_go) AS let_go,
                           jsonb_agg(jsonb_build_object('table', p.table_name, 'sent', p.sent,
                                                        'let_go', p.let_go)
                                     ORDER BY p.table_name) AS tables
                    FROM per p GROUP BY p.replica),
                by_table AS (
                    SELECT p.table_name, sum(p.sent) AS sent, sum(p.let_go) AS let_go,
                           count(*) AS replicas
                    FROM per p GROUP BY p.table_name)
                SELECT jsonb_build_object(
                    'contract', 1,
                    'redeclared', summary->'redeclared',
                    'replicas', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                              'replica', r.replica, 'sent', r.sent,
                                              'let_go', r.let_go, 'tables', r.tables)
                                              ORDER BY r.replica) FROM by_replica r), '[]'),
                    'tables', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                            'table', t.table_name, 'sent', t.sent,
                                            'let_go', t.let_go, 'replicas', t.replicas)
                                            ORDER BY t.table_name) FROM by_table t), '[]'),
                    'total', jsonb_build_object(
                        'sent', coalesce((SELECT sum(sent) FROM per), 0),
                        'let_go', coalesce((SELECT sum(let_go) FROM per), 0),
                        'replicas', (SELECT count(*) FROM by_replica)),
                    'pass', summary)
                INTO answer;
            END IF;
            -- Undoes the migration and the pass (the block is a
            -- subtransaction); the answer, a variable, stays.
            RAISE EXCEPTION USING ERRCODE = 'MSWI1', MESSAGE = 'magic_sync: what if, undone';
        EXCEPTION
            WHEN SQLSTATE 'MSWI1' THEN
                NULL;
            WHEN serialization_failure THEN
                summary := NULL;
        END;
        -- NULL: another pass committed after this snapshot was taken; tried
        -- again in a fresh one.
        EXIT WHEN summary IS NOT NULL;
        ROLLBACK;
    END LOOP;
    COMMIT;
END
$$;
