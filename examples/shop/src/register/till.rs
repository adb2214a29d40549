//! The register itself: its SQLite file (its copy of the catalog, its
//! receipts, and who it is), its device loop over the head office's
//! gateway while it is online, and its till, which sells whether it is
//! online or not.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use magic_sync_replica::transport::ws::{Ws, WsSettings};
use magic_sync_replica::transport::{run, Control, Options, Status};
use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use rusqlite::{Connection, OptionalExtension};
use serde_json::{json, Value};
use uuid::Uuid;

/// The register's own tables: its copy of the catalog, its receipts, and
/// who it is (kept beside them, never sent).
const SCHEMA: &str = "
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    PRAGMA recursive_triggers = ON;
    CREATE TABLE IF NOT EXISTS products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL,
        updated_at  TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS receipts (
        id          BLOB PRIMARY KEY NOT NULL,
        register_id BLOB NOT NULL,
        product     TEXT NOT NULL,
        total_cents INTEGER NOT NULL,
        sold_at     TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS this_register (
        id          BLOB NOT NULL,
        name        TEXT NOT NULL,
        credential  TEXT NOT NULL);
";

fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products"),
        Table::record("receipts").origin("register_id"),
    ])
}

/// Where the device loop is.
enum Loop {
    Online {
        control: Control,
        thread: JoinHandle<Replica>,
    },
    Offline(Box<Replica>),
    /// Between the two, for a moment.
    Switching,
}

pub struct Till {
    file: PathBuf,
    name: String,
    me: Uuid,
    gateway: String,
    credential: String,
    assets: PathBuf,
    device: Mutex<Loop>,
    /// What the device loop last said, as a sentence.
    heard: std::sync::Arc<Mutex<String>>,
}

fn sqlite(e: rusqlite::Error) -> String {
    format!("the register's file: {e}")
}

/// A POST of JSON to the head office, answered with JSON (HTTP/1.1, one
/// request a connection).
fn post(head_office: &str, path: &str, body: &Value) -> Result<Value, String> {
    let host = head_office
        .strip_prefix("http://")
        .ok_or_else(|| format!("{head_office}: the head office's address starts http://"))?;
    let mut stream =
        TcpStream::connect(host).map_err(|e| format!("the head office at {host}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    let (head, text) = answer
        .split_once("\r\n\r\n")
        .ok_or("the head office's answer has no body")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("the head office answered {head}: {text}"));
    }
    serde_json::from_str(text).map_err(|e| e.to_string())
}

