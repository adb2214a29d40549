//! The register itself: its SQLite file (its copy of the catalog, its
//! receipts, and who it is), its device loop over the head office's
//! gateway while it is online, and its till, which sells whether it is
//! online or not.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use magic_sync_replica::transport::nats::{Nats, NatsSettings};
use magic_sync_replica::transport::ws::{Ws, WsSettings};
use magic_sync_replica::transport::{run, Control, Delivery, Options, Status, Transport, Waker};
use magic_sync_replica::{install, Apply, Replica, Settings, Table, Tables, Wishes};
use magic_sync_replica::{Error, Upload};
use rusqlite::{Connection, OptionalExtension};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::printer::{self, Printer};

/// The register's own tables: its copy of the catalog (a product the head
/// office deleted while a receipt line here points at it is kept retired:
/// `retired_at` set, out of the list, still behind its receipts), its
/// receipts with their lines (see the head office's schema for why a
/// receipt has lines), the footer it prints (a setting: its own, which
/// the head office may wish another), and who it is (kept beside them,
/// never sent).
const SCHEMA: &str = "
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    PRAGMA recursive_triggers = ON;
    PRAGMA foreign_keys = ON;
    CREATE TABLE IF NOT EXISTS products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL,
        updated_at  TEXT NOT NULL,
        retired_at  TEXT);
    CREATE TABLE IF NOT EXISTS receipts (
        id          BLOB PRIMARY KEY NOT NULL,
        register_id BLOB NOT NULL,
        total_cents INTEGER NOT NULL,
        sold_at     TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS receipt_lines (
        id          BLOB PRIMARY KEY NOT NULL,
        receipt_id  BLOB NOT NULL REFERENCES receipts (id),
        register_id BLOB NOT NULL,
        product_id  BLOB NOT NULL REFERENCES products (id),
        quantity    INTEGER NOT NULL,
        price_cents INTEGER NOT NULL);
    CREATE INDEX IF NOT EXISTS receipt_lines_receipt ON receipt_lines (receipt_id);
    CREATE INDEX IF NOT EXISTS receipt_lines_product ON receipt_lines (product_id);
    CREATE TABLE IF NOT EXISTS footers (
        register_id BLOB PRIMARY KEY NOT NULL,
        text        TEXT NOT NULL,
        changed_at  TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS this_register (
        id          BLOB NOT NULL,
        name        TEXT NOT NULL,
        credential  TEXT NOT NULL);
";

fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products").retired("retired_at"),
        Table::record("receipts").origin("register_id"),
        Table::record("receipt_lines").origin("register_id"),
        Table::setting("footers")
            .origin("register_id")
            .version("changed_at")
            .desired(&["text"])
            .apply(Apply::IfUnchanged),
    ])
}

