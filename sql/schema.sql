-- magic_sync's own tables, in schema sync (created by CREATE EXTENSION).
-- Every table, sequence and index of the engine is defined here, whole; the
-- other files of sql/ hold only functions and procedures.
--
-- Released schema is never edited: a later version changes it in
-- sql/magic_sync--A--B.sql. Every table here holds state that must survive a
-- dump and restore, so each is marked for pg_dump at the end of this file,
-- but sync.held_counts: it is worked out again from sync.held_recorded as a
-- restore copies it in (its triggers count each row copied).

-- The engine's own functions, which only the engine calls (the relay, the
-- filing of an Up, declaring), are in schema sync_internal, out of the way
-- of what users call in sync. No one else is given them: PUBLIC has no
-- USAGE on the schema, and no EXECUTE on any of its functions
-- (sql/privileges.sql revokes it once every function exists).
CREATE SCHEMA sync_internal;
REVOKE ALL ON SCHEMA sync_internal FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- The declarations: where the replicas are, and which tables travel and
-- how. Written by sync.declare_replicas() and sync.declare_table()
-- (pg_magic_sync/src/declare/), read and written through one mapping
-- (pg_magic_sync/src/catalog/store.rs, with the queries of sql/catalog/).
--
-- Each declaration keeps the options as they were given (request), and
-- what they resolved to against the database: every declaration is
-- resolved again whenever one is made, and the relay's check resolves them
-- again to find what changed since.

-- Where the replicas are: sync.declare_replicas().
CREATE TABLE sync.replica_source (
    only_one      boolean PRIMARY KEY DEFAULT true CHECK (only_one),
    -- The replicas' table or view, schema-qualified and quoted.
    relation      text NOT NULL,
    -- Its column of replica ids (uuid).
    id_column     text NOT NULL,
    -- The SQL condition a replica that should receive anything meets.
    live          text NOT NULL,
    -- The column that splits replicas and rows into partitions no row
    -- crosses; NULL: one partition.
    partition_column text,
    declared_at   timestamptz NOT NULL DEFAULT now()
);

-- The declared tables: sync.declare_table().
CREATE TABLE sync.tables (
    -- The name replicas know the table by.
    name          text PRIMARY KEY,
    -- The table, schema-qualified and quoted.
    relation      text NOT NULL UNIQUE,
    mirror        text NOT NULL CHECK (mirror IN ('catalog', 'record', 'both', 'setting')),
    -- Which replicas hold its rows for their own sake.
    rule          text NOT NULL CHECK (rule IN ('none', 'broadcast', 'assigned', 'follows', 'grouped')),
    -- assigned: its column of replica ids; follows: the columns of the
    -- foreign key it follows. The groups of a grouped table: sync.groups.
    rule_columns  text[] NOT NULL DEFAULT '{}',
    -- The key, in the declaration's order.
    key_columns   text[] NOT NULL,
    -- Each key column's type in the key text form: 'uuid' or 'integer'.
    key_types     text[] NOT NULL,
    -- The columns that travel, and their types as format_type writes them.
    columns       text[] NOT NULL,
    column_types  text[] NOT NULL,
    -- The partition column it carries, when the replicas are partitioned.
    partition_column text,
    -- The column of the replica a row belongs to (uuid).
    origin        text,
    -- The column that orders a record's or a setting's versions.
    version       text,
    -- A record's column written once.
    created       text,
    -- A setting's columns the server may wish other values.
    desired       text[] NOT NULL DEFAULT '{}',
    -- A setting's way with wishes.
    apply         text CHECK (apply IN ('always', 'if_unchanged')),
    -- A table written on both sides: the columns replicas own.
    replica_owned text[] NOT NULL DEFAULT '{}',
    -- Columns that do not travel.
    unmirrored    text[] NOT NULL DEFAULT '{}',
    -- The view of the rows that travel for their own sake, quoted.
    active        text,
    -- Whether the engine writes the table's triggers, and its indexes.
    install       boolean NOT NULL DEFAULT true,
    indexes       boolean NOT NULL DEFAULT true,
    -- Every column of the table as declared, with its type and whether it
    -- is NOT NULL: what the relay's check holds the table against.
    table_columns text[] NOT NULL,
    table_types   text[] NOT NULL,
    table_not_null boolean[] NOT NULL,
    -- Parents before children: the order tables are sent in.
    position      integer NOT NULL,
    -- The options as they were given, to resolve them again.
    request       jsonb NOT NULL,
    declared_at   timestamptz NOT NULL DEFAULT now()
);

