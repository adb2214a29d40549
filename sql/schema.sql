-- magic_sync's own tables, in schema sync (created by CREATE EXTENSION).
--
-- Released schema is never edited: a later version changes it in
-- sql/magic_sync--A--B.sql. Every table here holds state that must survive a
-- dump and restore, so each is marked for pg_dump at the end of this file.

-- Every insert, update and delete of a declared table, noted by its
-- triggers in the writing transaction, and deleted by the relay pass that
-- plans it. A note says only that a row changed: what is sent is always the
-- row as it is when the relay reads it.
CREATE SEQUENCE sync.note_ids;
CREATE TABLE sync.notes (
    id            bigint NOT NULL DEFAULT nextval('sync.note_ids'),
    -- Names and keys compare byte for byte ("C"): the key text form is
    -- ASCII, and byte order is the cheapest.
    table_name    text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    noted_at      timestamptz NOT NULL DEFAULT now()
);
-- No index: every write of a declared table inserts a note, and an index
-- would cost each of them more than the note itself. The relay reads every
-- note there is (never "after the last one read": ids are drawn before
-- commit, so a lower one can commit later), and deletes what it planned.
--
-- VACUUM leaves the emptied pages in place for the next notes: cutting them
-- off takes an ACCESS EXCLUSIVE lock that would stall every writer of a
-- declared table, and the table would grow back, page by page, at the
-- writers' cost. After a burst, `VACUUM (TRUNCATE) sync.notes` gives the
-- space back.
ALTER TABLE sync.notes SET (vacuum_truncate = off);

-- The server installation's epochs. Messages are sealed under the current
-- one's secret; a new epoch begins when the database is found to have gone
-- back (restored from an older copy).
CREATE TABLE sync.epochs (
    id            uuid PRIMARY KEY,
    secret        bytea NOT NULL CHECK (length(secret) = 32),
    current       boolean NOT NULL DEFAULT true,
    began_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX epochs_one_current ON sync.epochs (current) WHERE current;

-- The relay's own state: one row (written by the first pass), updated by
-- every pass, which is how a pass knows no other committed after its
-- snapshot began.
CREATE TABLE sync.relay_state (
    only_one      boolean PRIMARY KEY DEFAULT true CHECK (only_one),
    passes        bigint NOT NULL DEFAULT 0,
    last_pass_at  timestamptz,
    -- The digest of the declarations the last pass ran with: when they
    -- change, every live replica is provisioned again.
    declared      text
);

-- Every replica the relay has seen, and where its chain of messages stands.
CREATE TABLE sync.replicas (
    id                uuid PRIMARY KEY,
    live              boolean NOT NULL,
    -- Its partition, as text, when the replicas are partitioned: no row
    -- crosses from one to another.
    partition         text,
    -- Provision it from scratch at the next pass.
    provision         boolean NOT NULL DEFAULT true,
    -- The epoch its messages are numbered in, and the last one written for
    -- it: the next message names it as its previous.
    epoch             uuid,
    last_sequence     bigint NOT NULL DEFAULT 0,
    last_nonce        bigint NOT NULL DEFAULT 0,
    -- The snapshot last begun for it, and the sequence it began at.
    snapshot_id       uuid,
    snapshot_sequence bigint,
    -- The last message it said it applied, under a seal the server made.
    applied_epoch     uuid,
    applied_sequence  bigint NOT NULL DEFAULT 0,
    applied_nonce     bigint NOT NULL DEFAULT 0,
    applied_at        timestamptz,
    -- The newest message it said it could not follow, while it has a gap.
    gap               bigint NOT NULL DEFAULT 0,
    heard_at          timestamptz,
    seen_at           timestamptz NOT NULL DEFAULT now()
);

-- What each replica holds, or has on its way: one row per row sent it.
-- A row counts as held once the replica said it applied the message that
-- carried it (sent <= replicas.applied_sequence).
--
-- The engine's own bookkeeping tables carry no foreign keys: they are
-- written a row per row sent, and the relay deletes what it forgets itself.
CREATE TABLE sync.held (
    replica       uuid NOT NULL,
    table_name    text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    -- The newest note of the row the recording pass saw (0: none): a later
    -- note is a change this replica lacks.
    note          bigint NOT NULL,
    -- The message that carried this version of the row.
    sent          bigint NOT NULL,
    -- The message that takes it back; the row is gone from here once the
    -- replica applied it.
    leaving       bigint,
    PRIMARY KEY (replica, table_name, key)
);

-- Rows no replica can be sent as they are (no message could carry one),
-- and so planned around: not sent, nor what points at them, and taken back
-- where an older version is held. A row leaves when it changes, when its
-- retry comes (magic_sync.retry_every, or sync.retry() after a deploy), or
-- at the first pass of a relay that starts.
CREATE TABLE sync.quarantine (
    table_name    text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    -- The row's newest note when it was set aside: a newer one is a change
    -- that may let it through.
    note          bigint NOT NULL,
    reason        text NOT NULL,
    since         timestamptz NOT NULL DEFAULT now(),
    retry_at      timestamptz NOT NULL,
    PRIMARY KEY (table_name, key)
);

-- Message numbers: one sequence for every replica, so no two messages ever
-- share a number, and a restored database never numbers backwards.
CREATE SEQUENCE sync.message_numbers;

-- What messages carry, stored once however many replicas' messages carry it.
CREATE TABLE sync.bodies (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    bytes         bytea NOT NULL
);
-- Bodies are rows as JSON, which compresses to about half: with lz4 that
-- costs less than writing (and logging) the other half. A server built
-- without lz4 stores them as they are: pglz would cost more than it saves.
DO $$
BEGIN
    ALTER TABLE sync.bodies ALTER COLUMN bytes SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    ALTER TABLE sync.bodies ALTER COLUMN bytes SET STORAGE EXTERNAL;
END
$$;

-- The messages recorded for each replica and not yet taken by the
-- transport, in order. With the default transport this is the queue itself:
-- sync.next() hands out the head, sync.ack() removes it.
CREATE TABLE sync.outbox (
    replica       uuid NOT NULL,
    -- The order messages go in: the message's sequence for a Down or an
    -- EndSnapshot.
    position      bigint NOT NULL,
    -- The transport's name for it: {epoch}-{sequence}-{nonce}.
    id            text NOT NULL,
    -- 'down', 'end' (EndSnapshot) or 'filed'.
    kind          text NOT NULL CHECK (kind IN ('down', 'end', 'filed')),
    -- The replica's own fields of the message, encoded; the body follows.
    head          bytea NOT NULL,
    body          bigint,
    written_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (replica, position),
    UNIQUE (replica, id)
);
CREATE INDEX outbox_by_body ON sync.outbox (body);

SELECT pg_catalog.pg_extension_config_dump('sync.note_ids', '');
SELECT pg_catalog.pg_extension_config_dump('sync.notes', '');
SELECT pg_catalog.pg_extension_config_dump('sync.quarantine', '');
SELECT pg_catalog.pg_extension_config_dump('sync.epochs', '');
SELECT pg_catalog.pg_extension_config_dump('sync.relay_state', '');
SELECT pg_catalog.pg_extension_config_dump('sync.replicas', '');
SELECT pg_catalog.pg_extension_config_dump('sync.held', '');
SELECT pg_catalog.pg_extension_config_dump('sync.message_numbers', '');
SELECT pg_catalog.pg_extension_config_dump('sync.bodies', '');
SELECT pg_catalog.pg_extension_config_dump('sync.outbox', '');
