//! Looking after a replica's database without its program:
//!
//!     magic-sync-replica init  DB TABLES ID       [--json]
//!     magic-sync-replica show  DB                 [--json]
//!     magic-sync-replica apply DB MESSAGE         [--json]
//!     magic-sync-replica up    DB OUT [LANE]      [--json]
//!     magic-sync-replica run   DB --queue URL | --nats URL
//!                                 | --ws URL --credential FILE [--ca FILE]
//!                                                               [--json]
//!
//! `init` makes a new replica's database from a declaration file (its
//! schema and how each table is shared) and the replica's id; `show` prints
//! what the replica holds and where it stands; `apply` takes one ToReplica
//! from a file, as the transport would deliver it; `up` writes the next Up
//! to a file and records it sent (hand the file to the transport). The
//! commands but `init` open the tables as the database recorded them: the
//! declarations and lanes of the program that last opened it, and its id.
//! Each answer and exit code is in docs/src/replica-cli.md.

mod exit;
mod init;
mod output;
#[cfg(feature = "cli")]
mod run;

use std::process::ExitCode;

use magic_sync_replica::{Received, Replica, Settings};
use serde_json::{json, Value};

use crate::exit::Failure;

/// What `help` prints, and a usage error after its reason: one line a
/// command, then how to install a build that has every command.
const USAGE: &str = "usage:
  magic-sync-replica init  DB TABLES ID    make a new replica's database
  magic-sync-replica show  DB              what it holds, and where it stands
  magic-sync-replica apply DB MESSAGE      take one ToReplica from a file
  magic-sync-replica up    DB OUT [LANE]   write the next Up to OUT, recorded sent
  magic-sync-replica run   DB TRANSPORT    the device loop, until Ctrl-C
  magic-sync-replica help                  this text
TRANSPORT is --queue URL, --nats URL or --ws URL --credential FILE [--ca FILE]:
--ws takes ws:// and wss://; --ca FILE trusts the authorities in FILE (PEM) too.
--json anywhere prints the answer as JSON.
Install it with every command and transport, from a checkout of magic_sync:
  cargo install --path replica --features pg-queue,nats,ws";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let as_json = args.iter().any(|a| a == "--json");
    args.retain(|a| a != "--json");
    let code = match run(&args, as_json) {
        Ok(answer) => answered(&answer, as_json),
        Err(failure) => failed(&failure, as_json),
    };
    ExitCode::from(code)
}

/// Writes the answer. The command did its work before: a reader gone
/// (`show DB | head`) changes nothing of it, so it still ends in success.
fn answered(answer: &Value, as_json: bool) -> u8 {
    match output::write(answer, as_json) {
        Ok(()) => exit::SUCCESS,
        Err(e) if output::reader_left(&e) => exit::SUCCESS,
        Err(e) => {
            output::say(&format!("magic-sync-replica: stdout: {e}"));
            exit::FAILED
        }
    }
}

/// Says why on stderr (and, with `--json`, as JSON on stdout).
fn failed(failure: &Failure, as_json: bool) -> u8 {
    output::say(&format!("magic-sync-replica: {failure}"));
    if matches!(failure, Failure::Usage(_)) {
        output::say(USAGE);
    }
    if as_json {
        let said = json!({"error": failure.name(), "exit": failure.code(), "message": failure.to_string()});
        // The code says it all already; a reader gone changes nothing.
        let _ = output::write(&said, true);
    }
    failure.code()
}

fn run(args: &[String], as_json: bool) -> Result<Value, Failure> {
    match args {
        [command] if ["help", "--help", "-h"].contains(&command.as_str()) => {
            // For people the text as it is; printed as `usage: ...` it
            // would say "usage" twice.
            Ok(match as_json {
                true => json!({"usage": USAGE}),
                false => json!(USAGE),
            })
        }
        [command, db, tables, id] if command == "init" => {
            let me = init::replica_id(id)?;
            let declared = init::read(tables)?;
            show(&init::create(db, declared, me)?)
        }
        [command, db] if command == "show" => show(&open(db)?),
        [command, db, file] if command == "apply" => apply(&mut open(db)?, file),
        [command, db, out, rest @ ..] if command == "up" && rest.len() <= 1 => {
            up(&mut open(db)?, out, rest.first())
        }
        [command, db, rest @ ..] if command == "run" => run_loop(db, rest, as_json),
        [] => Err(Failure::Usage("which command?".to_owned())),
        [command, ..] => Err(Failure::Usage(format!(
            "`{command}` with {} arguments is no command",
            args.len() - 1
        ))),
    }
}

/// `run`: the device loop until Ctrl-C (run.rs).
#[cfg(feature = "cli")]
fn run_loop(db: &str, rest: &[String], as_json: bool) -> Result<Value, Failure> {
    run::run(open(db)?, rest, as_json)
}

#[cfg(not(feature = "cli"))]
fn run_loop(_: &str, _: &[String], _: bool) -> Result<Value, Failure> {
    Err(Failure::Usage(
        "this build has no `run` (cargo install --path replica --features pg-queue,nats,ws)"
            .to_owned(),
    ))
}

/// Opens an existing replica (never creates one: that is `init`).
fn open(path: &str) -> Result<Replica, Failure> {
    if !std::path::Path::new(path).is_file() {
        return Err(Failure::Failed(format!(
            "{path}: no database there (init makes one)"
        )));
    }
    let conn =
        rusqlite::Connection::open(path).map_err(|e| Failure::Failed(format!("{path}: {e}")))?;
    conn.execute_batch("PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON;")
        .map_err(|e| Failure::Failed(format!("{path}: {e}")))?;
    Ok(Replica::open_recorded(conn, Settings::default())?)
}