-- The foreign keys between declared tables: a row travels with every row
-- it points at.
CREATE TABLE sync.table_references (
    table_name    text NOT NULL,
    -- Its place among the table's references (by constraint name): the
    -- order of a note's parents_before.
    position      integer NOT NULL,
    constraint_name text NOT NULL,
    -- The child's columns that hold the parent's key, in the parent's key
    -- order (the partition column both share left out, unless the
    -- parent's key holds it).
    columns       text[] NOT NULL,
    -- The parent, as replicas know it, and its key.
    parent        text NOT NULL,
    parent_columns text[] NOT NULL,
    parent_key_types text[] NOT NULL,
    PRIMARY KEY (table_name, position)
);

-- The groups of a grouped table: its members (rows in groups), and the
-- groups given to replicas.
CREATE TABLE sync.groups (
    table_name    text PRIMARY KEY,
    -- The table of groups both point at, quoted.
    groups        text NOT NULL,
    -- The members: quoted; its columns that hold the grouped row's key (in
    -- key order) and those that name the group.
    members       text NOT NULL,
    member_row    text[] NOT NULL,
    member_group  text[] NOT NULL,
    -- The groups given to replicas: quoted; its columns that name the
    -- group (in member_group's order), and its column of replica ids.
    assigned      text NOT NULL,
    assigned_group text[] NOT NULL,
    assigned_replica text NOT NULL
);

-- ---------------------------------------------------------------------------
-- Notes.

-- Every insert, update and delete of a declared table, noted by its
-- triggers in the writing transaction, and deleted by the relay pass that
-- plans it. A note says only that a row changed: what is sent is always the
-- row as it is when the relay reads it.
--
-- The note triggers (pg_magic_sync/src/note/) form the row themselves,
-- finding the columns of sync.notes and sync.group_notes by name: a column
-- they do not fill sends them to an INSERT through SPI, which costs every
-- note more.
CREATE SEQUENCE sync.note_ids;
CREATE TABLE sync.notes (
    id            bigint NOT NULL DEFAULT nextval('sync.note_ids'),
    -- Names and keys compare byte for byte ("C"): the key text form is
    -- ASCII, and byte order is the cheapest.
    table_name    text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    noted_at      timestamptz NOT NULL DEFAULT now(),
    -- What a note says beyond the table and the key: the partition the row
    -- was in when it changed, and, for a row that points at other declared
    -- tables, the keys of the parents it pointed at before the change, one
    -- per reference in the order of sync.table_references.position (NULL
    -- where it pointed at none): a parent it no longer points at can then be
    -- let go.
    partition     text,
    parents_before text[]
);
-- The relay reads every note there is (never "after the last one read":
-- ids are drawn before commit, so a lower one can commit later), oldest
-- first up to a batch, and deletes what it planned.
--
-- Two indexes, each paid by every write of a declared table, so that a pass
-- costs its batch, not the backlog (without them, draining a million notes
-- in batches read the whole table several times a pass: quadratic):
-- - by id: the next batch is the lowest ids, read from the index's start;
-- - by row: a row's newest note, beyond a batch cut short, is one look-up.
--
-- VACUUM leaves the emptied pages in place for the next notes: cutting them
-- off takes an ACCESS EXCLUSIVE lock that would stall every writer of a
-- declared table, and the table would grow back, page by page, at the
-- writers' cost. After a burst, `VACUUM (TRUNCATE) sync.notes` gives the
-- space back.
ALTER TABLE sync.notes SET (vacuum_truncate = off);
CREATE INDEX notes_in_order ON sync.notes (id);
CREATE INDEX notes_of_rows ON sync.notes (table_name, key, id);

-- Changes to groups: a row of a grouped table joining or leaving a group
-- (key set, replica NULL), or a group given to or taken from a replica
-- (replica set, key NULL). Numbered from the same sequence as sync.notes,
-- so the two read together in the order they were written; deleted, like a
-- note, by the relay pass that plans it.
CREATE TABLE sync.group_notes (
    id            bigint PRIMARY KEY DEFAULT nextval('sync.note_ids'),
    -- The grouped table, as replicas know it.
    table_name    text NOT NULL,
    -- The group: its columns' values in the key text form.
    group_key     text NOT NULL,
    -- The grouped row that joined or left the group.
    key           text,
    -- The replica given the group, or from which it was taken.
    replica       uuid,
    noted_at      timestamptz NOT NULL DEFAULT now()
);
-- Emptied pages stay for the next notes, as sync.notes's do.
ALTER TABLE sync.group_notes SET (vacuum_truncate = off);

-- ---------------------------------------------------------------------------
-- The relay.

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
    -- change, every live replica is provisioned again, unless the change
    -- is only tables declared for the first time (relay/redeclared.rs).
    declared      text,
    -- The same in parts, {"replicas": digest, "tables": {name: digest}}:
    -- how a pass tells tables declared for the first time from a change.
    declared_parts jsonb
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
    -- When a message was last written for it: one that leaves what it was
    -- sent unconfirmed for magic_sync.unconfirmed_after since is
    -- provisioned again (sync_internal.outbox_checks()).
    written_at        timestamptz,
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
    seen_at           timestamptz NOT NULL DEFAULT now(),
    -- What it says of itself (protocol A.2, A.5). A replica provisioned
    -- again for that (a gap, a message older than the last it applied, an
    -- epoch this database never had) is so at most once a minute, twice as
    -- long between each time while it keeps saying so, up to 32 minutes; 64
    -- quiet minutes start over. One that says it sooner is noted for then:
    -- the relay provisions it once provision_at has come
    -- (sync_internal.provision_due()).
    provision_at      timestamptz,
    said_times        integer NOT NULL DEFAULT 0,
    said_at           timestamptz,
    said_provisioned_at timestamptz,
    -- Digests are compared at most every ten minutes; a mismatch provisions
    -- the replica again, and one within a day of that is logged, not acted
    -- on.
    digests_at        timestamptz,
    digests_provisioned_at timestamptz,
    -- A stall: messages wait for it and its applied position has not moved
    -- for magic_sync.stalled_after (sql/stalls.sql). The steps the worker
    -- took with it, and when the last was: they count for the stall only
    -- while it has not moved since.
    stall_heals       integer NOT NULL DEFAULT 0,
    stall_healed_at   timestamptz,
    -- Provision it again at the next pass for these tables only (a
    -- declaration change of their key or relation: relay/redeclared.rs):
    -- a snapshot naming them, and of every other table only what differs
    -- from what it is recorded holding. Provisioning it whole (provision)
    -- takes precedence.
    provision_only    text[]
);

