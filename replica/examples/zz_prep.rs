use magic_sync_replica::{install, Table, Tables};
use std::time::Instant;
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = rusqlite::Connection::open(dir.path().join("x.db")).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL);").unwrap();
    install(&mut conn, &Tables::new(vec![Table::catalog("items")])).unwrap();
    for sql in [
        "SELECT epoch, sequence, nonce, mac, snapshot, snapshot_began, gap, news, said, EXISTS (SELECT 1 FROM sync_rejections) FROM sync_state WHERE id = 1",
        "SELECT epoch, sequence, nonce, mac, snapshot, snapshot_began, gap, news, said FROM sync_state WHERE id = 1",
        "UPDATE sync_state SET writing = 1 WHERE id = 1 RETURNING epoch, sequence, nonce, mac, snapshot, snapshot_began, gap, news, said, EXISTS (SELECT 1 FROM sync_rejections)",
        "UPDATE sync_state SET writing = ?1 WHERE id = 1",
        "UPDATE sync_state SET epoch = ?1, sequence = ?2, nonce = ?3, mac = ?4, news = news + 1, writing = 0 WHERE id = 1 RETURNING retired_rows",
        "UPDATE sync_state SET epoch = ?1, sequence = ?2, nonce = ?3, mac = ?4, news = news + 1 WHERE id = 1",
        "INSERT INTO items (id, name, qty) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO UPDATE SET name = excluded.name, qty = excluded.qty",
        "INSERT INTO sync_snapshot_keys (table_name, let_go, named) VALUES (?1, ?2, ?3)",
        "PRAGMA schema_version",
        "SAVEPOINT sync_part",
        "BEGIN IMMEDIATE",
    ] {
        let n = 3000;
        let started = Instant::now();
        for _ in 0..n { let st = conn.prepare(sql).unwrap(); drop(st); }
        println!("{:7.1} us  {sql}", started.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
}
