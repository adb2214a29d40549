-- Where things stand: sync.overview(), sync.listing() and sync.health(),
-- in every state a replica can be in and with every kind of health item,
-- and what each refuses. Times are masked: they are the server's, now.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, company text NOT NULL,
                             active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.products (id uuid PRIMARY KEY, company text NOT NULL, name text NOT NULL);
CREATE TABLE shop.receipts (id uuid PRIMARY KEY, register_id uuid NOT NULL, company text,
                            total_cents bigint NOT NULL CHECK (total_cents >= 0));
SELECT sync.declare_replicas('shop.registers', live => 'active', partitioned_by => 'company');
SELECT sync.declare_table('shop.products', sync => 'broadcast');
SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
INSERT INTO shop.registers (id, company) VALUES
    ('00000000-0000-0000-0000-00000000000a', 'acme'),
    ('00000000-0000-0000-0000-00000000000b', 'acme'),
    ('00000000-0000-0000-0000-00000000000c', 'acme'),
    ('00000000-0000-0000-0000-00000000000d', 'other');
INSERT INTO shop.products VALUES
    ('00000000-0000-0000-0000-000000000001', 'acme', 'Tea'),
    ('00000000-0000-0000-0000-000000000002', 'acme', 'Coffee'),
    ('00000000-0000-0000-0000-000000000003', 'other', 'Cake');