fn apply(replica: &mut Replica, file: &str) -> Result<Value, Failure> {
    let bytes = std::fs::read(file).map_err(|e| Failure::Failed(format!("{file}: {e}")))?;
    let received = replica.receive(&bytes)?;
    Ok(json!({"received": describe(&received), "acknowledge": true}))
}

fn up(replica: &mut Replica, out: &str, lane: Option<&String>) -> Result<Value, Failure> {
    let upload = match lane {
        Some(lane) => replica.next_up_on(lane),
        None => replica.next_up(),
    }?;
    let Some(upload) = upload else {
        return Ok(json!({"up": null}));
    };
    std::fs::write(out, &upload.bytes).map_err(|e| Failure::Failed(format!("{out}: {e}")))?;
    replica.sent(&upload)?;
    let up = upload.message();
    Ok(json!({"up": {
        "file": out,
        "lane": upload.lane,
        "bytes": upload.bytes.len(),
        "sequence": up.sequence,
        "gap": up.gap,
        "uploads": up.uploads,
        "rows": up.tables.iter().map(|t| t.keys.len() + t.deletes.len()).sum::<usize>(),
        "rejections": up.rejected.len(),
        "digests": up.digests.len(),
        "backlog": up.backlog.is_some(),
    }}))
}

fn show(replica: &Replica) -> Result<Value, Failure> {
    let storage = |e: rusqlite::Error| Failure::Replica(e.into());
    let applied = replica.last_applied()?;
    let conn = replica.connection();
    let mut holds = serde_json::Map::new();
    for table in replica.tables().iter() {
        let rows: i64 = conn
            .query_row(
                &format!(
                    "SELECT count(*) FROM \"{}\"",
                    table.name().replace('"', "\"\"")
                ),
                [],
                |r| r.get(0),
            )
            .map_err(storage)?;
        holds.insert(
            table.name().to_owned(),
            json!({"mirror": table.mirror().name(), "rows": rows}),
        );
    }
    let backlog: Vec<Value> = replica
        .progress()?
        .into_iter()
        .map(|t| json!({"table": t.table, "unsent": t.unsent, "unfiled": t.unfiled, "set_aside": t.set_aside}))
        .collect();
    let mut statement = conn
        .prepare("SELECT table_name, key, reason, epoch, sequence, held_back, reported FROM sync_rejections ORDER BY id")
        .map_err(storage)?;
    let rejections: Vec<Value> = statement
        .query_map([], |r| {
            Ok(json!({
                "table": r.get::<_, String>(0)?, "key": r.get::<_, String>(1)?,
                "reason": r.get::<_, String>(2)?, "epoch": r.get::<_, String>(3)?,
                "sequence": r.get::<_, i64>(4)?, "held_back": r.get::<_, bool>(5)?,
                "reported": r.get::<_, bool>(6)?,
            }))
        })
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    let mut answer = json!({
        "replica": replica.me().to_string(),
        "last_applied": {"epoch": applied.epoch, "sequence": applied.sequence, "nonce": applied.nonce},
        "gap": applied.gap,
        "snapshot_in_progress": applied.snapshot,
        "holds": holds,
        "backlog": backlog,
        "rejections": rejections,
    });
    let has_settings = replica
        .tables()
        .iter()
        .any(|t| t.mirror() == magic_sync_replica::Mirror::Setting);
    if has_settings {
        answer["wishes"] = Value::Array(wishes(conn).map_err(storage)?);
    }
    Ok(answer)
}

/// The wishes held, each with its answer (when it answered this version).
fn wishes(conn: &rusqlite::Connection) -> rusqlite::Result<Vec<Value>> {
    let mut statement = conn.prepare(
        "SELECT id, table_name, key, version, note, answered = version AND outcome <> '',
                outcome, reason, answered_at, retired_at IS NOT NULL
         FROM sync_wishes ORDER BY rowid",
    )?;
    let rows = statement.query_map([], |r| {
        let answered: bool = r.get(5)?;
        let text = |i: usize| -> rusqlite::Result<Value> {
            Ok(match answered {
                true => json!(r.get::<_, String>(i)?),
                false => Value::Null,
            })
        };
        Ok(json!({
            "id": r.get::<_, String>(0)?, "table": r.get::<_, String>(1)?,
            "key": r.get::<_, String>(2)?, "version": r.get::<_, i64>(3)?.to_string(),
            "note": r.get::<_, String>(4)?, "outcome": text(6)?, "reason": text(7)?,
            "answered_at": text(8)?, "retired": r.get::<_, bool>(9)?,
        }))
    })?;
    rows.collect()
}

fn describe(received: &Received) -> Value {
    let keys = |tables: &[magic_sync_replica::AppliedTable]| -> Value {
        tables
            .iter()
            .map(|t| (t.table.clone(), json!(t.keys.len())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    match received {
        Received::Applied {
            tables, rejected, ..
        } => {
            json!({"applied": keys(tables), "rejected": rejected.len()})
        }
        Received::Ended {
            tables,
            swept,
            rejected,
            ..
        } => json!({"ended": tables, "swept": keys(swept), "rejected": rejected.len()}),
        Received::Filed { uploads } => json!({"filed": uploads}),
        Received::Already { sequence } => json!({"already": sequence}),
        Received::Gap { newest } => json!({"gap": newest}),
        Received::Malformed(m) => json!({"malformed": m.case, "detail": m.detail}),
    }
}
