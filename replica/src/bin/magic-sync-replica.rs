//! Looking after a replica's database without its program:
//!
//!     magic-sync-replica show  DB            [--json]
//!     magic-sync-replica apply DB MESSAGE    [--json]
//!     magic-sync-replica up    DB OUT [LANE] [--json]
//!
//! `show` prints what the replica holds and where it stands; `apply` takes
//! one ToReplica from a file, as the transport would deliver it; `up`
//! writes the next Up to a file and records it sent (hand the file to the
//! transport). The tables are opened as the database recorded them: the
//! declarations and lanes of the program that last opened it, and its id.

use std::process::ExitCode;

use magic_sync_replica::{Received, Replica, Settings};
use serde_json::{json, Value};

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let as_json = args.iter().any(|a| a == "--json");
    args.retain(|a| a != "--json");
    match run(&args) {
        Ok(answer) => {
            if as_json {
                println!("{}", serde_json::to_string_pretty(&answer).expect("JSON"));
            } else {
                print!("{}", human(&answer, 0));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("magic-sync-replica: {e}");
            eprintln!(
                "usage: magic-sync-replica show DB | apply DB MESSAGE | up DB OUT [LANE]  [--json]"
            );
            ExitCode::FAILURE
        }
    }
}

fn open(path: &str) -> Result<Replica, String> {
    let conn = rusqlite::Connection::open(path).map_err(|e| format!("{path}: {e}"))?;
    conn.execute_batch("PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON;")
        .map_err(|e| e.to_string())?;
    Replica::open_recorded(conn, Settings::default()).map_err(|e| e.to_string())
}

fn run(args: &[String]) -> Result<Value, String> {
    match args {
        [command, db] if command == "show" => show(&open(db)?),
        [command, db, file] if command == "apply" => {
            let mut replica = open(db)?;
            let bytes = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
            let received = replica.receive(&bytes).map_err(|e| e.to_string())?;
            Ok(json!({"received": describe(&received), "acknowledge": true}))
        }
        [command, db, out, rest @ ..] if command == "up" && rest.len() <= 1 => {
            let mut replica = open(db)?;
            let upload = match rest.first() {
                Some(lane) => replica.next_up_on(lane),
                None => replica.next_up(),
            }
            .map_err(|e| e.to_string())?;
            let Some(upload) = upload else {
                return Ok(json!({"up": null}));
            };
            std::fs::write(out, &upload.bytes).map_err(|e| format!("{out}: {e}"))?;
            replica.sent(&upload).map_err(|e| e.to_string())?;
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
        _ => Err("which command?".to_owned()),
    }
}

fn show(replica: &Replica) -> Result<Value, String> {
    let applied = replica.last_applied().map_err(|e| e.to_string())?;
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
            .map_err(|e| e.to_string())?;
        holds.insert(
            table.name().to_owned(),
            json!({"mirror": table.mirror().name(), "rows": rows}),
        );
    }
    let backlog: Vec<Value> = replica
        .progress()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|t| json!({"table": t.table, "unsent": t.unsent, "unfiled": t.unfiled, "set_aside": t.set_aside}))
        .collect();
    let mut statement = conn
        .prepare("SELECT table_name, key, reason, epoch, sequence, held_back, reported FROM sync_rejections ORDER BY id")
        .map_err(|e| e.to_string())?;
    let rejections: Vec<Value> = statement
        .query_map([], |r| {
            Ok(json!({
                "table": r.get::<_, String>(0)?, "key": r.get::<_, String>(1)?,
                "reason": r.get::<_, String>(2)?, "epoch": r.get::<_, String>(3)?,
                "sequence": r.get::<_, i64>(4)?, "held_back": r.get::<_, bool>(5)?,
                "reported": r.get::<_, bool>(6)?,
            }))
        })
        .map_err(|e| e.to_string())?
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    Ok(json!({
        "replica": replica.me().to_string(),
        "last_applied": {"epoch": applied.epoch, "sequence": applied.sequence, "nonce": applied.nonce},
        "gap": applied.gap,
        "snapshot_in_progress": applied.snapshot,
        "holds": holds,
        "backlog": backlog,
        "rejections": rejections,
    }))
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
        Received::Applied { tables, rejected } => {
            json!({"applied": keys(tables), "rejected": rejected.len()})
        }
        Received::Ended {
            tables,
            swept,
            rejected,
        } => json!({"ended": tables, "swept": keys(swept), "rejected": rejected.len()}),
        Received::Filed { uploads } => json!({"filed": uploads}),
        Received::Already { sequence } => json!({"already": sequence}),
        Received::Gap { newest } => json!({"gap": newest}),
        Received::Malformed(m) => json!({"malformed": m.case, "detail": m.detail}),
    }
}

/// JSON as indented `key: value` lines, for people.
fn human(value: &Value, depth: usize) -> String {
    let pad = "  ".repeat(depth);
    match value {
        Value::Object(members) => members
            .iter()
            .map(|(k, v)| match v {
                Value::Object(_) | Value::Array(_) if !is_empty(v) => {
                    format!("{pad}{k}:\n{}", human(v, depth + 1))
                }
                other => format!("{pad}{k}: {}\n", scalar(other)),
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Object(_) => format!("{pad}-\n{}", human(v, depth + 1)),
                other => format!("{pad}- {}\n", scalar(other)),
            })
            .collect(),
        other => format!("{pad}{}\n", scalar(other)),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        Value::Array(_) => "none".into(),
        Value::Object(_) => "none".into(),
        other => other.to_string(),
    }
}
