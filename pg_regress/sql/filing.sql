-- Filing what replicas send up: sync.receive(replica, bytes) and its
-- verdicts, the inbox and sync.refile(), what the server knows of a sender
-- (sync.declare_senders), and the answers it queues (Filed).
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, company text NOT NULL DEFAULT 'acme',
                             active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL);
CREATE TABLE shop.receipts (id uuid PRIMARY KEY, register_id uuid NOT NULL,
                            total_cents bigint NOT NULL CHECK (total_cents >= 0),
                            company text, received_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE shop.counters (register_id uuid NOT NULL, id integer NOT NULL, value bigint NOT NULL,
                            changed_at bigint NOT NULL, PRIMARY KEY (register_id, id));
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT sync.declare_table('shop.products', sync => 'broadcast');
SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id',
                          unmirrored => '{received_at}');
SELECT sync.declare_table('shop.counters', mirror => 'setting', origin => 'register_id',
                          version => 'changed_at', desired => '{value}');
INSERT INTO shop.registers (id) VALUES ('00000000-0000-0000-0000-00000000000a'),
                                       ('00000000-0000-0000-0000-00000000000b');

-- A few lines of protobuf, to write Up messages by hand (helpers/).
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/helpers/protobuf.sql
-- A part of an Up: a table, its rows (a jsonb array of objects) with a key
-- beside each, its deletes, and whether it is re-stated.
CREATE FUNCTION pg_temp.part(name text, rows jsonb, keys text[], deletes text[] DEFAULT '{}',
                             restated boolean DEFAULT false)
RETURNS bytea LANGUAGE sql AS $$
    SELECT pg_temp.bytes(7,
        pg_temp.text(1, name)
        || coalesce((SELECT string_agg(pg_temp.text(2, r::text), '\x'::bytea ORDER BY n)
                     FROM jsonb_array_elements(rows) WITH ORDINALITY AS e(r, n)), '\x')
        || coalesce((SELECT string_agg(pg_temp.text(3, k), '\x'::bytea) FROM unnest(keys) AS k), '\x')
        || coalesce((SELECT string_agg(pg_temp.text(4, k), '\x'::bytea) FROM unnest(deletes) AS k), '\x')
        || CASE WHEN restated THEN pg_temp.number(5, 1) ELSE '\x' END)
$$;
-- An Up of protocol 1 carrying parts and an upload number.
CREATE FUNCTION pg_temp.up(parts bytea, upload bigint) RETURNS bytea LANGUAGE sql AS $$
    SELECT pg_temp.number(1, 1) || parts || pg_temp.bytes(8, pg_temp.varint(upload)) $$;

-- What is dropped, unanswered: bytes that are no Up, an Up of protocol 0,
-- one from a sender the replicas' relation does not know, one beyond the
-- limits (more rows than a message carries).
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', '\xdeadbeef');
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', '\x');
SELECT sync.receive('00000000-0000-0000-0000-0000000000ff', '\x0801');
SET magic_sync.message_rows = 2;
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(pg_temp.part('receipts',
    '[{"total_cents": "1"}, {"total_cents": "2"}, {"total_cents": "3"}]',
    '{00000000-0000-0000-0000-000000000101,00000000-0000-0000-0000-000000000102,00000000-0000-0000-0000-000000000103}'), 7));
RESET magic_sync.message_rows;
SELECT count(*) AS answers FROM sync.outbox;

-- An Up of a later protocol must come again: an error.
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', '\x0802');

