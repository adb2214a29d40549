//! What a replica kept up to date is sent: worked out around what changed,
//! never over the whole of what it holds.
//!
//! 1. The rows in question: of the rows it holds, those a change may have
//!    taken out of what it should hold (the rows touched, and what they
//!    pointed at), and then whatever of its rows leaned on those (their
//!    parents, and the rows that follow them). Every other row it holds
//!    stays as recorded.
//! 2. What it keeps: the rows its rules send it among those touched or in
//!    question; the rows in question that a row it holds outside them
//!    points at, or that follow one; then, a round at a time, the parents
//!    and followers of every kept row it lacks or that is in question.
//! 3. The difference: what it keeps and lacks, or holds at an older
//!    version, is sent; the rows in question it does not keep are taken
//!    back.
//!
//! What a row it holds points at is what the version it holds points at:
//! the row as it is, and, for a row with pending notes, what each of them
//! says it pointed at before (`sync_pass_old_pointers`) — a few parents
//! too many at worst, kept one pass longer, never one too few.

use super::snapshot::{closes_over_anything, reach_from_frontier};
use crate::catalog::reach::{row_is, rule_rows, rule_rows_of};
use crate::catalog::table_sql::{key_text_of, quote_literal};
use crate::catalog::{Declared, Rule};
use crate::relay::journal::{self, Among, Journaled};
use crate::relay::scratch;
use crate::spi;
use crate::statements::relay::plan::incremental::{
    CANDIDATES_TOUCHED, CURRENT, FEW_PAIRS_TOUCHED, KEEP_REACHED, PLAN_SENDS,
    PLAN_SENDS_OF_TOUCHED, PLAN_TAKE_BACKS, PLAN_TAKE_BACKS_OF_TOUCHED, QUESTION_HELD_REACHED,
    TOUCHED_AND_HELD, TOUCHED_HELD, TOUCHED_HELD_LOOKED_UP,
};

const CANDIDATES_IN_QUESTION: &str =
    " UNION SELECT replica, table_name, key FROM sync_pass_question";
/// The condition that the row `alias` can go. A row that cannot is not
/// judged by its table's rule: judging it may be what failed (a user's
/// function in the active view, a key that does not read).
fn not_blocked(alias: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM sync_pass_blocked b \
         WHERE b.table_name = {alias}.table_name AND b.key = {alias}.key)"
    )
}

/// Plans the changes of every replica kept up to date. Answers how many
/// rows it planned.
pub fn plan_changes(tables: &[Declared], journaled: &Journaled) -> u64 {
    if spi::run_counting(CURRENT, &[]) == 0 {
        return 0;
    }
    let untouched = spi::one::<bool>("SELECT NOT EXISTS (SELECT 1 FROM sync_pass_touched)", &[]);
    if untouched.unwrap_or(true) {
        return 0;
    }
    journal::split(journaled, Among::Current);
    let closes = closes_over_anything(tables);
    let nested_loops = gather_questions(tables, closes);
    keep(tables, journaled, closes);
    if closes {
        scratch::analyze(&["sync_pass_want", "sync_pass_question"]);
    } else {
        scratch::analyze(&["sync_pass_want"]);
    }
    let (sends, take_backs) = if closes {
        (PLAN_SENDS, PLAN_TAKE_BACKS)
    } else {
        (PLAN_SENDS_OF_TOUCHED, PLAN_TAKE_BACKS_OF_TOUCHED)
    };
    let planned = spi::run_counting(sends, &[]) + spi::run_counting(take_backs, &[]);
    if let Some(setting) = nested_loops {
        spi::run_with(
            "SELECT set_config('enable_nestloop', $1, true)",
            &[setting.as_str().into()],
        );
    }
    planned
}

/// Held rows touched beyond which the rest of the planning runs without
/// nested loops. The planner sizes a join of the scratch tables on
/// (replica, table, key) at one row (it multiplies the three columns'
/// selectivities), and so runs the anti-joins after it as nested loops over
/// the other table: with a declaration change touching 5,950 held orders
/// of 10 registers, each such statement took 7 to 22 s (a minute of
/// planning, where provisioning them all took 2.6 s); hashed, milliseconds.
/// Below it, the nested loops over a few rows are what is cheapest.
const MANY_HELD_TOUCHED: i64 = 1_000;

/// Whether this pass looks up what is held of the rows touched a pair at a
/// time (FEW_PAIRS_TOUCHED).
pub(crate) fn few_pairs_touched() -> bool {
    spi::one::<bool>(FEW_PAIRS_TOUCHED, &[]).unwrap_or(false)
}

