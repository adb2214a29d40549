-- Wishes: sync.desire and sync.withdraw and the errors they name, a wish
-- sent through the relay as a row of sync_wishes, the answers a replica
-- files (and those left out), and sync.wishes and the overview's counts.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL);
CREATE TABLE shop.footers (register_id uuid PRIMARY KEY, text text NOT NULL,
                           changed_at timestamptz NOT NULL, printed bigint NOT NULL DEFAULT 0);
CREATE TABLE shop.counters (register_id uuid NOT NULL, id integer NOT NULL, value bigint NOT NULL,
                            changed_at bigint NOT NULL, PRIMARY KEY (register_id, id));
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT sync.declare_table('shop.products', sync => 'broadcast');

-- No setting yet: nothing is wished.
SELECT sync.desire('footers', '{}');

SELECT sync.declare_table('shop.footers', mirror => 'setting', origin => 'register_id',
                          version => 'changed_at', desired => '{text}', apply => 'if_unchanged');
SELECT sync.declare_table('shop.counters', mirror => 'setting', origin => 'register_id',
                          version => 'changed_at', desired => '{value}');
-- The engine notes its table of wishes as a table written on both sides
-- (the answer's columns are the replica's): the extension's triggers.
SELECT tgname FROM pg_trigger WHERE tgrelid = 'sync.sync_wishes'::regclass ORDER BY tgname;
SELECT line FROM sync.triggers() AS line WHERE line LIKE '%sync_wishes%';

INSERT INTO shop.registers VALUES ('00000000-0000-0000-0000-00000000000a'),
                                  ('00000000-0000-0000-0000-00000000000b');
-- What the registers reported (filed as their uploads would be).
INSERT INTO shop.footers (register_id, text, changed_at) VALUES
    ('00000000-0000-0000-0000-00000000000a', 'Thank you', '2026-10-12 10:00:00.123456+00'),
    ('00000000-0000-0000-0000-00000000000b', 'Merci', '2026-10-12 11:00:00+00');
INSERT INTO shop.counters VALUES ('00000000-0000-0000-0000-00000000000a', 1, 5, 3);

-- Bad wishes, each named.
SELECT sync.desire('products', '{"id": "00000000-0000-0000-0000-000000000001", "name": "Tea"}');
SELECT sync.desire('nowhere', '{}');
SELECT sync.desire('footers', '"Hello"');
SELECT sync.desire('footers', '{"register_id": "00000000-0000-0000-0000-00000000000a", "text": "Hi",
                                "changed_at": "2026-10-12T10:00:00.123456Z", "printed": "3"}');
SELECT sync.desire('footers', '{"register_id": "00000000-0000-0000-0000-00000000000a", "colour": "red"}');
SELECT sync.desire('footers', '{"register_id": "00000000-0000-0000-0000-00000000000a", "text": "Hi"}');
SELECT sync.desire('footers', '{"register_id": "00000000-0000-0000-0000-0000000000ff", "text": "Hi",
                                "changed_at": "2026-10-12T10:00:00Z"}');
SELECT sync.desire('footers', '{"text": "Hi", "changed_at": "2026-10-12T10:00:00Z"}');
SELECT sync.desire('footers', '{"register_id": "00000000-0000-0000-0000-00000000000a",
                                "changed_at": "2026-10-12T10:00:00Z"}');
SELECT sync.desire('counters', '{"register_id": "00000000-0000-0000-0000-00000000000a", "id": 1,
                                 "value": "six"}');
SELECT sync.withdraw('products', '00000000-0000-0000-0000-000000000001');
SELECT sync.withdraw('footers', 'not a key');
-- Nothing was written.
SELECT count(*) AS wishes FROM sync.sync_wishes;

-- A wish, in the caller's transaction: rolled back, it is gone.
BEGIN;
SELECT sync.desire('footers', '{"register_id": "00000000-0000-0000-0000-00000000000a", "text": "Hello",
                                "changed_at": "2026-10-12T10:00:00.123456Z"}', 'from the page') IS NOT NULL AS wished;
ROLLBACK;
SELECT count(*) AS wishes FROM sync.sync_wishes;