-- What each replica holds, or has on its way, as the engine records it: one
-- row per row sent it, but for the tables a stand-in journals (below),
-- whose rows are recorded once, as the stand-in's. Read through the view
-- sync.held, which shows each replica what it holds. A row counts as held
-- once the replica said it applied the message that carried it
-- (sent <= replicas.applied_sequence).
--
-- The engine's own bookkeeping tables carry no foreign keys: they are
-- written a row per row sent, and the relay deletes what it forgets itself.
CREATE TABLE sync.held_recorded (
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
    -- A row a replica refused (a rejection of the last message that carried
    -- it, or of its delete: protocol A.4) stays here: it is still held for
    -- every decision that takes rows back, and not for progress or digests.
    -- It is sent again when its retry comes (retry_at) or when a relay
    -- starts, and the refusal is taken once the replica applies a later
    -- message that carries it.
    refused       text,
    -- The message the replica refused it in: a later one that carries the
    -- row and is applied takes the refusal.
    refused_by    bigint,
    refused_at    timestamptz,
    -- A row of the replica's own it held back (nothing is at fault: no
    -- alarm).
    held_back     boolean NOT NULL DEFAULT false,
    -- When the relay sends it (or its delete) again.
    retry_at      timestamptz,
    PRIMARY KEY (replica, table_name, key)
