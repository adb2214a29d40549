-- A register's file as release 0.1.0 left it, printed by `sqlite3 FILE .dump`:
-- replica/tests/schema_steps.rs opens it with this build. Made with that
-- release's command line (built from the commit sql/releases.txt names),
-- for the shop of replica/tests/common (me() its id):
--   magic-sync-replica init register.db shop.json 01960000-0000-7000-8000-0000000000aa
--   two products written as the engine writes them (sync_state.writing)
--   two receipts written by the device, then `magic-sync-replica up` (an
--   Up recorded sent, never answered), then a third receipt, not yet sent.
-- Never edited: it is what that release wrote.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE products (id BLOB PRIMARY KEY, name TEXT NOT NULL, price INTEGER CHECK (price >= 0), weight REAL, active BOOLEAN, note TEXT, retired_at TEXT);
INSERT INTO products VALUES(X'01960000000070008000000000000001','tea',3,NULL,NULL,NULL,NULL);
INSERT INTO products VALUES(X'01960000000070008000000000000002','jam',5,NULL,NULL,NULL,NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, product_id BLOB REFERENCES products (id), qty INTEGER);
CREATE TABLE receipts (id TEXT PRIMARY KEY, register_id BLOB, product_id BLOB REFERENCES products (id), total INTEGER);
INSERT INTO receipts VALUES('01960000-0000-7000-8000-000000001001',X'019600000000700080000000000000aa',X'01960000000070008000000000000001',300);
INSERT INTO receipts VALUES('01960000-0000-7000-8000-000000001002',X'019600000000700080000000000000aa',X'01960000000070008000000000000002',500);
INSERT INTO receipts VALUES('01960000-0000-7000-8000-000000001003',X'019600000000700080000000000000aa',X'01960000000070008000000000000001',700);
CREATE TABLE sync_schema (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO sync_schema VALUES(1,4);
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
, me TEXT NOT NULL DEFAULT '', writing INTEGER NOT NULL DEFAULT 0, digests_at INTEGER NOT NULL DEFAULT 0, backlog_said TEXT NOT NULL DEFAULT '', backlog_at INTEGER NOT NULL DEFAULT 0, backlog_epoch TEXT NOT NULL DEFAULT '', retired_rows INTEGER NOT NULL DEFAULT 0);
INSERT INTO sync_state VALUES(1,'',0,0,X'','',0,0,0,0,'01960000-0000-7000-8000-0000000000aa',0,0,'receipts:0:2:0',1796386958,'',0);
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
CREATE TABLE sync_declarations (
    position    INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    declaration TEXT NOT NULL,
    lane        TEXT NOT NULL DEFAULT ''
);
INSERT INTO sync_declarations VALUES(0,'products','{"apply":null,"codec":"json","created":null,"desired":[],"key":null,"mirror":"catalog","name":"products","origin":null,"replica_owned":[],"retired":"retired_at","version":null}','');
INSERT INTO sync_declarations VALUES(1,'orders','{"apply":null,"codec":"json","created":null,"desired":[],"key":null,"mirror":"catalog","name":"orders","origin":null,"replica_owned":[],"retired":null,"version":null}','');
INSERT INTO sync_declarations VALUES(2,'receipts','{"apply":null,"codec":"json","created":null,"desired":[],"key":null,"mirror":"record","name":"receipts","origin":"register_id","replica_owned":[],"retired":null,"version":null}','');
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
INSERT INTO sync_notes VALUES(1,'receipts','01960000-0000-7000-8000-000000001001',1,0,9050317528812944930,1,0,NULL);
INSERT INTO sync_notes VALUES(2,'receipts','01960000-0000-7000-8000-000000001002',1,0,9050317528812944930,1,0,NULL);
INSERT INTO sync_notes VALUES(3,'receipts','01960000-0000-7000-8000-000000001003',1,1,NULL,0,0,NULL);
CREATE TABLE sync_uploads (
    number   INTEGER PRIMARY KEY,
    lane     TEXT    NOT NULL,
    taken    INTEGER NOT NULL DEFAULT 0,
    taken_at INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sync_uploads VALUES(9050317528812944930,'main',1,1796386958);
CREATE TABLE sync_narrowing (
    lane       TEXT PRIMARY KEY,
    suspects   TEXT    NOT NULL,
    took_other INTEGER NOT NULL DEFAULT 0,
    stuck      INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE sync_retired_for_edits (
    table_name TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    epoch      TEXT    NOT NULL,
    sequence   INTEGER NOT NULL,
    PRIMARY KEY (table_name, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS "sync_snapshot_keys" (
    id         INTEGER PRIMARY KEY,
    table_name TEXT NOT NULL,
    let_go     TEXT NOT NULL DEFAULT '',
    named      TEXT NOT NULL DEFAULT ''
);
CREATE TABLE sync_wishes (
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
DELETE FROM sqlite_sequence;
CREATE INDEX sync_notes_pending ON sync_notes (table_name, id)
    WHERE pending = 1 AND set_aside IS NULL;
CREATE INDEX sync_notes_upload ON sync_notes (upload) WHERE upload IS NOT NULL;
CREATE TRIGGER "sync_products_refuse_insert" BEFORE INSERT ON "products"
WHEN (SELECT writing = 0 AND me <> '' FROM sync_state WHERE id = 1)
BEGIN
    SELECT RAISE(ABORT, 'magic_sync: products is written by the server; the replica only holds a copy');
END;
CREATE TRIGGER "sync_products_refuse_update" BEFORE UPDATE ON "products"
WHEN (SELECT writing = 0 AND me <> '' FROM sync_state WHERE id = 1)
BEGIN
    SELECT RAISE(ABORT, 'magic_sync: products is written by the server; the replica only holds a copy');
END;
CREATE TRIGGER "sync_products_refuse_delete" BEFORE DELETE ON "products"
WHEN (SELECT writing = 0 AND me <> '' FROM sync_state WHERE id = 1)
BEGIN
    SELECT RAISE(ABORT, 'magic_sync: products is written by the server; the replica only holds a copy');
END;
CREATE TRIGGER "sync_orders_refuse_insert" BEFORE INSERT ON "orders"
WHEN (SELECT writing = 0 AND me <> '' FROM sync_state WHERE id = 1)
BEGIN
    SELECT RAISE(ABORT, 'magic_sync: orders is written by the server; the replica only holds a copy');
END;
CREATE TRIGGER "sync_orders_refuse_update" BEFORE UPDATE ON "orders"
WHEN (SELECT writing = 0 AND me <> '' FROM sync_state WHERE id = 1)
BEGIN
    SELECT RAISE(ABORT, 'magic_sync: orders is written by the server; the replica only holds a copy');
END;
CREATE TRIGGER "sync_orders_refuse_delete" BEFORE DELETE ON "orders"
WHEN (SELECT writing = 0 AND me <> '' FROM sync_state WHERE id = 1)
BEGIN
    SELECT RAISE(ABORT, 'magic_sync: orders is written by the server; the replica only holds a copy');
END;
CREATE TRIGGER "sync_receipts_refuse_update" BEFORE UPDATE ON "receipts"
WHEN (SELECT writing = 0 AND me <> '' FROM sync_state WHERE id = 1)
BEGIN
    SELECT RAISE(ABORT, 'magic_sync: receipts is history: a row is written once');
END;
CREATE TRIGGER "sync_receipts_note_insert" AFTER INSERT ON "receipts"
WHEN (SELECT writing = 0 FROM sync_state WHERE id = 1)
BEGIN
    INSERT INTO sync_notes (table_name, key) VALUES ('receipts', coalesce(CASE WHEN typeof(NEW."id") = 'blob' AND length(NEW."id") = 16 THEN lower(substr(hex(NEW."id"), 1, 8) || '-' || substr(hex(NEW."id"), 9, 4) || '-' || substr(hex(NEW."id"), 13, 4) || '-' || substr(hex(NEW."id"), 17, 4) || '-' || substr(hex(NEW."id"), 21, 12)) ELSE CAST(NEW."id" AS TEXT) END, ''))
    ON CONFLICT (table_name, key) DO UPDATE SET writes = writes + 1, pending = 1;
END;
CREATE TRIGGER "sync_receipts_note_update" AFTER UPDATE ON "receipts"
WHEN (SELECT writing = 0 FROM sync_state WHERE id = 1)
BEGIN
    INSERT INTO sync_notes (table_name, key) VALUES ('receipts', coalesce(CASE WHEN typeof(NEW."id") = 'blob' AND length(NEW."id") = 16 THEN lower(substr(hex(NEW."id"), 1, 8) || '-' || substr(hex(NEW."id"), 9, 4) || '-' || substr(hex(NEW."id"), 13, 4) || '-' || substr(hex(NEW."id"), 17, 4) || '-' || substr(hex(NEW."id"), 21, 12)) ELSE CAST(NEW."id" AS TEXT) END, ''))
    ON CONFLICT (table_name, key) DO UPDATE SET writes = writes + 1, pending = 1;
    INSERT INTO sync_notes (table_name, key) SELECT 'receipts', coalesce(CASE WHEN typeof(OLD."id") = 'blob' AND length(OLD."id") = 16 THEN lower(substr(hex(OLD."id"), 1, 8) || '-' || substr(hex(OLD."id"), 9, 4) || '-' || substr(hex(OLD."id"), 13, 4) || '-' || substr(hex(OLD."id"), 17, 4) || '-' || substr(hex(OLD."id"), 21, 12)) ELSE CAST(OLD."id" AS TEXT) END, '') WHERE coalesce(CASE WHEN typeof(OLD."id") = 'blob' AND length(OLD."id") = 16 THEN lower(substr(hex(OLD."id"), 1, 8) || '-' || substr(hex(OLD."id"), 9, 4) || '-' || substr(hex(OLD."id"), 13, 4) || '-' || substr(hex(OLD."id"), 17, 4) || '-' || substr(hex(OLD."id"), 21, 12)) ELSE CAST(OLD."id" AS TEXT) END, '') <> coalesce(CASE WHEN typeof(NEW."id") = 'blob' AND length(NEW."id") = 16 THEN lower(substr(hex(NEW."id"), 1, 8) || '-' || substr(hex(NEW."id"), 9, 4) || '-' || substr(hex(NEW."id"), 13, 4) || '-' || substr(hex(NEW."id"), 17, 4) || '-' || substr(hex(NEW."id"), 21, 12)) ELSE CAST(NEW."id" AS TEXT) END, '')
    ON CONFLICT (table_name, key) DO UPDATE SET writes = writes + 1, pending = 1;
END;
CREATE TRIGGER "sync_receipts_note_delete" AFTER DELETE ON "receipts"
WHEN (SELECT writing = 0 FROM sync_state WHERE id = 1)
BEGIN
    INSERT INTO sync_notes (table_name, key) VALUES ('receipts', coalesce(CASE WHEN typeof(OLD."id") = 'blob' AND length(OLD."id") = 16 THEN lower(substr(hex(OLD."id"), 1, 8) || '-' || substr(hex(OLD."id"), 9, 4) || '-' || substr(hex(OLD."id"), 13, 4) || '-' || substr(hex(OLD."id"), 17, 4) || '-' || substr(hex(OLD."id"), 21, 12)) ELSE CAST(OLD."id" AS TEXT) END, ''))
    ON CONFLICT (table_name, key) DO UPDATE SET writes = writes + 1, pending = 1;
END;
COMMIT;
