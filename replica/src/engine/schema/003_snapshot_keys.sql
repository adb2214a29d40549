-- Version 3: the keys a snapshot named, kept one row per part of each of
-- its messages rather than one row per key (a row per key cost more than
-- the row itself). Once released, a step is never edited.

-- Per part of a message of the snapshot in progress, in the order applied
-- (`id`): the keys its deletes let go of, then the keys of its rows, each
-- list in the key text form, one key a line. A key's last word stands; the
-- snapshot's end reads them back in order and lets go of every row of the
-- tables it covered that they do not name.
CREATE TABLE sync_snapshot_parts (
    id         INTEGER PRIMARY KEY,
    table_name TEXT NOT NULL,
    let_go     TEXT NOT NULL DEFAULT '',
    named      TEXT NOT NULL DEFAULT ''
);
INSERT INTO sync_snapshot_parts (table_name, named)
    SELECT table_name, group_concat(key, char(10)) FROM sync_snapshot_keys
    GROUP BY table_name;
DROP TABLE sync_snapshot_keys;
ALTER TABLE sync_snapshot_parts RENAME TO sync_snapshot_keys;
