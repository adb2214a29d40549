-- Version 1: what a replica needs to follow the server's messages.
-- Once released, a step is never edited: a later version adds a step.

-- The replica's place in the server's chain of messages: one row.
CREATE TABLE sync_state (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    -- The last message applied, exactly as it carried these ('' and 0:
    -- nothing applied yet).
    epoch          TEXT    NOT NULL DEFAULT '',
    sequence       INTEGER NOT NULL DEFAULT 0,
    nonce          INTEGER NOT NULL DEFAULT 0,
    mac            BLOB    NOT NULL DEFAULT x'',
    -- The snapshot in progress ('' for none), and the sequence of the
    -- message that began it.
    snapshot       TEXT    NOT NULL DEFAULT '',
    snapshot_began INTEGER NOT NULL DEFAULT 0,
    -- The sequence of the newest message the replica could not follow; 0
    -- while it has no gap.
    gap            INTEGER NOT NULL DEFAULT 0,
    -- Bumped whenever the replica has something new to tell the server of
    -- where it stands (it applied, was sent one again, or its gap grew).
    news           INTEGER NOT NULL DEFAULT 0,
    -- The news the last Up the transport took carried: while it is below
    -- news, there is something to say.
    said           INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sync_state (id) VALUES (1);

-- The key of every row the snapshot in progress named, per table: its end
-- lets go of every other.
CREATE TABLE sync_snapshot_keys (
    table_name TEXT NOT NULL,
    key        TEXT NOT NULL,
    PRIMARY KEY (table_name, key)
) WITHOUT ROWID;

-- Rows the replica could not take or let go of, kept until it takes the
-- row or lets go of it. AUTOINCREMENT: an id is never used twice, so an
-- Up names exactly the rejections it carried.
CREATE TABLE sync_rejections (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    -- The message that carried the row, or its delete.
    epoch      TEXT    NOT NULL,
    sequence   INTEGER NOT NULL,
    held_back  INTEGER NOT NULL DEFAULT 0,
    -- Whether the replica holds a copy of the row: one it does not hold
    -- leaves nothing out of a digest, and is forgotten once reported.
    holds_copy INTEGER NOT NULL,
    -- Whether an Up the transport took carried it.
    reported   INTEGER NOT NULL DEFAULT 0,
    UNIQUE (table_name, key)
);