-- Receipts, filed under the replica the caller names: the origin is the
-- sender's whatever the row leaves out; a row naming another replica, a
-- row without its key beside it, or whose own key is another, is left
-- out; a row the database refuses is kept, and counts as filed.
SELECT jsonb_pretty(sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(pg_temp.part('receipts',
    '[{"total_cents": "250"},
      {"total_cents": "300", "register_id": "00000000-0000-0000-0000-00000000000A"},
      {"total_cents": "1", "register_id": "00000000-0000-0000-0000-00000000000b"},
      {"id": "00000000-0000-0000-0000-000000000109", "total_cents": "1"},
      {"total_cents": "-5"},
      {"total_cents": "7"}]',
    '{00000000-0000-0000-0000-000000000101,00000000000000000000000000000102,00000000-0000-0000-0000-000000000103,00000000-0000-0000-0000-000000000104,00000000-0000-0000-0000-000000000105}'), 57)));
SELECT id, register_id, total_cents FROM shop.receipts ORDER BY id;
SELECT table_name, key, op, reason, waiting, tries FROM sync.inbox;
-- The answer waits in the register's queue, as a Filed of upload 57.
SELECT id LIKE 'filed-%' AS named, kind, head = '\x0a0139'::bytea AS files_57
  FROM sync.outbox WHERE replica = '00000000-0000-0000-0000-00000000000a';

-- The same upload again (a resend) changes nothing: a record is kept from
-- its first delivery.
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(pg_temp.part('receipts',
    '[{"total_cents": "999"}]', '{00000000-0000-0000-0000-000000000101}'), 58)) -> 'rows';
SELECT total_cents FROM shop.receipts WHERE id = '00000000-0000-0000-0000-000000000101';

-- A catalog row is refused; so is a table the server does not know, and a
-- delete of a table not keyed by the replica.
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(
    pg_temp.part('products', '[{"name": "Free tea"}]', '{00000000-0000-0000-0000-000000000001}')
    || pg_temp.part('nowhere', '[{}]', '{1}'), 59)) -> 'rows';

-- A setting is filed only over an older version, but for a re-stated part,
-- which is filed whatever its version.
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(pg_temp.part('counters',
    '[{"id": 1, "value": "10", "changed_at": "5"}]', '{00000000-0000-0000-0000-00000000000a|1}'), 60)) -> 'rows';
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(pg_temp.part('counters',
    '[{"id": 1, "value": "4", "changed_at": "3"}]', '{00000000-0000-0000-0000-00000000000a|1}'), 61)) -> 'rows';
SELECT value, changed_at FROM shop.counters;
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(pg_temp.part('counters',
    '[{"id": 1, "value": "4", "changed_at": "3"}]', '{00000000-0000-0000-0000-00000000000a|1}',
    restated => true), 62)) -> 'rows';
SELECT value, changed_at FROM shop.counters;
-- Another replica's upload of the same key is its own row.
SELECT sync.receive('00000000-0000-0000-0000-00000000000b', pg_temp.up(pg_temp.part('counters',
    '[{"id": 1, "value": "8", "changed_at": "1"}]', '{00000000-0000-0000-0000-00000000000b|1}'), 63)) -> 'rows';
-- A delete takes only the sender's own row: another's is left out, and said so.
SELECT sync.receive('00000000-0000-0000-0000-00000000000b', pg_temp.up(pg_temp.part('counters',
    '[]', '{}', '{00000000-0000-0000-0000-00000000000a|1,00000000-0000-0000-0000-00000000000b|1}'), 64)) -> 'rows';
SELECT register_id, value FROM shop.counters ORDER BY register_id;

-- The inbox is filed again when its retry comes, or everything after a
-- deploy; the newest upload of a row replaces what was kept of it.
SELECT sync.refile();
SELECT sync.refile(true);
SELECT tries FROM sync.inbox;
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(pg_temp.part('receipts',
    '[{"total_cents": "-6"}]', '{00000000-0000-0000-0000-000000000105}'), 65)) -> 'rows';
SELECT key, tries, row ->> 'total_cents' AS total FROM sync.inbox;
ALTER TABLE shop.receipts DROP CONSTRAINT receipts_total_cents_check;
SELECT sync.refile(true);
SELECT count(*) AS kept FROM sync.inbox;
SELECT total_cents FROM shop.receipts WHERE id = '00000000-0000-0000-0000-000000000105';