impl Till {
    /// Opens the register's file, making it the first time; a register
    /// not yet known introduces itself to the head office, and waits for
    /// it to answer.
    pub fn open(
        file: &Path,
        name: &str,
        head_office: &str,
        assets: PathBuf,
        refuse: Option<&str>,
    ) -> Result<Till, String> {
        let conn = Connection::open(file).map_err(sqlite)?;
        conn.execute_batch(SCHEMA).map_err(sqlite)?;
        refusing(&conn, refuse)?;
        let known: Option<(Vec<u8>, String)> = conn
            .query_row("SELECT id, credential FROM this_register", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(sqlite)?;
        let (me, credential) = match known {
            Some((id, credential)) => (
                Uuid::from_slice(&id).map_err(|e| e.to_string())?,
                credential,
            ),
            None => {
                let me = Uuid::new_v4();
                let answer = loop {
                    match post(
                        head_office,
                        "/api/registers",
                        &json!({ "id": me, "name": name }),
                    ) {
                        Ok(answer) => break answer,
                        Err(e) => {
                            eprintln!("register: introducing itself: {e}; again in a second");
                            std::thread::sleep(Duration::from_secs(1));
                        }
                    }
                };
                let credential = answer["credential"]
                    .as_str()
                    .ok_or("the head office gave no credential")?
                    .to_owned();
                conn.execute(
                    "INSERT INTO this_register (id, name, credential) VALUES (?1, ?2, ?3)",
                    rusqlite::params![me.as_bytes(), name, credential],
                )
                .map_err(sqlite)?;
                (me, credential)
            }
        };
        let mut conn = conn;
        let tables = tables();
        install(&mut conn, &tables).map_err(|e| e.to_string())?;
        let replica =
            Replica::open(conn, tables, me, Settings::default()).map_err(|e| e.to_string())?;
        let gateway = format!("ws://{}/link", head_office.trim_start_matches("http://"));
        Ok(Till {
            file: file.to_owned(),
            name: name.to_owned(),
            me,
            gateway,
            credential,
            assets,
            device: Mutex::new(Loop::Offline(Box::new(replica))),
            heard: Default::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn assets(&self) -> &Path {
        &self.assets
    }

    /// Starts the device loop, unless it runs.
    pub fn go_online(&self) {
        let mut device = self.device.lock().unwrap();
        let Loop::Offline(_) = &*device else {
            return;
        };
        let Loop::Offline(mut replica) = std::mem::replace(&mut *device, Loop::Switching) else {
            unreachable!()
        };
        *self.heard.lock().unwrap() = "connecting".to_owned();
        let settings = WsSettings::new(self.gateway.clone(), self.credential.clone());
        let control = Control::new();
        let steering = control.clone();
        let heard = self.heard.clone();
        let thread = std::thread::spawn(move || {
            let options = Options {
                longest_pause: Duration::from_secs(5),
                ..Options::default()
            };
            match Ws::new(settings, &replica) {
                Ok(mut ws) => run(&mut replica, &mut ws, &options, &steering, |status| {
                    *heard.lock().unwrap() = said(&status);
                }),
                Err(e) => *heard.lock().unwrap() = format!("cannot reach the gateway: {e}"),
            };
            *replica
        });
        *device = Loop::Online { control, thread };
    }

    /// Stops the device loop (the link ends); the till goes on.
    pub fn go_offline(&self) {
        let mut device = self.device.lock().unwrap();
        if let Loop::Online { .. } = &*device {
            let Loop::Online { control, thread } = std::mem::replace(&mut *device, Loop::Switching)
            else {
                unreachable!()
            };
            control.stop();
            let replica = thread.join().expect("the device loop ends cleanly");
            *device = Loop::Offline(Box::new(replica));
            *self.heard.lock().unwrap() = "offline".to_owned();
        }
    }

    fn online(&self) -> bool {
        matches!(&*self.device.lock().unwrap(), Loop::Online { .. })
    }

    fn till(&self) -> Result<Connection, String> {
        let conn = Connection::open(&self.file).map_err(sqlite)?;
        conn.execute_batch("PRAGMA recursive_triggers = ON; PRAGMA busy_timeout = 5000")
            .map_err(sqlite)?;
        Ok(conn)
    }

    /// Sells one of a product at the price its own catalog says: a receipt
    /// written into its file (the engine's triggers note it). Online, the
    /// device loop is poked to send it at once.
    pub fn sell(&self, product: Uuid) -> Result<Uuid, String> {
        let till = self.till()?;
        let (name, price): (String, i64) = till
            .query_row(
                "SELECT name, price_cents FROM products WHERE id = ?1",
                [product.as_bytes()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|_| "this register does not hold that product".to_owned())?;
        let id = Uuid::new_v4();
        till.execute(
            "INSERT INTO receipts (id, register_id, product, total_cents, sold_at) \
             VALUES (?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            rusqlite::params![id.as_bytes(), self.me.as_bytes(), name, price],
        )
        .map_err(sqlite)?;
        if let Loop::Online { control, .. } = &*self.device.lock().unwrap() {
            control.poke();
        }
        Ok(id)
    }

    /// What the page shows: the catalog it holds, its receipts, how many
    /// of them are not at the head office yet, and its connection.
    pub fn shown(&self) -> Result<Value, String> {
        let till = self.till()?;
        let mut products = till
            .prepare("SELECT id, name, price_cents FROM products ORDER BY name, id")
            .map_err(sqlite)?;
        let products: Vec<Value> = products
            .query_map([], |r| {
                let id: Vec<u8> = r.get(0)?;
                Ok(json!({
                    "id": Uuid::from_slice(&id).unwrap_or_default(),
                    "name": r.get::<_, String>(1)?,
                    "price_cents": r.get::<_, i64>(2)?,
                }))
            })
            .map_err(sqlite)?
            .collect::<Result<_, _>>()
            .map_err(sqlite)?;
        let mut receipts = till
            .prepare(
                "SELECT id, product, total_cents, sold_at FROM receipts \
                 ORDER BY sold_at DESC LIMIT 50",
            )
            .map_err(sqlite)?;
        let receipts: Vec<Value> = receipts
            .query_map([], |r| {
                let id: Vec<u8> = r.get(0)?;
                Ok(json!({
                    "id": Uuid::from_slice(&id).unwrap_or_default(),
                    "product": r.get::<_, String>(1)?,
                    "total_cents": r.get::<_, i64>(2)?,
                    "sold_at": r.get::<_, String>(3)?,
                }))
            })
            .map_err(sqlite)?
            .collect::<Result<_, _>>()
            .map_err(sqlite)?;
        // Every receipt the engine noted and has not heard filed yet: not
        // sent, sent and not filed, or set aside.
        let waiting: i64 = till
            .query_row(
                "SELECT count(*) FROM sync_notes WHERE table_name = 'receipts'",
                [],
                |r| r.get(0),
            )
            .map_err(sqlite)?;
        Ok(json!({
            "id": self.me,
            "name": self.name,
            "online": self.online(),
            "connection": *self.heard.lock().unwrap(),
            "products": products,
            "receipts": receipts,
            "not_at_head_office": waiting,
        }))
    }
}

/// The bug `--refuse` plants: the register's file will not take a product
/// of that name (as a build that cannot handle it would fail on it), so
/// the replica rejects that row and takes the rest. Started without it,
/// the bug is gone.
fn refusing(conn: &Connection, product: Option<&str>) -> Result<(), String> {
    conn.execute_batch(
        "DROP TRIGGER IF EXISTS refuse_product_insert; DROP TRIGGER IF EXISTS refuse_product_update;",
    )
    .map_err(sqlite)?;
    let Some(product) = product else {
        return Ok(());
    };
    let quoted = product.replace('\'', "''");
    let why = format!("this build cannot sell {product}").replace('\'', "''");
    for event in ["INSERT", "UPDATE"] {
        conn.execute_batch(&format!(
            "CREATE TEMP TRIGGER refuse_product_{} BEFORE {event} ON main.products \
             WHEN NEW.name = '{quoted}' BEGIN SELECT RAISE(ABORT, '{why}'); END;",
            event.to_lowercase()
        ))
        .map_err(sqlite)?;
    }
    Ok(())
}

/// The device loop's news, as the page says it.
fn said(status: &Status) -> String {
    match status {
        Status::Connected => "connected".to_owned(),
        Status::Disconnected { error, retry_in } => {
            format!("cannot reach the head office ({error}): again in {retry_in:?}")
        }
        Status::Waiting { .. } => "connected".to_owned(),
        Status::Stopped => "offline".to_owned(),
        other => format!("connected: {other}"),
    }
}
