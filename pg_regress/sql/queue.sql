-- A relay pass and the default transport: the queue each replica takes its
-- messages from, one at a time, until it acknowledges them.
CREATE EXTENSION magic_sync;
CREATE SCHEMA shop;
CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL, price_cents bigint NOT NULL);
SELECT sync.declare_replicas('shop.registers', live => 'active');
SELECT sync.declare_table('shop.products', sync => 'broadcast');
INSERT INTO shop.products VALUES
    ('00000000-0000-0000-0000-000000000001', 'Tea', 250),
    ('00000000-0000-0000-0000-000000000002', 'Coffee', 300);

-- No replica yet: the notes are done, and nothing is sent.
CALL sync.relay();
SELECT count(*) AS waiting FROM sync.outbox;

-- A register becomes live: a snapshot, then its end.
INSERT INTO shop.registers VALUES ('00000000-0000-0000-0000-00000000000a');
CALL sync.relay();
SELECT kind, length(head) > 0 AS has_head FROM sync.outbox ORDER BY position;
SELECT table_name, key, sent > 0 AS sent, leaving FROM sync.held ORDER BY key;

-- The queue hands out its head until it is acknowledged by its id.
SELECT (SELECT id FROM sync.next('00000000-0000-0000-0000-00000000000a'))
     = (SELECT id FROM sync.next('00000000-0000-0000-0000-00000000000a')) AS same_head;
SELECT sync.ack('00000000-0000-0000-0000-00000000000a', 'no such message');
-- Acknowledging the head and taking the next in one call answers the
-- message after it, which is now the head.
SELECT id AS head FROM sync.next('00000000-0000-0000-0000-00000000000a') \gset
SELECT id = (SELECT o.id FROM sync.outbox o WHERE o.kind = 'end') AS answers_the_end,
       length(message) > 0 AS with_its_bytes
FROM sync.ack_next('00000000-0000-0000-0000-00000000000a', :'head');
SELECT kind FROM sync.outbox ORDER BY position;
SELECT sync.ack('00000000-0000-0000-0000-00000000000a',
                (SELECT id FROM sync.next('00000000-0000-0000-0000-00000000000a')));
SELECT kind FROM sync.outbox ORDER BY position;
-- With nothing after the last, no row answers.
SELECT count(*) AS after_the_last
FROM sync.ack_next('00000000-0000-0000-0000-00000000000a', 'no such message');

-- A register with nothing waiting gets no row.
SELECT count(*) FROM sync.next('00000000-0000-0000-0000-0000000000ff');

-- Bytes that are no Up are refused.
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', '\xdeadbeef');
-- An Up of protocol 0 is dropped as malformed; one from a stranger too.
SELECT sync.receive('00000000-0000-0000-0000-00000000000a', '\x');
SELECT sync.receive('00000000-0000-0000-0000-0000000000ff', '\x0801');

-- A relay pass must be called outside a transaction block. (Where in the
-- procedure it stops is no part of the answer.)
\set SHOW_CONTEXT never
BEGIN;
CALL sync.relay();
ROLLBACK;
\set SHOW_CONTEXT errors

-- Leave the database as it was found.
DROP SCHEMA shop CASCADE;
DROP EXTENSION magic_sync;