/// Step 1: the rows in question, closed over what leaned on them. With
/// many held rows touched, turns nested loops off for the rest of the
/// planning (`MANY_HELD_TOUCHED`), and answers the setting to put back.
fn gather_questions(tables: &[Declared], closes: bool) -> Option<String> {
    if few_pairs_touched() {
        spi::run(TOUCHED_HELD_LOOKED_UP);
    } else {
        spi::run(TOUCHED_HELD);
    }
    scratch::analyze(&["sync_pass_touched_held"]);
    let many = spi::one::<i64>("SELECT count(*) FROM sync_pass_touched_held", &[])
        .is_some_and(|n| n > MANY_HELD_TOUCHED);
    let nested_loops = match many {
        true => {
            let setting = spi::one::<String>("SELECT current_setting('enable_nestloop')", &[])
                .unwrap_or_else(|| "on".to_owned());
            spi::run("SELECT set_config('enable_nestloop', 'off', true)");
            Some(setting)
        }
        false => None,
    };
    // Without rows leaning on others, the rows in question are the touched
    // rows held, read from sync_pass_touched_held where they are asked of.
    if !closes {
        return nested_loops;
    }
    spi::run(TOUCHED_AND_HELD);
    spi::run("INSERT INTO sync_pass_frontier SELECT * FROM sync_pass_question");
    let kept: Vec<String> = tables
        .iter()
        .filter(|t| kept_by_their_rule(t))
        .map(|t| t.name.clone())
        .collect();
    loop {
        reach_held_versions(tables);
        scratch::empty("sync_pass_frontier");
        spi::run_with(QUESTION_HELD_REACHED, &[kept.clone().into()]);
        scratch::empty("sync_pass_reached");
        if spi::one::<i64>("SELECT count(*) FROM sync_pass_frontier", &[]).unwrap_or(0) == 0 {
            break;
        }
    }
    nested_loops
}

/// Whether every replica keeps every row of the table by its rule alone
/// (broadcast, no active view, no partition): whatever leaned on a row of
/// it, the row stays, and so does what it leans on. Such a row reached
/// from the rows in question is not put in question: only a change of its
/// own (touched) asks of it. With a rule change over 100 registers' orders,
/// the products they point at were in question for every register, and
/// with them their nutrition and brands: the whole of what each held
/// planned again (150,000 rows where 59,500 orders were asked of).
fn kept_by_their_rule(table: &Declared) -> bool {
    table.mirror.goes_down()
        && table.rule == Rule::Broadcast
        && table.active.is_none()
        && table.partition.is_none()
}

/// What the held versions of the frontier's rows point at, and the rows
/// whose held versions follow them, as `sync_pass_reached`: the rows as they
/// are, and what pending notes say they pointed at before.
fn reach_held_versions(tables: &[Declared]) {
    reach_from_frontier(tables);
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        for (index, reference) in table.references.iter().enumerate() {
            // What the frontier's rows pointed at before their changes.
            spi::run(&format!(
                "INSERT INTO sync_pass_reached \
                 SELECT f.replica, o.parent, o.parent_key FROM sync_pass_frontier f \
                 JOIN sync_pass_old_pointers o ON o.table_name = f.table_name AND o.key = f.key \
                 WHERE o.table_name = {name} AND o.reference = {index}",
                name = quote_literal(&table.name),
            ));
            if table.followed() == Some(reference) {
                // The rows that followed the frontier's rows before they
                // changed.
                spi::run(&format!(
                    "INSERT INTO sync_pass_reached \
                     SELECT f.replica, o.table_name, o.key FROM sync_pass_frontier f \
                     JOIN sync_pass_old_pointers o ON o.parent = f.table_name \
                       AND o.parent_key = f.key \
                     WHERE o.table_name = {name} AND o.reference = {index}",
                    name = quote_literal(&table.name),
                ));
            }
        }
    }
}