-- Most writes of sync.held_recorded are a pass updating rows it sent before (a new
-- note, a new message): room left on each page lets them be heap-only
-- updates, which touch no index (an upsert of 13,000 rows took 0.11 s
-- rather than 0.3-0.4 s on 1,000,000 rows).
) WITH (fillfactor = 70);
-- Every replica's row of a key, side by side: a pass asks what each replica
-- holds of the rows that changed, a row at a time rather than a pair at a
-- time (13,000 pairs, 10 replicas: 26 ms rather than 150 ms). Small: the
-- replicas of a key share one entry.
CREATE INDEX held_rows ON sync.held_recorded (table_name, key);
CREATE INDEX held_refused ON sync.held_recorded (retry_at) WHERE refused IS NOT NULL;
-- What a replica is letting go of: every report of what it applied deletes
-- those it applied the take-back of. Without it each report read all the
-- replica's rows (167 ms a report with 100,000 of them, most of the CPU at
-- 500 changes a second); few rows are leaving at once, so it costs little.
CREATE INDEX held_leaving ON sync.held_recorded (replica, leaving) WHERE leaving IS NOT NULL;

-- What a replica far behind is owed (magic_sync.messages_ahead): while
-- that many of its messages wait in its outbox, passes plan nothing for it
-- and note here each row whose reasons to be held may have changed, with
-- the newest note of it seen (0: none). The pass after it takes its
-- messages plans these rows for it in one go, each once, as they are then
-- (relay/plan/behind.rs). A replica provisioned, or gone, owes nothing.
CREATE TABLE sync.owed (
    replica       uuid NOT NULL,
    table_name    text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    note          bigint NOT NULL,
    PRIMARY KEY (replica, table_name, key)
);

