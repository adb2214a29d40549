use rusqlite::Connection;
use std::time::Instant;

fn connect(path: &std::path::Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON;").unwrap();
    conn
}

fn run(
    name: &str,
    setup: &str,
    per_commit: usize,
    pre: &str,
    stmt: &str,
    extra: Option<&str>,
    fun: bool,
) {
    let dir = tempfile::tempdir().unwrap();
    let conn = connect(&dir.path().join("x.db"));
    let _ = fun;
    conn.execute_batch("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL);
      CREATE TABLE sync_state (id INTEGER PRIMARY KEY, writing INTEGER NOT NULL DEFAULT 1, me TEXT NOT NULL DEFAULT 'x');
      INSERT INTO sync_state (id) VALUES (1);
      CREATE TABLE sync_snapshot_keys (table_name TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (table_name, key)) WITHOUT ROWID;").unwrap();
    conn.execute_batch(setup).unwrap();
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300_000);
    let started = Instant::now();
    let mut i = 0;
    while i < n {
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        if !pre.is_empty() {
            conn.execute_batch(pre).unwrap();
        }
        for j in i..(i + per_commit).min(n) {
            let name = format!("item {j}");
            conn.prepare_cached(stmt)
                .unwrap()
                .execute(rusqlite::params![j as i64, name, (j % 97) as i64])
                .unwrap();
            if let Some(e) = extra {
                conn.prepare_cached(e)
                    .unwrap()
                    .execute(rusqlite::params!["items", j.to_string()])
                    .unwrap();
            }
        }
        conn.execute_batch("COMMIT").unwrap();
        i += per_commit;
    }
    let s = started.elapsed().as_secs_f64();
    println!("{name:50} {:8.3} us/row", s * 1e6 / n as f64);
}

fn batched(per_stmt: usize) {
    let dir = tempfile::tempdir().unwrap();
    let conn = connect(&dir.path().join("x.db"));
    conn.execute_batch(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL);",
    )
    .unwrap();
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300_000);
    let values: Vec<String> = (0..per_stmt)
        .map(|k| format!("(?{}, ?{}, ?{})", 3 * k + 1, 3 * k + 2, 3 * k + 3))
        .collect();
    let sql = format!("INSERT INTO items (id, name, qty) VALUES {} ON CONFLICT (id) DO UPDATE SET name = excluded.name, qty = excluded.qty", values.join(", "));
    let names: Vec<String> = (0..n).map(|j| format!("item {j}")).collect();
    let started = Instant::now();
    let mut i = 0;
    while i < n {
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let mut st = conn.prepare_cached(&sql).unwrap();
        let mut j = i;
        while j < i + 500 {
            for k in 0..per_stmt {
                let r = j + k;
                st.raw_bind_parameter(3 * k + 1, r as i64).unwrap();
                st.raw_bind_parameter(3 * k + 2, names[r].as_str()).unwrap();
                st.raw_bind_parameter(3 * k + 3, (r % 97) as i64).unwrap();
            }
            st.raw_execute().unwrap();
            j += per_stmt;
        }
        drop(st);
        conn.execute_batch("COMMIT").unwrap();
        i += 500;
    }
    let s = started.elapsed().as_secs_f64();
    println!("batched {per_stmt:3} {:8.3} us/row", s * 1e6 / n as f64);
}

fn scan() {
    let dir = tempfile::tempdir().unwrap();
    let conn = connect(&dir.path().join("x.db"));
    conn.execute_batch("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL); WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x+1 FROM c WHERE x < 999999) INSERT INTO items SELECT x, 'item ' || x, x % 97 FROM c;").unwrap();
    for sql in ["SELECT t.id FROM items t", "SELECT t.id, CASE WHEN typeof(t.id) IN ('real', 'blob') THEN coalesce(CAST(t.id AS TEXT), '') END FROM items t", "SELECT t.id, CASE WHEN typeof(t.id) IN ('real', 'blob') THEN coalesce(CAST(t.id AS TEXT), '') END FROM items t", "SELECT t.id FROM items t"] {
        let started = Instant::now();
        let mut st = conn.prepare(sql).unwrap();
        let mut rows = st.query([]).unwrap();
        let mut n = 0i64;
        while let Some(r) = rows.next().unwrap() { if let rusqlite::types::ValueRef::Integer(i) = r.get_ref(0).unwrap() { n += i; } }
        println!("{:.3} s {n} {sql}", started.elapsed().as_secs_f64());
    }
}