/// Step 2: what each replica keeps.
fn keep(tables: &[Declared], journaled: &Journaled, closes: bool) {
    let blocked =
        spi::one::<bool>("SELECT EXISTS (SELECT 1 FROM sync_pass_blocked)", &[]).unwrap_or(false);
    if !closes {
        keep_touched(tables, journaled, blocked);
        return;
    }
    let not_blocked = match blocked {
        true => format!(" WHERE {}", not_blocked("c")),
        false => String::new(),
    };
    spi::run(&format!(
        "INSERT INTO sync_pass_candidates SELECT c.* \
         FROM ({CANDIDATES_TOUCHED}{CANDIDATES_IN_QUESTION}) AS c{not_blocked}"
    ));
    scratch::analyze(&["sync_pass_candidates", "sync_pass_question"]);
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        let current = journal::planned_for(table, journaled, Among::Current);
        if let Some(rows) = rule_rows(table, current, Some("sync_pass_candidates")) {
            spi::run(&format!(
                "INSERT INTO sync_pass_want SELECT * FROM ({rows}) AS s"
            ));
        }
    }
    keep_what_others_lean_on(tables);
    keep_followers_of_what_stays(tables);
    // What cannot go is never kept: it is taken back where it is held.
    if blocked {
        spi::run(
            "DELETE FROM sync_pass_want w USING sync_pass_blocked b \
             WHERE w.table_name = b.table_name AND w.key = b.key",
        );
    }
    // The rows kept that the replica lacks, and those in question: as two
    // joins, since an OR of the two subqueries ran the second for each row
    // kept, reading the rows in question whole each time (KEEP_REACHED).
    let held = "EXISTS (SELECT 1 FROM sync.held_recorded h WHERE h.replica = w.replica \
                AND h.table_name = w.table_name AND h.key = w.key AND h.leaving IS NULL)";
    spi::run(&format!(
        "INSERT INTO sync_pass_frontier SELECT w.* FROM sync_pass_want w WHERE NOT {held} \
         UNION ALL SELECT w.* FROM sync_pass_want w WHERE {held} \
            AND EXISTS (SELECT 1 FROM sync_pass_question q WHERE q.replica = w.replica \
                        AND q.table_name = w.table_name AND q.key = w.key)"
    ));
    loop {
        reach_from_frontier(tables);
        scratch::empty("sync_pass_frontier");
        spi::run(KEEP_REACHED);
        scratch::empty("sync_pass_reached");
        if spi::one::<i64>("SELECT count(*) FROM sync_pass_frontier", &[]).unwrap_or(0) == 0 {
            break;
        }
    }
}

/// Step 2 when no row leans on another: what the rules send of the rows
/// touched, asked of each row touched for every replica once (a pair at a
/// time, each row would be read once per replica), and of each row touched
/// for one replica as that pair. A row that cannot go is not judged
/// (`not_blocked`), so it is kept nowhere.
fn keep_touched(tables: &[Declared], journaled: &Journaled, blocked: bool) {
    let not_blocked = match blocked {
        true => format!(" AND {}", not_blocked("t")),
        false => String::new(),
    };
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        let name = quote_literal(&table.name);
        let for_every = format!(
            "(SELECT DISTINCT table_name, key FROM sync_pass_touched t \
             WHERE t.replica IS NULL AND t.table_name = {name}{not_blocked})"
        );
        let for_one = format!(
            "(SELECT DISTINCT replica, table_name, key FROM sync_pass_touched t \
             WHERE t.replica IS NOT NULL AND t.table_name = {name}{not_blocked})"
        );
        let current = journal::planned_for(table, journaled, Among::Current);
        let every = rule_rows_of(table, current, &for_every);
        let one = rule_rows(table, current, Some(&for_one));
        if let (Some(every), Some(one)) = (every, one) {
            spi::run(&format!(
                "INSERT INTO sync_pass_want \
                 SELECT * FROM ({every}) AS s UNION ALL SELECT * FROM ({one}) AS s"
            ));
        }
    }
}

