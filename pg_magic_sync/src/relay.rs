//! One relay pass, run by `CALL sync.relay()` (sql/noting.sql) in a
//! REPEATABLE READ transaction that holds the relay's lock: observe the
//! replicas, plan, load, record, and mark the notes done, all in that one
//! transaction, before anything is published.

use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::prelude::*;
use serde_json::json;
use uuid::Uuid;

use crate::catalog;
use crate::db::{self, from_pg, to_pg};
use crate::load;
use crate::observe;
use crate::plan;
use crate::record::{self, Epoch};
use crate::seal;
use crate::settings;
use crate::steps::Steps;

/// The notes planned are done with: what they asked for is recorded.
const DELETE_PLANNED_NOTES: &str = "\
    DELETE FROM sync.notes n USING sync_pass_notes p WHERE n.ctid = p.at; \
    DELETE FROM sync.group_notes n USING sync_pass_group_notes p WHERE n.id = p.id";

/// Bodies no message carries any more.
const DROP_UNCARRIED_BODIES: &str = "\
    DELETE FROM sync.bodies b WHERE NOT EXISTS (SELECT 1 FROM sync.outbox o WHERE o.body = b.id)";

/// The pass's scratch tables, dropped as it ends (two passes may share a
/// transaction, as tests do).
fn drop_pass_tables() {
    let mut tables = vec![
        "sync_pass_live",
        "sync_pass_rows",
        "sync_pass_cohorts",
        "sync_pass_representatives",
    ];
    tables.extend(plan::PASS_TABLES);
    let names: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
    // Only those this pass made: DROP ... IF EXISTS would talk about the rest.
    let made: Option<String> = db::one(
        "SELECT string_agg(quote_ident(relname), ', ') FROM pg_class \
         WHERE relnamespace = pg_my_temp_schema() AND relname = ANY($1)",
        &[names.into()],
    );
    if let Some(made) = made {
        db::run(&format!("DROP TABLE {made}"));
    }
}

/// A live replica whose chain is in another epoch than the current one
/// cannot follow anything sent in it: it begins again with a snapshot.
const PROVISION_OTHER_EPOCHS: &str = "\
    UPDATE sync.replicas SET provision = true \
    WHERE live AND NOT provision AND epoch IS DISTINCT FROM $1";

/// When the declarations changed since the last pass (a table routed
/// otherwise, mirrored for the first time or no more, a column added), what
/// every replica holds may be wrong: every live replica is provisioned
/// again, and what was kept of tables no longer declared is let go.
fn provision_all_if_redeclared() -> bool {
    let digest = catalog::declarations_digest();
    let last: Option<String> = db::one("SELECT declared FROM sync.relay_state", &[]);
    db::run_with(
        "UPDATE sync.relay_state SET declared = $1",
        &[digest.as_str().into()],
    );
    if last.is_none_or(|last| last == digest) {
        return false;
    }
    pgrx::warning!(
        "magic_sync: the declarations changed since the last pass: every live replica is provisioned again"
    );
    db::run("UPDATE sync.replicas SET provision = true WHERE live");
    db::run(
        "DELETE FROM sync.held h WHERE NOT EXISTS (SELECT 1 FROM sync.tables t WHERE t.name = h.table_name); \
         DELETE FROM sync.quarantine q WHERE NOT EXISTS (SELECT 1 FROM sync.tables t WHERE t.name = q.table_name)",
    );
    true
}

/// Whether this session has run a pass: the first one is a relay starting.
static RELAYED_IN_THIS_SESSION: AtomicBool = AtomicBool::new(false);

/// `sync.relay_starts()`: whether the next pass in this session is the
/// first, a relay starting, when whatever was set aside is tried again.
#[pg_extern(volatile)]
fn relay_starts() -> bool {
    !RELAYED_IN_THIS_SESSION.load(Ordering::Relaxed)
}

/// The current epoch, begun the first time it is needed.
pub fn current_epoch() -> Epoch {
    let found = Spi::connect(|client| {
        let mut rows = client
            .select(
                "SELECT id, secret FROM sync.epochs WHERE current",
                Some(1),
                &[],
            )
            .expect("reads sync.epochs");
        rows.next().map(|row| Epoch {
            id: from_pg(row.get(1).ok().flatten().expect("an epoch id")),
            secret: row.get(2).ok().flatten().expect("an epoch secret"),
        })
    });
    found.unwrap_or_else(begin_epoch)
}

fn begin_epoch() -> Epoch {
    let epoch = Epoch {
        id: Uuid::new_v4(),
        secret: seal::draw_secret().to_vec(),
    };
    db::run_with(
        "INSERT INTO sync.epochs (id, secret) VALUES ($1, $2)",
        &[to_pg(epoch.id).into(), epoch.secret.clone().into()],
    );
    epoch
}

/// `sync.record_pass()`: the recording half of a pass. Called by
/// `sync.relay()`, which gives it its transaction; answers what it did.
#[pg_extern(volatile)]
fn record_pass() -> pgrx::JsonB {
    // Nothing runs on a database that is not as the declarations say: the
    // refusal names every problem and what fixes it.
    catalog::check_before_relay();
    // A pass runs many short statements over scratch tables whose sizes the
    // planner guesses: compiling them (JIT) costs more than running them.
    db::run("SELECT set_config('jit', 'off', true)");
    let mut steps = Steps::start();
    let epoch = current_epoch();
    let observed = observe::observe_replicas();
    db::run_with(PROVISION_OTHER_EPOCHS, &[to_pg(epoch.id).into()]);
    let redeclared = provision_all_if_redeclared();
    steps.end("observe");
    let tables = catalog::declared_tables();
    // A relay that starts tries again whatever was set aside: a deploy may
    // have fixed it.
    let starts = !RELAYED_IN_THIS_SESSION.swap(true, Ordering::Relaxed);
    let notes = plan::plan(&tables, i64::from(settings::NOTES_PER_PASS.get()), starts);
    steps.end("plan");
    let cohorts = record::form_cohorts();
    steps.end("cohorts");
    load::load(&tables, cohorts);
    steps.end("load");
    let recorded = record::record(&tables, &epoch, settings::limits(), &mut steps);
    steps.end("record");
    db::run(DELETE_PLANNED_NOTES);
    db::run(DROP_UNCARRIED_BODIES);
    drop_pass_tables();
    steps.end("finish");
    let mut summary = json!({
        "notes": notes,
        "became_live": observed.became_live,
        "forgotten": observed.forgotten,
        "provisioned": recorded.provisioned,
        "messages": recorded.messages,
        "bodies": recorded.bodies,
        "redeclared": redeclared,
        "set_aside": db::one::<i64>("SELECT count(*) FROM sync.quarantine", &[]).unwrap_or(0),
    });
    if settings::PASS_TIMINGS.get() {
        summary["took_ms"] = steps.into_json();
    }
    pgrx::JsonB(summary)
}