fn main() {
    if std::env::var("SCAN").is_ok() {
        scan();
        return;
    }
    if let Ok(b) = std::env::var("BATCH") {
        batched(b.parse().unwrap());
        return;
    }
    let plain = "INSERT INTO items (id, name, qty) VALUES (?1, ?2, ?3)";
    let upsert = "INSERT INTO items (id, name, qty) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO UPDATE SET name = excluded.name, qty = excluded.qty";
    let trig = "CREATE TRIGGER t BEFORE INSERT ON items WHEN (SELECT writing = 0 AND me <> '' FROM sync_state WHERE id = 1) BEGIN SELECT RAISE(ABORT, 'no'); END;";
    let trig_const =
        "CREATE TRIGGER t BEFORE INSERT ON items WHEN 0 BEGIN SELECT RAISE(ABORT, 'no'); END;";
    let trig_fun = "CREATE TRIGGER t BEFORE INSERT ON items WHEN sync_writing() = 0 BEGIN SELECT RAISE(ABORT, 'no'); END;";
    let arg: Vec<String> = std::env::args().skip(1).collect();
    let all = arg.is_empty();
    let want = |s: &str| all || arg.iter().any(|a| a == s);
    if want("a") {
        run("plain insert, one tx", "", 300_000, "", plain, None, false);
    }
    if want("b") {
        run("plain insert, 500/tx", "", 500, "", plain, None, false);
    }
    if want("c") {
        run("upsert, 500/tx", "", 500, "", upsert, None, false);
    }
    if want("d") {
        run(
            "upsert + trigger state, 500/tx",
            trig,
            500,
            "",
            upsert,
            None,
            false,
        );
    }
    if want("e") {
        run(
            "upsert + trigger const, 500/tx",
            trig_const,
            500,
            "",
            upsert,
            None,
            false,
        );
    }
    //if want("f") { run("upsert + trigger fun, 500/tx", trig_fun, 500, "", upsert, None, true); }
    if want("g") {
        run(
            "upsert + trigger state + remember, 500/tx",
            trig,
            500,
            "",
            upsert,
            Some("INSERT OR IGNORE INTO sync_snapshot_keys (table_name, key) VALUES (?1, ?2)"),
            false,
        );
    }
    if want("h") {
        run(
            "upsert + trigger state, 500/tx, savepoint",
            trig,
            500,
            "SAVEPOINT p",
            upsert,
            None,
            false,
        );
    }
    if want("i") {
        run(
            "upsert, 500/tx, savepoint",
            "",
            500,
            "SAVEPOINT p",
            upsert,
            None,
            false,
        );
    }
    if want("j") {
        run(
            "plain, 500/tx, savepoint",
            "",
            500,
            "SAVEPOINT p",
            plain,
            None,
            false,
        );
    }
    if want("l") {
        run(
            "upsert + trigger const no raise",
            "CREATE TRIGGER t BEFORE INSERT ON items WHEN 0 BEGIN SELECT 1; END;",
            500,
            "",
            upsert,
            None,
            false,
        );
    }
    if want("m") {
        run(
            "upsert + trigger const, temp mem",
            &format!("PRAGMA temp_store=MEMORY; {trig_const}"),
            500,
            "",
            upsert,
            None,
            false,
        );
    }
    if want("n") {
        run("upsert + trigger const, nullable table", "DROP TABLE items; CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER); CREATE TRIGGER t BEFORE INSERT ON items WHEN 0 BEGIN SELECT RAISE(ABORT, 'x'); END;", 500, "", upsert, None, false);
    }
    if want("o") {
        run("upsert nullable no trigger", "DROP TABLE items; CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER);", 500, "", upsert, None, false);
    }
    if want("k") {
        run(
            "plain, 500/tx, update state",
            "",
            500,
            "UPDATE sync_state SET writing = 1",
            plain,
            None,
            false,
        );
    }
}