-- What the server knows of a sender: each hook must exist, as it is called.
SELECT sync.declare_senders(known => 'shop.no_such_function');
CREATE FUNCTION shop.company_of(register uuid) RETURNS text LANGUAGE sql AS $$
    SELECT company FROM shop.registers WHERE id = register AND active $$;
CREATE FUNCTION shop.filing_as(register uuid, known jsonb) RETURNS void LANGUAGE sql AS $$
    SELECT set_config('shop.company', known #>> '{}', true) $$;
CREATE FUNCTION shop.stamp(register uuid, known jsonb, table_name text, uploaded jsonb) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT CASE WHEN table_name = 'receipts'
                THEN uploaded || jsonb_build_object('company', current_setting('shop.company') || '/' || (known #>> '{}'))
                ELSE uploaded END $$;
SELECT sync.declare_senders(known => 'shop.company_of', filing => 'shop.filing_as(uuid, jsonb)',
                            place => 'shop.stamp(uuid,jsonb,text,jsonb)');
SELECT sync.declare_senders(place => 'shop.company_of');
SELECT sync.receive('00000000-0000-0000-0000-00000000000b', pg_temp.up(pg_temp.part('receipts',
    '[{"total_cents": "42"}]', '{00000000-0000-0000-0000-000000000201}'), 66)) -> 'rows';
SELECT register_id, company FROM shop.receipts WHERE id = '00000000-0000-0000-0000-000000000201';
-- A sender the known function answers nothing for is dropped.
UPDATE shop.registers SET active = false WHERE id = '00000000-0000-0000-0000-00000000000b';
SELECT sync.receive('00000000-0000-0000-0000-00000000000b', pg_temp.up(pg_temp.part('receipts',
    '[{"total_cents": "43"}]', '{00000000-0000-0000-0000-000000000202}'), 67));
-- A place function that fails on a row keeps that row.
CREATE OR REPLACE FUNCTION shop.stamp(register uuid, known jsonb, table_name text, uploaded jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    IF uploaded ->> 'total_cents' = '13' THEN RAISE EXCEPTION 'unlucky'; END IF;
    RETURN uploaded;
END $$;
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(pg_temp.part('receipts',
    '[{"total_cents": "12"}, {"total_cents": "13"}]',
    '{00000000-0000-0000-0000-000000000301,00000000-0000-0000-0000-000000000302}'), 68)) -> 'rows';

-- A filing hook that takes a role: the sender's rows are written as that
-- role (here one that may only read receipts: the row is kept), the
-- engine's own bookkeeping as the extension's owner.
CREATE ROLE filing_clerk;
GRANT USAGE ON SCHEMA shop TO filing_clerk;
GRANT SELECT ON shop.receipts TO filing_clerk;
CREATE FUNCTION shop.file_as_clerk(register uuid, known jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL ROLE filing_clerk;
END $$;
SELECT sync.declare_senders(filing => 'shop.file_as_clerk');
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', pg_temp.up(pg_temp.part('receipts',
    '[{"total_cents": "14"}]', '{00000000-0000-0000-0000-000000000401}'), 69)) -> 'rows';
SELECT current_user;
GRANT INSERT ON shop.receipts TO filing_clerk;
SELECT sync.refile(true);
SELECT count(*) FROM shop.receipts WHERE id = '00000000-0000-0000-0000-000000000401';
SELECT sync.declare_senders();

-- A replica provisioned later than it asked is provisioned once its time
-- has come (a relay asks sync_internal.provision_due() before a pass).
INSERT INTO sync.replicas (id, live, provision, provision_at)
VALUES ('00000000-0000-0000-0000-00000000000a', true, false, now() - interval '1 second');
SELECT sync_internal.provision_due();
SELECT provision, provision_at, said_times FROM sync.replicas;

-- Leave the database as it was found.
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
DROP ROLE filing_clerk;