/// Refuses a file an earlier build of the shop made (its receipts name a
/// product, and it has no lines), saying what to do.
fn of_this_build(conn: &Connection, file: &Path) -> Result<(), String> {
    let old: bool = conn
        .query_row(
            "SELECT count(*) FROM pragma_table_info('receipts') WHERE name = 'product'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(sqlite)?
        > 0;
    if old {
        return Err(format!(
            "{} was made by an earlier build of the shop (its receipts have no lines): \
             move it away to start this register afresh",
            file.display()
        ));
    }
    Ok(())
}

/// The register's network, which its page can break: while it is broken,
/// every call the device loop makes of its transport (the gateway, or
/// NATS) fails as a network's would (the link refused), and the loop
/// tries again, waiting longer each time; restored, the next try gets
/// through and it catches up.
struct Network<T> {
    link: T,
    broken: Arc<AtomicBool>,
}

impl<T> Network<T> {
    fn up(&self) -> Result<(), Error> {
        if self.broken.load(Ordering::SeqCst) {
            Err(Error::TransportDown(
                "the network is broken: the link refused".to_owned(),
            ))
        } else {
            Ok(())
        }
    }
}

impl<T: Transport> Transport for Network<T> {
    type Handle = T::Handle;

    fn connect(&mut self) -> Result<(), Error> {
        self.up()?;
        self.link.connect()
    }

    fn next(&mut self) -> Result<Option<Delivery<Self::Handle>>, Error> {
        self.up()?;
        self.link.next()
    }

    fn ack(&mut self, handle: Self::Handle) -> Result<(), Error> {
        self.up()?;
        self.link.ack(handle)
    }

    fn hold(&mut self, handle: Self::Handle, retry_in: Duration) -> Result<(), Error> {
        self.up()?;
        self.link.hold(handle, retry_in)
    }

    fn send(&mut self, up: &Upload) -> Result<(), Error> {
        self.up()?;
        self.link.send(up)
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, Error> {
        self.up()?;
        self.link.wait(timeout)
    }

    fn waker(&self) -> Option<Waker> {
        self.link.waker()
    }
}

/// How the register reaches the head office, as the head office says
/// (`GET /api/link`): its gateway, or NATS.
#[derive(Clone, Debug, PartialEq)]
pub enum Link {
    Gateway(String),
    Nats(String),
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
    link: Link,
    credential: String,
    assets: PathBuf,
    device: Mutex<Loop>,
    /// What the device loop last said, as a sentence.
    heard: Arc<Mutex<String>>,
    /// The receipt printer, which carries out the head office's wishes of
    /// its footer.
    printer: Printer,
    /// The network broken from the page.
    broken: Arc<AtomicBool>,
}

fn sqlite(e: rusqlite::Error) -> String {
    format!("the register's file: {e}")
}

/// A request to the head office (a POST carries JSON), answered with JSON
/// (HTTP/1.1, one request a connection).
fn request(
    head_office: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, String> {
    let host = head_office
        .strip_prefix("http://")
        .ok_or_else(|| format!("{head_office}: the head office's address starts http://"))?;
    let mut stream =
        TcpStream::connect(host).map_err(|e| format!("the head office at {host}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
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
        of_this_build(&conn, file)?;
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
                    match request(
                        head_office,
                        "POST",
                        "/api/registers",
                        Some(&json!({ "id": me, "name": name })),
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
        let printer = Printer::new();
        let settings = Settings {
            wishes: Wishes::new().on("footers", printer.clone()),
            // A wish that waits (the printer off) is offered again every
            // second, so that it prints soon after the printer is back on.
            wishes_every: Duration::from_secs(1),
            // Its digests said every 10 seconds (the head office compares
            // them at most every ten minutes): an Up, so that a register
            // online with nothing else to say is still heard from, and the
            // head office's page calls only a register silent for half a
            // minute "not answering".
            digests_every: Duration::from_secs(10),
            ..Settings::default()
        };
        let replica = Replica::open(conn, tables, me, settings).map_err(|e| e.to_string())?;
        let link = link_to(&Connection::open(file).map_err(sqlite)?, head_office)?;
        let till = Till {
            file: file.to_owned(),
            name: name.to_owned(),
            me,
            link,
            credential,
            assets,
            device: Mutex::new(Loop::Offline(Box::new(replica))),
            heard: Default::default(),
            printer,
            broken: Arc::new(AtomicBool::new(false)),
        };
        till.first_footer()?;
        Ok(till)
    }

    /// The footer it prints before it is told another, written the first
    /// time (the engine's triggers note it: it goes up to the head office).
    fn first_footer(&self) -> Result<(), String> {
        self.till()?
            .execute(
                "INSERT INTO footers (register_id, text, changed_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (register_id) DO NOTHING",
                rusqlite::params![
                    self.me.as_bytes(),
                    printer::FIRST_FOOTER,
                    printer::version_after(None)
                ],
            )
            .map_err(sqlite)?;
        Ok(())
    }

    /// The register's own change of its footer (its version moved on): it
    /// goes up to the head office, and a wish based on the footer before
    /// it is superseded. One that does not fit the printer is refused.
    pub fn change_footer(&self, text: &str) -> Result<(), String> {
        let text = text.trim();
        if let Some(why) = printer::misfit(text) {
            return Err(why);
        }
        let till = self.till()?;
        let before: Option<String> = till
            .query_row(
                "SELECT changed_at FROM footers WHERE register_id = ?1",
                [self.me.as_bytes()],
                |r| r.get(0),
            )
            .optional()
            .map_err(sqlite)?;
        till.execute(
            "INSERT INTO footers (register_id, text, changed_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (register_id) DO UPDATE SET text = excluded.text, \
             changed_at = excluded.changed_at",
            rusqlite::params![
                self.me.as_bytes(),
                text,
                printer::version_after(before.as_deref())
            ],
        )
        .map_err(sqlite)?;
        self.poke();
        Ok(())
    }

    /// The printer switched on or off: off, a footer wished waits.
    pub fn switch_printer(&self, on: bool) {
        self.printer.switch(on);
        self.poke();
    }

    /// Online, the device loop is poked: rows to send.
    fn poke(&self) {
        if let Loop::Online { control, .. } = &*self.device.lock().unwrap() {
            control.poke();
        }
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
        let link = self.link.clone();
        let credential = self.credential.clone();
        let control = Control::new();
        let steering = control.clone();
        let heard = self.heard.clone();
        let broken = self.broken.clone();
        let thread = std::thread::spawn(move || {
            let options = Options {
                longest_pause: Duration::from_secs(5),
                ..Options::default()
            };
            let report = |status: &Status, tries: u32| *heard.lock().unwrap() = said(status, tries);
            let made = match link {
                Link::Gateway(url) => {
                    Ws::new(WsSettings::new(url, credential), &replica).map(|link| {
                        drive(
                            &mut replica,
                            Network { link, broken },
                            &options,
                            &steering,
                            report,
                        )
                    })
                }
                Link::Nats(url) => Nats::new(NatsSettings::new(url), &replica).map(|link| {
                    drive(
                        &mut replica,
                        Network { link, broken },
                        &options,
                        &steering,
                        report,
                    )
                }),
            };
            if let Err(e) = made {
                *heard.lock().unwrap() = format!("cannot reach the head office: {e}");
            }
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

    /// Breaks the network (`true`) or restores it: the device loop, if it
    /// runs, starts again on it (a broken one drops its link, as a network
    /// lost does; a restored one connects at once).
    pub fn break_network(&self, broken: bool) {
        self.broken.store(broken, Ordering::SeqCst);
        if self.online() {
            self.go_offline();
            self.go_online();
        }
    }

    fn online(&self) -> bool {
        matches!(&*self.device.lock().unwrap(), Loop::Online { .. })
    }

    fn till(&self) -> Result<Connection, String> {
        let conn = Connection::open(&self.file).map_err(sqlite)?;
        conn.execute_batch(
            "PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000",
        )
        .map_err(sqlite)?;
        Ok(conn)
    }

    /// Sells what the lines say (product and quantity), each at the price
    /// its own catalog says: a receipt and its lines written into its
    /// file in one transaction (the engine's triggers note them). A
    /// retired product is no longer sold. Online, the device loop is poked
    /// to send them at once.
    pub fn sell(&self, lines: &[(Uuid, i64)]) -> Result<Uuid, String> {
        if lines.is_empty() {
            return Err("a sale needs a line: a product and how many".to_owned());
        }
        let mut till = self.till()?;
        let sale = till.transaction().map_err(sqlite)?;
        let mut priced = Vec::with_capacity(lines.len());
        for &(product, quantity) in lines {
            if quantity < 1 {
                return Err(format!("a line sells one or more, not {quantity}"));
            }
            let price: i64 = sale
                .query_row(
                    "SELECT price_cents FROM products WHERE id = ?1 AND retired_at IS NULL",
                    [product.as_bytes()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sqlite)?
                .ok_or_else(|| format!("this register does not sell the product {product}"))?;
            priced.push((product, quantity, price));
        }
        let total: i64 = priced.iter().map(|(_, q, p)| q * p).sum();
        let id = Uuid::new_v4();
        sale.execute(
            "INSERT INTO receipts (id, register_id, total_cents, sold_at) \
             VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            rusqlite::params![id.as_bytes(), self.me.as_bytes(), total],
        )
        .map_err(sqlite)?;
        for (product, quantity, price) in priced {
            sale.execute(
                "INSERT INTO receipt_lines \
                 (id, receipt_id, register_id, product_id, quantity, price_cents) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![
                    Uuid::new_v4().as_bytes(),
                    id.as_bytes(),
                    self.me.as_bytes(),
                    product.as_bytes(),
                    quantity,
                    price
                ],
            )
            .map_err(sqlite)?;
        }
        sale.commit().map_err(sqlite)?;
        self.poke();
        Ok(id)
    }

    /// What the page shows: the catalog it holds, its receipts, how many
    /// of them are not at the head office yet, and its connection.
    pub fn shown(&self) -> Result<Value, String> {
        let till = self.till()?;
        let mut products = till
            .prepare(
                "SELECT id, name, price_cents FROM products WHERE retired_at IS NULL \
                 ORDER BY name, id",
            )
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
                "SELECT r.id, r.total_cents, r.sold_at, \
                        coalesce((SELECT json_group_array(json_object( \
                            'product', p.name, \
                            'quantity', l.quantity, 'price_cents', l.price_cents, \
                            'retired', json(CASE WHEN p.retired_at IS NULL THEN 'false' ELSE 'true' END))) \
                          FROM receipt_lines l JOIN products p ON p.id = l.product_id \
                          WHERE l.receipt_id = r.id), '[]') \
                 FROM receipts r ORDER BY r.sold_at DESC LIMIT 50",
            )
            .map_err(sqlite)?;
        let receipts: Vec<Value> = receipts
            .query_map([], |r| {
                let id: Vec<u8> = r.get(0)?;
                let lines: String = r.get(3)?;
                Ok(json!({
                    "id": Uuid::from_slice(&id).unwrap_or_default(),
                    "total_cents": r.get::<_, i64>(1)?,
                    "sold_at": r.get::<_, String>(2)?,
                    "lines": serde_json::from_str::<Value>(&lines).unwrap_or_default(),
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
        let footer: Option<(String, String)> = till
            .query_row(
                "SELECT text, changed_at FROM footers WHERE register_id = ?1",
                [self.me.as_bytes()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sqlite)?;
        // The head office's wish of its footer, as this register holds it,
        // with its answer (of that wish, or none yet).
        let wish: Option<Value> = till
            .query_row(
                "SELECT CAST(wanted AS TEXT), CASE WHEN answered = version THEN outcome END, \
                        CASE WHEN answered = version THEN reason END \
                 FROM sync_wishes WHERE table_name = 'footers' AND retired_at IS NULL",
                [],
                |r| {
                    let wanted: String = r.get(0)?;
                    let wanted: Value = serde_json::from_str(&wanted).unwrap_or_default();
                    Ok(json!({
                        "text": wanted["text"],
                        "outcome": r.get::<_, Option<String>>(1)?,
                        "reason": r.get::<_, Option<String>>(2)?,
                    }))
                },
            )
            .optional()
            .map_err(sqlite)?;
        Ok(json!({
            "id": self.me,
            "footer": footer.map(|(text, changed_at)| json!({ "text": text, "changed_at": changed_at })),
            "printer": self.printer.is_on(),
            "wish": wish,
            "name": self.name,
            "online": self.online(),
            "network": !self.broken.load(Ordering::SeqCst),
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

/// Runs the device loop on `transport` until it is stopped, reporting
/// what it does with how many connections failed in a row.
fn drive<T: Transport>(
    replica: &mut Replica,
    mut transport: T,
    options: &Options,
    control: &Control,
    report: impl Fn(&Status, u32),
) {
    let mut tries = 0;
    run(replica, &mut transport, options, control, |status| {
        match status {
            Status::Disconnected { .. } => tries += 1,
            Status::Connected => tries = 0,
            _ => {}
        }
        report(&status, tries);
    })
}

/// How to reach the head office: as it says now (`GET /api/link`, kept in
/// the file), or as it said last when it does not answer at once (a
/// register of a build before NATS: its gateway).
fn link_to(conn: &Connection, head_office: &str) -> Result<Link, String> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS this_link (transport TEXT NOT NULL, url TEXT NOT NULL)",
    )
    .map_err(sqlite)?;
    let gateway = || {
        Link::Gateway(format!(
            "ws://{}/link",
            head_office.trim_start_matches("http://")
        ))
    };
    if let Ok(said) = request(head_office, "GET", "/api/link", None) {
        let link = match (said["transport"].as_str(), said["url"].as_str()) {
            (Some("nats"), Some(url)) => Link::Nats(url.to_owned()),
            (Some("ws"), _) => gateway(),
            _ => {
                return Err(format!(
                    "the head office's link is not one this register knows: {said}"
                ))
            }
        };
        let (transport, url) = match &link {
            Link::Gateway(url) => ("ws", url),
            Link::Nats(url) => ("nats", url),
        };
        conn.execute_batch("DELETE FROM this_link")
            .map_err(sqlite)?;
        conn.execute(
            "INSERT INTO this_link (transport, url) VALUES (?1, ?2)",
            [transport, url.as_str()],
        )
        .map_err(sqlite)?;
        return Ok(link);
    }
    let kept: Option<(String, String)> = conn
        .query_row("SELECT transport, url FROM this_link", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(sqlite)?;
    Ok(match kept {
        Some((transport, url)) if transport == "nats" => Link::Nats(url),
        _ => gateway(),
    })
}

/// The device loop's news, as the page says it (`tries`: the connections
/// that failed in a row).
fn said(status: &Status, tries: u32) -> String {
    match status {
        Status::Connected => "connected".to_owned(),
        Status::Disconnected { error, retry_in } => format!(
            "cannot reach the head office ({error}): tried {tries} {}, again in {retry_in:?}",
            if tries == 1 { "time" } else { "times" }
        ),
        Status::Waiting { .. } => "connected".to_owned(),
        Status::Stopped => "offline".to_owned(),
        other => format!("connected: {other}"),
    }
}