-- Wished: its row's replica, key, the wished columns, the version it is
-- based on, a random version, the note; noted for the relay.
SELECT sync.desire('footers', '{"register_id": "00000000-0000-0000-0000-00000000000A", "text": "Hello",
                                "changed_at": "2026-10-12T10:00:00.123456Z"}', 'from the page') AS wish \gset
SELECT id = :'wish' AS its_id, replica, table_name, key, wanted, based_on, version > 0 AS drawn, note,
       answered, outcome FROM sync.sync_wishes;
SELECT table_name, key = :'wish' AS its_key FROM sync.notes WHERE table_name = 'sync_wishes';
SELECT sync.desire('counters', '{"register_id": "00000000-0000-0000-0000-00000000000a", "id": 1, "value": 7}',
                   'always') IS NOT NULL AS wished;
-- Wishing the row again replaces its wish, under a new version.
SELECT version AS first_version FROM sync.sync_wishes WHERE id = :'wish' \gset
SELECT sync.desire('footers', '{"register_id": "00000000-0000-0000-0000-00000000000a", "text": "Hello!",
                                "changed_at": "2026-10-12T10:00:00.123456Z"}', 'again') = :'wish' AS same_wish;
SELECT version <> :first_version AS new_version, wanted, note FROM sync.sync_wishes WHERE id = :'wish';
SELECT count(*) AS wishes FROM sync.sync_wishes;

-- The relay sends each wish to its replica, and records it held there.
CALL sync.relay();
SELECT replica, table_name, key = :'wish' AS the_wish FROM sync.held
 WHERE table_name = 'sync_wishes' ORDER BY replica, key = :'wish';

-- Where they stand, for the replicas the relay has seen: pending, with
-- the row the server holds.
SELECT w ->> 'table' AS "table", w ->> 'key' AS key, w ->> 'state' AS state, w -> 'wanted' AS wanted,
       w -> 'reported' ->> 'text' AS reported, w ->> 'note' AS note
  FROM jsonb_array_elements(sync.wishes() -> 'wishes') AS w;
SELECT (sync.wishes() -> 'contract')::int AS contract, sync.wishes() ? 'now' AS has_now,
       sync.wishes('{"replicas": ["00000000-0000-0000-0000-00000000000b"]}') -> 'total' AS total_of_b,
       sync.wishes(state => 'applied') -> 'total' AS applied;
SELECT sync.wishes(state => 'done');
SELECT sync.wishes(lim => -1);

-- A few lines of protobuf, to write Up messages by hand (helpers/).
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/helpers/protobuf.sql
-- An answer, as the replica sends it: the Wish as it came, and its answer.
CREATE FUNCTION pg_temp.answer(id text, answered bigint, outcome text, reason text DEFAULT '',
                               answered_at text DEFAULT '2026-10-12T10:00:01.000001Z')
RETURNS bytea LANGUAGE sql AS $$
    SELECT pg_temp.text(1, id) || pg_temp.text(2, 'footers') || pg_temp.number(7, answered)
           || pg_temp.text(8, outcome) || pg_temp.text(9, reason) || pg_temp.text(10, answered_at) $$;
-- An Up of protocol 1 carrying one part of sync_wishes, and an upload number.
CREATE FUNCTION pg_temp.answers(id text, answer bytea, upload bigint, restated boolean DEFAULT false)
RETURNS bytea LANGUAGE sql AS $$
    SELECT pg_temp.number(1, 1)
           || pg_temp.bytes(7, pg_temp.text(1, 'sync_wishes') || pg_temp.bytes(2, answer)
                               || pg_temp.text(3, id)
                               || CASE WHEN restated THEN pg_temp.number(5, 1) ELSE '\x' END)
           || pg_temp.bytes(8, pg_temp.varint(upload)) $$;
SELECT version AS v FROM sync.sync_wishes WHERE id = :'wish' \gset
-- A verdict with the wish's id (drawn at random) named.
CREATE FUNCTION pg_temp.named(verdict jsonb, wish text) RETURNS text LANGUAGE sql AS $$
    SELECT replace(verdict::text, wish, '<the wish>') $$;

