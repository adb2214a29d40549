//! One relay pass, run by `CALL sync.relay()` (sql/relay.sql) in a
//! REPEATABLE READ transaction that holds the relay's lock: check the
//! database against the declarations, observe the replicas, plan, form
//! cohorts, load, record, and mark the notes done, all in that one
//! transaction, before anything is published. The modules below are its
//! steps, in that order.

pub mod scratch;
pub mod observe;
pub mod journal;
pub mod redeclared;
pub mod columns_gained;
pub mod plan;
pub mod cohorts;
pub mod load;
pub mod record;
pub mod steps;

use serde_json::json;

use crate::catalog::{self, Declarations};
use crate::declare::drift;
use crate::epochs;
use crate::relay::steps::Steps;
use crate::settings;
use crate::spi::{self, to_pg};
use crate::statements::relay::{
    DELETE_PLANNED_NOTES, DROP_UNCARRIED_BODIES, PASS_SETTINGS, PROVISION_OTHER_EPOCHS,
};

/// `sync_internal.record_pass()`: the recording half of a pass. Called by
/// `sync.relay()`, which gives it its transaction; answers what it did.
pub fn record_pass(starts: bool, notes: Option<i32>) -> serde_json::Value {
    let mut steps = Steps::start();
    let declarations = Declarations::read();
    // Nothing is planned of what is not as the declarations say: a table
    // that differs (and what cannot be planned without it) is stopped, and
    // every other keeps flowing; a problem of the whole relay refuses the
    // pass, naming every problem and what fixes it.
    let stopped = drift::check_before_pass(&declarations);
    steps.end("check");
    // One statement for the pass's own settings, all for its transaction:
    // - jit off: a pass runs many short statements over scratch tables
    //   whose sizes the planner guesses; compiling them costs more than
    //   running them;
    // - a statistics target of 10: its statistics are of scratch tables of
    //   unique keys, whose sizes are what the planner needs, and a sample of
    //   3,000 rows tells them for a fifth of the cost;
    // - synchronous commit: what a pass records is sent once it commits, and
    //   a replica that applied a message the server then lost in a crash
    //   (synchronous_commit off) would find the server gone back, and every
    //   replica provisioned again.
    spi::run(PASS_SETTINGS);
    scratch::begin();
    let epoch = epochs::current();
    let observed = observe::observe_replicas(declarations.replicas.as_ref());
    spi::run_with(PROVISION_OTHER_EPOCHS, &[to_pg(epoch.id).into()]);
    let redeclared = redeclared::after_declarations_changed(&declarations, &stopped);
    steps.end("observe");
    let all_tables = catalog::wishes::with_wishes(declarations.declared());
    // Which tables are journaled is a matter of the declarations, whatever
    // is stopped: a stopped table keeps its journal, planned nothing.
    let journaled = journal::Journaled::of(&all_tables);
    let tables: Vec<_> = all_tables
        .into_iter()
        .filter(|t| !stopped.contains(&t.name))
        .collect();
    // Replicas whose build gained a column the server sends are sent their
    // rows of that table again (a follower parts first, before the journal
    // is prepared).
    columns_gained::send_again(&journaled, &stopped);
    journal::prepare(&journaled, epoch.id, redeclared.any());
    // A relay that starts tries again whatever was set aside: a deploy may
    // have fixed it.
    let batch = notes
        .unwrap_or_else(|| settings::NOTES_PER_PASS.get())
        .max(0);
    let let_go = redeclared.let_go();
    let planned = plan::plan(
        &tables,
        &journaled,
        i64::from(batch),
        starts,
        &stopped,
        &let_go,
        &redeclared.resent_as_held(),
        !redeclared.any() && let_go.is_empty(),
    );
    steps.end("plan");
    // Nothing planned: no cohort, nothing to load or record.
    let cohorts = if planned.anything { cohorts::form() } else { 0 };
    steps.end("cohorts");
    let recorded = if cohorts > 0 {
        load::load(&tables, cohorts);
        steps.end("load");
        record::record(
            &tables,
            &let_go,
            &journaled,
            &epoch,
            settings::limits(),
            &mut steps,
        )
    } else {
        record::Recorded::default()
    };
    plan::behind::after_record(planned.behind, &journaled);
    steps.end("record");
    if !recorded.unsendable.is_empty() {
        let rows: Vec<serde_json::Value> =
            recorded.unsendable.iter().map(|r| r.to_json()).collect();
        return json!({ "unsendable": rows });
    }
    redeclared::report(&redeclared, recorded.provisioned);
    if planned.notes > 0 {
        spi::run(DELETE_PLANNED_NOTES);
    }
    spi::run(DROP_UNCARRIED_BODIES);
    scratch::end();
    steps.end("finish");
    let mut summary = json!({
        "notes": planned.notes,
        "became_live": observed.became_live,
        "forgotten": observed.forgotten,
        "provisioned": recorded.provisioned,
        "messages": recorded.messages,
        "bodies": recorded.bodies,
        "redeclared": redeclared.any(),
        "declared_first": redeclared.first_declared(),
        "stopped": stopped,
        "set_aside": spi::one::<i64>("SELECT count(*) FROM sync.quarantine", &[]).unwrap_or(0),
    });
    if settings::PASS_TIMINGS.get() {
        summary["took_ms"] = steps.into_json();
    }
    summary
}
