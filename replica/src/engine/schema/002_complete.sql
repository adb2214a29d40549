-- Version 2: what a replica needs to send its own writes up, retire rows,
-- and be read back by tools. Once released, a step is never edited.

-- The replica's own id (canonical text; '' until a program opened it
-- knowing it): the triggers refuse nothing until it is set. `writing` is 1
-- only inside a transaction of the engine's own, so the triggers tell its
-- writes from the device program's.
ALTER TABLE sync_state ADD COLUMN me TEXT NOT NULL DEFAULT '';
ALTER TABLE sync_state ADD COLUMN writing INTEGER NOT NULL DEFAULT 0;
-- When digests were last said (Unix seconds), and the backlog last said
-- (its JSON, when, and to which epoch).
ALTER TABLE sync_state ADD COLUMN digests_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sync_state ADD COLUMN backlog_said TEXT NOT NULL DEFAULT '';
ALTER TABLE sync_state ADD COLUMN backlog_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sync_state ADD COLUMN backlog_epoch TEXT NOT NULL DEFAULT '';
-- Whether a retired row may be held somewhere: the pass that lets them
-- go runs only then.
ALTER TABLE sync_state ADD COLUMN retired_rows INTEGER NOT NULL DEFAULT 0;

-- The declarations the database was installed (and last opened) with, so
-- that tools can open it without the device program's code.
CREATE TABLE sync_declarations (
    position    INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    declaration TEXT NOT NULL,
    lane        TEXT NOT NULL DEFAULT ''
);

-- One note per row of a table that goes up, written by the triggers in the
-- writing transaction. `writes` counts the writes; a send stamps `upload`
-- (its number) and `sent_writes`; Filed forgets a note whose latest send
-- carried that number and that was not written since.
CREATE TABLE sync_notes (
    id          INTEGER PRIMARY KEY,
    table_name  TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    writes      INTEGER NOT NULL DEFAULT 1,
    -- 1 while the row (as it is now) still has to go up.
    pending     INTEGER NOT NULL DEFAULT 1,
    upload      INTEGER,
    sent_writes INTEGER NOT NULL DEFAULT 0,
    -- Noted again as a snapshot began: goes up re-stated until filed.
    restated    INTEGER NOT NULL DEFAULT 0,
    -- Why this build can never send it; NULL for a row that can go.
    set_aside   TEXT,
    UNIQUE (table_name, key)
);
CREATE INDEX sync_notes_pending ON sync_notes (table_name, id)
    WHERE pending = 1 AND set_aside IS NULL;
CREATE INDEX sync_notes_upload ON sync_notes (upload) WHERE upload IS NOT NULL;

-- The sends that carried notes: whether the transport took each, and when.
CREATE TABLE sync_uploads (
    number   INTEGER PRIMARY KEY,
    lane     TEXT    NOT NULL,
    taken    INTEGER NOT NULL DEFAULT 0,
    taken_at INTEGER NOT NULL DEFAULT 0
);

-- A lane whose transport refused an Up for good: what is still suspected
-- (JSON), and whether the transport took another message meanwhile.
CREATE TABLE sync_narrowing (
    lane       TEXT PRIMARY KEY,
    suspects   TEXT    NOT NULL,
    took_other INTEGER NOT NULL DEFAULT 0,
    stuck      INTEGER NOT NULL DEFAULT 0
);

-- Rows of two-way tables retired (not deleted) because their edit was not
-- filed yet, with the message that let go of them.
CREATE TABLE sync_retired_for_edits (
    table_name TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    epoch      TEXT    NOT NULL,
    sequence   INTEGER NOT NULL,
    PRIMARY KEY (table_name, key)
) WITHOUT ROWID;
