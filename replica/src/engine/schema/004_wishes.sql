-- Version 4: the server's wishes of the replica's settings (protocol 4.5).
-- Once released, a step is never edited.

-- One row per wish the replica holds, keyed by the wish's id (a UUID, as
-- text), rows travelling as the Wish message. A table written on both
-- sides: the server writes what is wished (table_name to note), the
-- replica its answer (answered to answered_at), which no message
-- overwrites. A wish is answered while `answered` is its `version`.
-- The engine holds it as a table only when a setting is declared; a
-- replica with none rejects its rows as a table it does not know.
CREATE TABLE IF NOT EXISTS sync_wishes (
    id          TEXT    PRIMARY KEY,
    -- The setting's table, and the row's key in it (key text form).
    table_name  TEXT    NOT NULL DEFAULT '',
    key         TEXT    NOT NULL DEFAULT '',
    -- The row wished, encoded as the setting's rows are.
    wanted      BLOB    NOT NULL DEFAULT x'',
    -- Drawn at random by the server, new for every wish.
    version     INTEGER NOT NULL DEFAULT 0,
    note        TEXT    NOT NULL DEFAULT '',
    -- The replica's answer: the version it answers (0 for none),
    -- applied, refused, superseded or waiting, why, and when (RFC 3339).
    answered    INTEGER NOT NULL DEFAULT 0,
    outcome     TEXT    NOT NULL DEFAULT '',
    reason      TEXT    NOT NULL DEFAULT '',
    answered_at TEXT    NOT NULL DEFAULT '',
    -- Set when the server let go of a wish whose answer is not filed yet:
    -- the answer still goes up, and the row goes once it is filed.
    retired_at  TEXT
);