-- The journal of broadcast tables (docs/src/decisions.md, "The journal for
-- broadcast tables"). A table declared broadcast that goes down only,
-- points at nothing and is pointed at by nothing is journaled: replicas of
-- one partition hold the same rows of it, so the relay plans and records
-- them once, for a stand-in of that partition, and the replicas that
-- follow it are sent the stand-in's messages under their own heads.
--
-- A stand-in: planned as a replica kept up to date, of journaled tables
-- only; its rows of sync.held_recorded are the journal. Its messages are
-- numbered as every replica's are, and written to no outbox.
CREATE TABLE sync.stand_ins (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    partition     text UNIQUE NULLS NOT DISTINCT,
    -- Provisioned (its journal made from scratch) at the next pass.
    provision     boolean NOT NULL DEFAULT true,
    epoch         uuid,
    last_sequence bigint NOT NULL DEFAULT 0,
    last_nonce    bigint NOT NULL DEFAULT 0
);

-- A replica that holds exactly its stand-in's rows of every journaled
-- table, and none of its own: each pass it is sent the stand-in's
-- messages. It began following with its message `since_sequence`, which
-- carried (or came after) every stand-in message up to `since`.
-- While it is far behind (relay/plan/behind.rs) it is sent none of them:
-- `behind_since` is the last it was sent, and each one after is mapped
-- to its next message, which carries what they changed once it catches up.
CREATE TABLE sync.followers (
    replica        uuid PRIMARY KEY,
    stand_in       uuid NOT NULL,
    since          bigint NOT NULL,
    since_sequence bigint NOT NULL,
    behind_since   bigint
);
CREATE INDEX followers_of ON sync.followers (stand_in);

-- Which of a follower's messages carried a stand-in message, kept until
-- the follower says it applied it: a stand-in's row a follower holds was
-- sent it in its message here, or is applied.
CREATE TABLE sync.follower_messages (
    replica            uuid NOT NULL,
    stand_in_sequence  bigint NOT NULL,
    sequence           bigint NOT NULL,
    PRIMARY KEY (replica, stand_in_sequence)
);
CREATE INDEX follower_messages_sent ON sync.follower_messages (stand_in_sequence);

-- What each replica holds, or has on its way: its own rows, and a
-- follower's stand-in's rows as its own, under its message numbers. A
-- stand-in row a follower was sent before it began following counts as
-- sent in its message since_sequence, one whose message it applied as
-- well (both are applied once since_sequence is); a row leaving is shown
-- while the follower has not applied the message that takes it back.
CREATE VIEW sync.held AS
    SELECT h.replica, h.table_name, h.key, h.note, h.sent, h.leaving, h.refused,
           h.refused_by, h.refused_at, h.held_back, h.retry_at
    FROM sync.held_recorded h
    WHERE NOT EXISTS (SELECT 1 FROM sync.stand_ins s WHERE s.id = h.replica)
    UNION ALL
    SELECT f.replica, h.table_name, h.key, h.note,
           coalesce(m.sequence, f.since_sequence), l.sequence, NULL::text,
           NULL::bigint, NULL::timestamptz, false, NULL::timestamptz
    FROM sync.followers f
    JOIN sync.held_recorded h ON h.replica = f.stand_in
    LEFT JOIN sync.follower_messages m
      ON m.replica = f.replica AND m.stand_in_sequence = h.sent AND h.sent > f.since
    LEFT JOIN sync.follower_messages l
      ON l.replica = f.replica AND l.stand_in_sequence = h.leaving
    WHERE h.leaving IS NULL OR l.sequence IS NOT NULL;

-- How many rows of sync.held_recorded, not refused, a replica has of a table by the
-- message that sent them and whether they are leaving: what the status
-- reads count as in flight (sync_internal.table_figures), read from a few
-- thousand counts instead of every row sent. Kept by that table's own
-- statement triggers (sql/held_counts.sql), so every writer of it
-- is counted. Append-only: each statement adds its changes as rows of
-- their own (+n, -n), which a reader sums, and which
-- sync_internal.compact_held_counts() folds together every 16th pass; no
-- writer ever waits on another's counter. A folded count of rows that can
-- never be in flight again (sent in a message the replica said it applied,
-- not leaving) is kept at sent 0. Not marked for pg_dump: copying the table
-- in at a restore counts its rows again.
CREATE TABLE sync.held_counts (
    replica       uuid NOT NULL,
    table_name    text COLLATE "C" NOT NULL,
    -- The message that sent them; 0: folded, applied.
    sent          bigint NOT NULL,
    -- Leaving: taken back (held.leaving is set); in flight whatever sent.
    leaving       boolean NOT NULL,
    -- How many more (or fewer) such rows.
    n             bigint NOT NULL
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

-- The messages recorded for each replica and not yet confirmed, in order.
-- With the default transport this is the queue itself: sync.next() hands
-- out the head, sync.ack() removes it. With a transport the relay worker
-- pushes to (nats), a message the transport took stays, published, until
-- the replica applied it (sync_internal.outbox_checks() lets it go then):
-- what a replica away leaves unconfirmed is counted against its bounds
-- whatever the transport.
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
    -- The transport took it (nats); it goes once the replica applied it.
    published     boolean NOT NULL DEFAULT false,
    PRIMARY KEY (replica, position),
    UNIQUE (replica, id)
);
CREATE INDEX outbox_by_body ON sync.outbox (body);

-- ---------------------------------------------------------------------------
-- Sending with a transport the relay worker pushes to (nats): a replica
-- a send failed to, until one gets through (publish/outbox.rs). Its sends
-- wait until retry_at while every other replica's go on.
CREATE TABLE sync.sends (
    replica       uuid PRIMARY KEY,
    -- Failures in a row, and how many of the last ones the transport
    -- refused for good (not the network) the same message.
    failures      integer NOT NULL,
    refusals      integer NOT NULL DEFAULT 0,
    -- The message the last failure was about, and what the transport said.
    message       text NOT NULL,
    last_error    text NOT NULL,
    failed_at     timestamptz NOT NULL DEFAULT now(),
    retry_at      timestamptz NOT NULL
);

-- Filing what replicas send up (pg_magic_sync/src/file/, sql/filing.sql).

-- The last backlog each replica said, with when (an Up without one leaves
-- it standing). A replica is catching up while its backlog is not empty.
CREATE TABLE sync.backlogs (
    replica       uuid PRIMARY KEY,
    -- [{table, unsent, unfiled, set_aside}], as the replica said it.
    tables        jsonb NOT NULL,
    -- Whether every figure of it is 0.
    empty         boolean NOT NULL,
    said_at       timestamptz NOT NULL DEFAULT now()
);

-- The columns each replica's build holds of each table the server sends
-- it, as it last said them (Up.columns, once per open; file/columns.rs).
-- What a replica says the first time is where it starts.
CREATE TABLE sync.replica_columns (
    replica       uuid NOT NULL,
    table_name    text COLLATE "C" NOT NULL,
    columns       text[] NOT NULL,
    said_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (replica, table_name)
);

-- A replica whose build gained columns the server sends of a table: the
-- next pass sends it the rows of that table it holds again, once, and
-- forgets the row here (relay/columns_gained.rs).
CREATE TABLE sync.columns_gained (
    replica       uuid NOT NULL,
    table_name    text COLLATE "C" NOT NULL,
    columns       text[] NOT NULL,
    since         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (replica, table_name)
);

-- How the database differs from the declarations, as the relay's check
-- last found it (pg_magic_sync/src/declare/drift.rs): while a row is here,
-- the relay stops planning the tables it names (or refuses to run at all,
-- for a problem that names none), and the status reads say so. Written
-- when a pass stops tables for it or the worker's pass is refused for it,
-- and when a declaration changes; let go of by a check that finds nothing.
CREATE TABLE sync.drift (
    problem       text PRIMARY KEY,
    -- The statement (or the declaration) that mends it.
    fix           text NOT NULL,
    found_at      timestamptz NOT NULL DEFAULT now(),
    -- The tables it stops: the table concerned and those joined to it by
    -- foreign keys. NULL: it stops the whole relay.
    tables        text[]
);

-- What whoever runs the server must hear of: the database found to have
-- gone back (restored from an older copy), digests that differ again within
-- a day of the provisioning they caused.
CREATE TABLE sync.alarms (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    raised_at     timestamptz NOT NULL DEFAULT now(),
    replica       uuid,
    what          text NOT NULL
);

-- The upload numbers the server answered, of the last hour or so: an Up
-- that comes again carrying one is a redelivery (an at-least-once transport
-- handing it over twice), filed already, not a replica gone back. A
-- replica draws a fresh number for every send, a resend after a restore
-- included, so a number answered is never one of a send still to file.
CREATE TABLE sync.answered (
    replica       uuid NOT NULL,
    number        bigint NOT NULL,
    answered_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (replica, number)
);

-- The inbox: what was uploaded and could not be filed yet (protocol A.3).
-- A row the database refused, a delete it refused, an upload whose filing
-- failed as a whole for a reason a resend cannot cure, or an edit of a
-- two-way row that waits for the replica's provisioning to be confirmed.
-- Each counted as filed in the Filed that answered it. One row per row of
-- a replica: the newest upload of a row replaces what was kept of it, and
-- one filed drops it, so nothing filed later rolls a row back.
CREATE TABLE sync.inbox (
    replica       uuid NOT NULL,
    table_name    text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    -- 'u': a row (of a record or setting, or an edit of a two-way row);
    -- 'd': a delete of a row of the replica's own.
    op            text NOT NULL CHECK (op IN ('u', 'd')),
    -- The row as it came (origin set to the sender), for 'u'.
    row           jsonb,
    -- It came in a re-stated part: filed whatever its version.
    restated      boolean NOT NULL DEFAULT false,
    -- For a delete: the last message the replica had applied when it sent
    -- it, in the epoch of its chain then. A held row a later message
    -- carries stays held (protocol A.3).
    applied_epoch uuid,
    applied_sequence bigint,
    -- Why it waits: the database's refusal, or the provisioning.
    reason        text NOT NULL,
    -- It waits for the replica's provisioning to be confirmed, not for a fix.
    waiting       boolean NOT NULL DEFAULT false,
    kept_at       timestamptz NOT NULL DEFAULT now(),
    tries         integer NOT NULL DEFAULT 1,
    retry_at      timestamptz NOT NULL,
    PRIMARY KEY (replica, table_name, key)
);
CREATE INDEX inbox_due ON sync.inbox (retry_at);

-- ---------------------------------------------------------------------------
-- Wishes (pg_magic_sync/src/wishes/, sql/wishes.sql): what the server wants
-- a row of a setting to hold, and the replica's answer. Replicas know the
-- table as sync_wishes, a table written on both sides: the server owns the
-- wish (id to note), the replica its answer (answered to answered_at). It
-- travels as every row of such a table does (assigned to the replica the
-- setting row belongs to), encoded as the Wish message as it is sent.
-- The wish is kept apart from any encoding: the wished columns, and the
-- version it is based on, as JSON values of the setting's columns.
CREATE TABLE sync.sync_wishes (
    id            uuid PRIMARY KEY,
    -- The replica the setting row belongs to (its origin).
    replica       uuid NOT NULL,
    -- The setting, as replicas know it, and the row's key (section 3's text
    -- form).
    table_name    text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    -- The desired columns wished, {column: value}.
    wanted        jsonb NOT NULL,
    -- Under apply => 'if_unchanged': the version the wish is based on, as
    -- the version column's JSON value; NULL under 'always'.
    based_on      jsonb,
    -- Drawn at random for every wish, a replaced one included.
    version       bigint NOT NULL CHECK (version > 0),
    note          text,
    wished_at     timestamptz NOT NULL DEFAULT now(),
    -- The replica's answer, as it last filed one: the version it answers
    -- (which may be a replaced wish's), what became of it, why, and when.
    answered      bigint,
    outcome       text CHECK (outcome IN ('applied', 'refused', 'superseded', 'waiting')),
    reason        text,
    answered_at   timestamptz,
    -- When the server filed that answer.
    filed_at      timestamptz,
    -- One wish per row of a setting.
    UNIQUE (replica, table_name, key)
);

-- What the server knows of a sender: sync.declare_senders() (sql/filing.sql).
CREATE TABLE sync.senders (
    only_one      boolean PRIMARY KEY DEFAULT true CHECK (only_one),
    -- known(replica uuid) -> anything: what the host knows of the sender
    -- (as jsonb), NULL for a sender it does not know (dropped, logged).
    known         text,
    -- filing(replica uuid, known jsonb): run before the sender's rows are
    -- filed, in the filing transaction (set_config for row policies, SET
    -- LOCAL ROLE).
    filing        text,
    -- place(replica uuid, known jsonb, table_name text, row jsonb) -> jsonb:
    -- each uploaded row as it is to be filed (stamped with a company id).
    place         text,
    declared_at   timestamptz NOT NULL DEFAULT now()
);

SELECT pg_catalog.pg_extension_config_dump('sync.note_ids', '');
SELECT pg_catalog.pg_extension_config_dump('sync.notes', '');
SELECT pg_catalog.pg_extension_config_dump('sync.quarantine', '');
SELECT pg_catalog.pg_extension_config_dump('sync.epochs', '');
SELECT pg_catalog.pg_extension_config_dump('sync.relay_state', '');
SELECT pg_catalog.pg_extension_config_dump('sync.replicas', '');
SELECT pg_catalog.pg_extension_config_dump('sync.held_recorded', '');
SELECT pg_catalog.pg_extension_config_dump('sync.owed', '');
SELECT pg_catalog.pg_extension_config_dump('sync.stand_ins', '');
SELECT pg_catalog.pg_extension_config_dump('sync.followers', '');
SELECT pg_catalog.pg_extension_config_dump('sync.follower_messages', '');
SELECT pg_catalog.pg_extension_config_dump('sync.message_numbers', '');
SELECT pg_catalog.pg_extension_config_dump('sync.bodies', '');
SELECT pg_catalog.pg_extension_config_dump('sync.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('sync.sends', '');
SELECT pg_catalog.pg_extension_config_dump('sync.replica_source', '');
SELECT pg_catalog.pg_extension_config_dump('sync.tables', '');
SELECT pg_catalog.pg_extension_config_dump('sync.table_references', '');
SELECT pg_catalog.pg_extension_config_dump('sync.groups', '');
SELECT pg_catalog.pg_extension_config_dump('sync.group_notes', '');
SELECT pg_catalog.pg_extension_config_dump('sync.backlogs', '');
SELECT pg_catalog.pg_extension_config_dump('sync.alarms', '');
SELECT pg_catalog.pg_extension_config_dump('sync.inbox', '');
SELECT pg_catalog.pg_extension_config_dump('sync.senders', '');
SELECT pg_catalog.pg_extension_config_dump('sync.sync_wishes', '');
SELECT pg_catalog.pg_extension_config_dump('sync.replica_columns', '');
SELECT pg_catalog.pg_extension_config_dump('sync.columns_gained', '');
-- The identity sequences of the tables above: pg_dump dumps an extension's
-- sequence only when it is named here, and a database restored without
-- them numbers new bodies and alarms from 1 again, over the rows restored.
SELECT pg_catalog.pg_extension_config_dump(pg_get_serial_sequence('sync.bodies', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump(pg_get_serial_sequence('sync.alarms', 'id'), '');