-- An answer of a version replaced since leaves the wish pending.
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :first_version, 'applied'), 71)) -> 'rows', :'wish') AS verdict;
SELECT sync.wishes(state => 'pending') -> 'total' AS pending;
-- Waiting, with its reason: answered, and the replica tries again itself.
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :v, 'waiting', 'the printer is off'), 72)) -> 'rows', :'wish') AS verdict;
SELECT w ->> 'state' AS state, w ->> 'reason' AS reason, w ->> 'answered_at' AS answered_at
  FROM jsonb_array_elements(sync.wishes(state => 'waiting') -> 'wishes') AS w;
-- Applied: final for this version.
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :v, 'applied'), 73)) -> 'rows', :'wish') AS verdict;
-- Another answer to the same version, kept back by the transport and
-- uploaded later, does not take its place; one re-stated does.
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :v, 'waiting', 'late'), 74)) -> 'rows', :'wish') AS verdict;
SELECT answered = :v AS this_version, outcome, reason FROM sync.sync_wishes WHERE id = :'wish';
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :v, 'refused', 'too long'), 75, true)) -> 'rows', :'wish') AS verdict;
SELECT answered = :v AS this_version, outcome, reason FROM sync.sync_wishes WHERE id = :'wish';
-- Filed under the replica the transport names: another's answer to this
-- wish is of a row it does not hold (while it is provisioned it waits in
-- the inbox, and never files over a's); a malformed answer is left out.
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000b',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :v, 'applied'), 76)) -> 'rows', :'wish') AS verdict;
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :v, 'done'), 77)) -> 'rows', :'wish') AS verdict;
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', 0, 'applied'), 78)) -> 'rows', :'wish') AS verdict;
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :v, 'applied', '', 'noon'), 79)) -> 'rows', :'wish') AS verdict;
SELECT outcome FROM sync.sync_wishes WHERE id = :'wish';

-- The overview counts each replica's wishes by where they stand: one not
-- answered keeps its replica catching up.
SELECT r ->> 'id' AS replica, r -> 'wishes' AS wishes
  FROM jsonb_array_elements(sync.overview() -> 'replicas' -> 'first') AS r ORDER BY 1;
SELECT r ->> 'state' AS state FROM jsonb_array_elements(sync.listing() -> 'replicas') AS r
 WHERE r ->> 'id' = '00000000-0000-0000-0000-00000000000a';

-- Withdrawn: gone, noted, and an answer to it is left out. Once the relay
-- takes it back, an answer to it waits while the replica's provisioning is
-- not confirmed (it may yet hold it), as any edit of a row it may hold.
SELECT sync.withdraw('footers', '00000000-0000-0000-0000-00000000000A') AS withdrawn;
SELECT sync.withdraw('footers', '00000000-0000-0000-0000-00000000000a') AS withdrawn_again;
SELECT count(*) AS noted FROM sync.notes WHERE table_name = 'sync_wishes';
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :v, 'applied'), 80)) -> 'rows', :'wish') AS verdict;
CALL sync.relay();
SELECT key = :'wish' AS the_wish, leaving IS NOT NULL AS leaving FROM sync.held
 WHERE table_name = 'sync_wishes' AND replica = '00000000-0000-0000-0000-00000000000a' ORDER BY 2;
SELECT pg_temp.named(sync.receive('00000000-0000-0000-0000-00000000000a',
                    pg_temp.answers(:'wish', pg_temp.answer(:'wish', :v, 'applied'), 81)) -> 'rows', :'wish') AS verdict;

-- sync.wishes is a status read: the owner's, and a reader's once allowed.
CREATE ROLE wish_reader;
SET ROLE wish_reader;
SELECT sync.wishes();
SELECT sync.desire('counters', '{}');
RESET ROLE;
SELECT sync.allow_reading('wish_reader');
SET ROLE wish_reader;
SELECT sync.wishes() -> 'total' AS total;
SELECT sync.desire('counters', '{}');
SELECT sync.withdraw('counters', '00000000-0000-0000-0000-00000000000a|1');
RESET ROLE;

-- Leave the database as it was found.
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
DROP OWNED BY wish_reader;
DROP ROLE wish_reader;