-- Every time in an answer is the server's, now: masked, with the age of the
-- oldest note and the message numbers (drawn in the order passes run).
CREATE FUNCTION pg_temp.masked(j jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE jsonb_typeof(j)
        WHEN 'object' THEN coalesce((
            SELECT jsonb_object_agg(k, CASE
                WHEN v = 'null' THEN v
                WHEN k IN ('now', 'since', 'message', 'oldest_age_seconds') OR k LIKE '%\_at'
                    THEN '"<masked>"'::jsonb
                ELSE pg_temp.masked(v) END)
            FROM jsonb_each(j) AS e(k, v)), '{}')
        WHEN 'array' THEN coalesce((
            SELECT jsonb_agg(pg_temp.masked(v) ORDER BY n)
            FROM jsonb_array_elements(j) WITH ORDINALITY AS e(v, n)), '[]')
        ELSE j END;
END $$;
CREATE FUNCTION pg_temp.pretty(j jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT jsonb_pretty(pg_temp.masked(j)) $$;
-- Each replica of a listing, a line each: its state and why.
CREATE FUNCTION pg_temp.states(listing jsonb)
RETURNS TABLE (replica text, state text, pending int, owed int, unconfirmed boolean,
               provisioning boolean, backlog boolean, set_aside int, held_back int,
               waiting int, refused int, kept int, failures int)
LANGUAGE sql AS $$
    SELECT right(r ->> 'id', 1), r ->> 'state', (w ->> 'pending')::int, (r ->> 'owed')::int,
           (w ->> 'unconfirmed')::boolean, (w ->> 'provisioning')::boolean,
           (w ->> 'backlog')::boolean, (w ->> 'set_aside')::int, (w ->> 'held_back')::int,
           (w ->> 'waiting')::int, (w ->> 'refused')::int, (w ->> 'kept')::int,
           (w ->> 'failures')::int
    FROM jsonb_array_elements(listing -> 'replicas') WITH ORDINALITY AS e(r, n),
         LATERAL (SELECT r -> 'why' AS w) AS why
    ORDER BY n $$;
-- The overview's figures per table, a line each.
CREATE FUNCTION pg_temp.tables(overview jsonb)
RETURNS TABLE (name text, pending int, in_flight int, set_aside int, unfiled int, synced boolean)
LANGUAGE sql AS $$
    SELECT t ->> 'table', (t ->> 'pending')::int, (t ->> 'in_flight')::int,
           (t ->> 'set_aside')::int, (t ->> 'unfiled')::int, (t ->> 'synced')::boolean
    FROM jsonb_array_elements(overview -> 'tables') WITH ORDINALITY AS e(t, n) ORDER BY n $$;

-- A few lines of protobuf, to write a device's Up by hand (helpers/).
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/helpers/protobuf.sql
-- A backlog: one table's figures (unsent, unfiled), or none at all.
CREATE FUNCTION pg_temp.backlog(name text DEFAULT NULL, unsent int DEFAULT 0, unfiled int DEFAULT 0)
RETURNS bytea LANGUAGE sql AS $$
    SELECT pg_temp.bytes(11, CASE WHEN name IS NULL THEN '\x'::bytea ELSE pg_temp.bytes(1,
        pg_temp.text(1, name) || pg_temp.number(2, unsent) || pg_temp.number(3, unfiled)) END) $$;

-- The last message each replica applied, as that message carried it.
CREATE TEMP TABLE applied (replica uuid PRIMARY KEY, epoch text, sequence bigint,
                           nonce bigint, mac bytea);
-- A device: takes every message waiting for it, applies and acknowledges
-- each, then sends an Up saying the last it applied, with its backlog (an
-- empty one by default), and optionally a row of a products message it
-- refused (or held back) and parts to file.
CREATE FUNCTION pg_temp.device(me uuid, backlog bytea DEFAULT pg_temp.backlog(),
                               refuse text DEFAULT NULL, held_back boolean DEFAULT false,
                               parts bytea DEFAULT '\x', upload bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    m record;
    head bytea;
    kind text;
    id text[];
    a applied;
    up bytea;
BEGIN
    LOOP
        SELECT n.id, n.message INTO m FROM sync.next(me) n;
        EXIT WHEN m.id IS NULL;
        SELECT o.kind, o.head INTO kind, head FROM sync.outbox o WHERE o.replica = me AND o.id = m.id;
        IF kind <> 'filed' THEN
            -- {epoch}-{sequence}-{nonce}; the seal (16 bytes) ends the head.
            id := regexp_match(m.id, '^(.*)-([0-9]+)-([0-9]+)$');
            INSERT INTO applied VALUES (me, id[1], id[2]::bigint, id[3]::bigint,
                                        substring(head FROM length(head) - 15))
            ON CONFLICT (replica) DO UPDATE SET epoch = excluded.epoch,
                sequence = excluded.sequence, nonce = excluded.nonce, mac = excluded.mac;
        END IF;
        PERFORM sync.ack(me, m.id);
    END LOOP;
    SELECT * INTO a FROM applied WHERE replica = me;
    up := pg_temp.number(1, 1) || pg_temp.text(2, a.epoch) || pg_temp.number(3, a.sequence)
          || pg_temp.number(4, a.nonce) || pg_temp.bytes(5, a.mac) || parts || backlog;
    IF refuse IS NOT NULL THEN
        up := up || pg_temp.bytes(9, pg_temp.text(1, 'products') || pg_temp.text(2, refuse)
              || pg_temp.text(3, 'no room for it') || pg_temp.text(4, a.epoch)
              || pg_temp.number(5, a.sequence)
              || CASE WHEN held_back THEN pg_temp.number(6, 1) ELSE '\x' END);
    END IF;
    IF upload IS NOT NULL THEN
        up := up || pg_temp.bytes(8, pg_temp.varint(upload));
    END IF;
    PERFORM sync.receive(me, up);
END $$;

-- Nothing relayed yet: the relay knows no replica, so nothing is counted
-- (the notes written so far concern no replica it knows).
SELECT pg_temp.pretty(sync.overview());

-- A first pass provisions every register: each is catching up, on what
-- waits in its outbox and is not confirmed.
CALL sync.relay();
SELECT * FROM pg_temp.states(sync.listing());

-- Each takes its snapshot and says so: synced, and healthy.
SELECT pg_temp.device(id) FROM shop.registers ORDER BY id;
SELECT pg_temp.pretty(sync.overview());
SELECT pg_temp.pretty(sync.listing(state => 'synced', lim => 1));
SELECT pg_temp.pretty(sync.health());

-- A product of acme changes: its registers are catching up on a note not
-- yet planned; the register of another company is not.
INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000004', 'acme', 'Juice');
SELECT * FROM pg_temp.states(sync.listing());
SELECT * FROM pg_temp.tables(sync.overview());
SELECT pg_temp.masked(sync.health() -> 'notes');
-- Planned and sent: on its way until confirmed. Register a confirms.
CALL sync.relay();
SELECT * FROM pg_temp.tables(sync.overview());
SELECT pg_temp.device('00000000-0000-0000-0000-00000000000a');
SELECT * FROM pg_temp.states(sync.listing());
SELECT pg_temp.pretty(sync.overview(lim => 2) -> 'replicas');

-- Sends to c keep failing (as the nats transport records them; made here
-- by hand): c is out of reach, which is the network's to settle: healthy.
INSERT INTO sync.sends (replica, failures, message, last_error, retry_at)
VALUES ('00000000-0000-0000-0000-00000000000c', 3, 'the message', 'no responders', now());
SELECT * FROM pg_temp.states(sync.listing());
SELECT pg_temp.pretty(sync.listing(state => 'unreachable'));
SELECT pg_temp.pretty(sync.health() -> 'failing');
SELECT sync.overview() -> 'healthy' AS healthy;

-- b refuses the row it was sent: a row of its own set aside, awaiting a
-- fix; unhealthy.
SELECT pg_temp.device('00000000-0000-0000-0000-00000000000b',
                      refuse => '00000000-0000-0000-0000-000000000004');
SELECT * FROM pg_temp.states(sync.listing());
SELECT pg_temp.pretty(sync.listing(state => 'awaiting_fix'));
SELECT pg_temp.pretty(sync.health() -> 'refused');
SELECT sync.overview() -> 'healthy' AS healthy;

-- a holds back a row (nothing at fault): it catches up on it, and it waits.
INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000005', 'acme', 'Milk');
CALL sync.relay();
SELECT pg_temp.device('00000000-0000-0000-0000-00000000000a',
                      refuse => '00000000-0000-0000-0000-000000000005', held_back => true);
SELECT * FROM pg_temp.states(sync.listing());
SELECT pg_temp.masked(sync.health() -> 'refused' -> 'first') AS refused;

-- d has receipts not filed yet, as its backlog says: catching up, and
-- the receipts table is not where it should be.
SELECT pg_temp.device('00000000-0000-0000-0000-00000000000d',
                      backlog => pg_temp.backlog('receipts', 2, 1));
SELECT * FROM pg_temp.states(sync.listing(scope => '{"partition": "other"}'));
SELECT pg_temp.pretty(sync.listing(scope => '{"partition": "other"}') -> 'replicas' -> 0 -> 'backlog');
SELECT * FROM pg_temp.tables(sync.overview());

-- d uploads a receipt the database refuses: kept in the inbox, its own,
-- awaiting a fix.
SELECT pg_temp.device('00000000-0000-0000-0000-00000000000d',
    parts => pg_temp.bytes(7, pg_temp.text(1, 'receipts')
                              || pg_temp.text(2, '{"total_cents": "-5"}')
                              || pg_temp.text(3, '00000000-0000-0000-0000-000000000101')),
    upload => 1);
SELECT * FROM pg_temp.states(sync.listing());
SELECT pg_temp.pretty(sync.health(scope => '{"partition": "other"}'));
-- A row no message can carry is set aside: it may concern every replica,
-- so each catches up on it, and it waits for a fix.
SET magic_sync.message_bytes = 4096;
INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000006', 'other', repeat('x', 6000));
CALL sync.relay();
RESET magic_sync.message_bytes;
SELECT * FROM pg_temp.states(sync.listing());
SELECT pg_temp.masked(sync.health() -> 'set_aside');

-- An upload that waits for its replica's provisioning to be confirmed (an
-- edit of a two-way row; made here by hand, after the last pass that would
-- file it again) waits, and is no fault.
INSERT INTO sync.inbox (replica, table_name, key, op, row, reason, waiting, retry_at)
VALUES ('00000000-0000-0000-0000-00000000000c', 'receipts', '00000000-0000-0000-0000-000000000102',
        'u', '{}', 'waits for the provisioning to be confirmed', true, now());
SELECT pg_temp.masked(sync.health(scope => '{"replicas": ["00000000-0000-0000-0000-00000000000c"]}') -> 'inbox');

-- Every state and health item at once, in full.
SELECT pg_temp.pretty(sync.overview());
-- Cut at lim, the totals uncut; the rest a page away, in the same order.
SELECT pg_temp.pretty(sync.health(lim => 1));
SELECT pg_temp.pretty(sync.overview(lim => 0) - 'tables' - 'health');
SELECT * FROM pg_temp.states(sync.listing("offset" => 1, lim => 2));
SELECT sync.listing(state => 'catching_up', "offset" => 5) - 'now';
-- A scope: some replicas (one not known is no part of it), a partition.
SELECT pg_temp.masked(sync.overview('{"replicas": ["00000000-0000-0000-0000-00000000000a",
    "00000000-0000-0000-0000-0000000000ff"]}') -> 'states') AS states;
SELECT sync.overview('{"partition": "other"}') -> 'states' AS states;
SELECT sync.overview('{"partition": "nobody"}') -> 'replicas' AS replicas;
SELECT sync.overview('"all"') -> 'states' = sync.overview('{}') -> 'states' AS same;

-- A replica no longer live is no longer counted.
UPDATE shop.registers SET active = false WHERE id = '00000000-0000-0000-0000-00000000000c';
CALL sync.relay();
SELECT * FROM pg_temp.states(sync.listing());

-- Refused, naming what is wrong. (Where in the functions it stops is no
-- part of the answer.)
\set SHOW_CONTEXT never
SELECT sync.overview('[]');
SELECT sync.overview('{"replicas": "00000000-0000-0000-0000-00000000000a"}');
SELECT sync.overview('{"replicas": [1]}');
SELECT sync.overview('{"replicas": ["register a"]}');
SELECT sync.health('{"partition": true}');
SELECT sync.listing('{"company": "acme"}');
SELECT sync.listing('{"partition": "acme", "replicas": []}');
SELECT sync.listing(state => 'lost');
SELECT sync.listing("offset" => -1);
SELECT sync.listing(lim => NULL);
SELECT sync.overview(lim => -1);
SELECT sync.health(lim => -5);
\set SHOW_CONTEXT errors

-- Each read is STABLE, so it answers from one snapshot: its statement's
-- inside a READ COMMITTED transaction, the caller's inside REPEATABLE READ.
SELECT p.oid::regprocedure AS read, p.provolatile AS volatility
FROM pg_proc p
WHERE p.proname IN ('overview', 'listing', 'health', 'replica_states', 'replica_page',
                    'table_figures', 'scope_replicas')
  AND p.pronamespace IN ('sync'::regnamespace, 'sync_internal'::regnamespace)
ORDER BY p.oid::regprocedure::text COLLATE "C";

-- Leave the database as it was found.
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