/// The rows in question that a row the replica holds outside them points
/// at, or that follow one: kept, as they are held, whatever else changed.
///
/// Each written as joins from the rows held: asked as "some child of the
/// rows in question, held outside them, points at this one", the children
/// of every row in question were read for every replica, whoever held them
/// (a product in question for 100 registers met every order of it, 5.9
/// million rows, 32 s of a 44 s plan), and only then narrowed to those held.
fn keep_what_others_lean_on(tables: &[Declared]) {
    let outside = "NOT EXISTS (SELECT 1 FROM sync_pass_question q2 WHERE q2.replica = h.replica \
                   AND q2.table_name = h.table_name AND q2.key = h.key)";
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        for (index, reference) in table.references.iter().enumerate() {
            let name = quote_literal(&table.name);
            let parent = quote_literal(&reference.parent);
            // Children as they are, and as pending notes say they were.
            spi::run(&format!(
                "INSERT INTO sync_pass_want \
                 SELECT q.replica, q.table_name, q.key \
                 FROM sync.held_recorded h \
                 JOIN {rel} AS t ON {is_h} \
                 JOIN sync_pass_question q ON q.replica = h.replica AND q.table_name = {parent} \
                      AND q.key = {parent_key} \
                 WHERE h.table_name = {name} AND h.leaving IS NULL AND {outside} \
                 UNION \
                 SELECT q.replica, q.table_name, q.key \
                 FROM sync_pass_old_pointers o \
                 JOIN sync_pass_question q ON q.table_name = o.parent AND q.key = o.parent_key \
                 JOIN sync.held_recorded h ON h.replica = q.replica AND h.table_name = o.table_name \
                      AND h.key = o.key AND h.leaving IS NULL \
                 WHERE o.table_name = {name} AND o.reference = {index} AND {outside}",
                rel = table.relation,
                is_h = row_is(table, "t", "h.key"),
                parent_key = key_text_of("t", &reference.columns),
            ));
            if table.followed() == Some(reference) {
                // A row in question that follows a row held outside.
                let held_outside = |alias: &str| {
                    format!(
                        "EXISTS (SELECT 1 FROM sync.held_recorded h WHERE h.replica = {alias}.replica \
                         AND h.table_name = {alias}.table_name AND h.key = {alias}.key AND h.leaving IS NULL) \
                         AND NOT EXISTS (SELECT 1 FROM sync_pass_question q2 WHERE q2.replica = {alias}.replica \
                         AND q2.table_name = {alias}.table_name AND q2.key = {alias}.key)"
                    )
                };
                spi::run(&format!(
                    "INSERT INTO sync_pass_want \
                     SELECT q.replica, q.table_name, q.key FROM sync_pass_question q \
                     WHERE q.table_name = {name} AND EXISTS ( \
                         SELECT 1 FROM ({followed}) AS x(replica, table_name, key) \
                         WHERE x.replica = q.replica AND x.key = q.key AND x.table_name = q.table_name)",
                    followed = followed_held_outside(table, index, &held_outside("p")),
                ));
            }
        }
    }
}

/// A touched row of a following table goes where its parent is: kept when
/// the replica holds its parent outside the rows in question (a parent that
/// is kept otherwise brings its followers along in the rounds that follow).
fn keep_followers_of_what_stays(tables: &[Declared]) {
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        let Some(followed) = table.followed() else {
            continue;
        };
        spi::run(&format!(
            "INSERT INTO sync_pass_want \
             SELECT c.replica, c.table_name, c.key FROM sync_pass_candidates c \
             JOIN {rel} AS t ON c.table_name = {name} AND {is_c} \
             JOIN sync.held_recorded h ON h.replica = c.replica AND h.table_name = {parent} \
                  AND h.key = {parent_key} AND h.leaving IS NULL \
             WHERE NOT EXISTS (SELECT 1 FROM sync_pass_question q WHERE q.replica = h.replica \
                               AND q.table_name = h.table_name AND q.key = h.key)",
            rel = table.relation,
            name = quote_literal(&table.name),
            is_c = row_is(table, "t", "c.key"),
            parent = quote_literal(&followed.parent),
            parent_key = key_text_of("t", &followed.columns),
        ));
    }
}

/// The rows in question of a following table whose parent (as it is, or
/// as a pending note says it was) is held outside the rows in question.
fn followed_held_outside(table: &Declared, index: usize, outside: &str) -> String {
    let reference = &table.references[index];
    let name = quote_literal(&table.name);
    format!(
        "SELECT q.replica, q.table_name, q.key FROM sync_pass_question q \
         JOIN {rel} AS t ON q.table_name = {name} AND {is_q} \
         JOIN LATERAL (SELECT q.replica, {parent} AS table_name, {parent_key} AS key) AS p ON true \
         WHERE {outside} \
         UNION \
         SELECT q.replica, q.table_name, q.key FROM sync_pass_question q \
         JOIN sync_pass_old_pointers o ON o.table_name = q.table_name AND o.key = q.key \
         JOIN LATERAL (SELECT q.replica, o.parent AS table_name, o.parent_key AS key) AS p ON true \
         WHERE q.table_name = {name} AND o.reference = {index} AND {outside}",
        rel = table.relation,
        is_q = row_is(table, "t", "q.key"),
        parent = quote_literal(&reference.parent),
        parent_key = key_text_of("t", &reference.columns),
    )
}
