//! The dashboard's fixtures: what the reads answer in the states the
//! engine's golden files (tests/golden/status/) do not show: every kind of
//! problem in the health (drift too), a replica's backlog by table, and
//! the wishes in every state they take here. dashboard/scripts/contract.mjs writes the
//! package's types from both, so these hold the types' every field.
//! `MAGIC_SYNC_BLESS=1` writes them afresh; otherwise the answers are
//! held to them.

mod fleet;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fleet::Fleet;
use serde_json::Value;

/// An answer as a fixture holds it: times (and what else changes from run
/// to run: a wish's versions, made of the times its row was written)
/// masked, each register's id as its name, any other id as its
/// place among them.
fn masked(value: &Value, names: &BTreeMap<String, String>, others: &mut Vec<String>) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let varies = k == "now"
                        || k == "since"
                        || k == "at"
                        || k == "message"
                        || k == "oldest_age_seconds"
                        || k == "version"
                        || k == "answered"
                        || k.ends_with("_at")
                        || k.ends_with("_since");
                    let v = if varies && !v.is_null() {
                        Value::String("<masked>".into())
                    } else {
                        masked(v, names, others)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| masked(v, names, others)).collect())
        }
        Value::String(s) if uuid::Uuid::parse_str(s).is_ok() => match names.get(s) {
            Some(name) => Value::String(name.clone()),
            None => {
                let n = others.iter().position(|o| o == s).unwrap_or_else(|| {
                    others.push(s.clone());
                    others.len() - 1
                });
                Value::String(format!("<id {n}>"))
            }
        },
        other => other.clone(),
    }
}

struct Fixtures {
    dir: PathBuf,
    bless: bool,
    names: BTreeMap<String, String>,
    differ: Vec<String>,
}

impl Fixtures {
    fn hold(&mut self, name: &str, answer: &Value) {
        let text = serde_json::to_string_pretty(&masked(answer, &self.names, &mut Vec::new()))
            .unwrap()
            + "\n";
        let file = self.dir.join(format!("{name}.json"));
        if self.bless {
            std::fs::create_dir_all(&self.dir).unwrap();
            std::fs::write(&file, &text).unwrap();
            return;
        }
        match std::fs::read_to_string(&file) {
            Ok(fixture) if fixture == text => {}
            Ok(fixture) => self.differ.push(format!(
                "{}:\n--- fixture\n{fixture}\n--- now\n{text}",
                file.display()
            )),
            Err(e) => self.differ.push(format!("{}: {e}", file.display())),
        }
    }
}

#[test]
fn the_reads_answer_every_kind_of_problem_and_wish_as_the_dashboards_fixtures_say() {
    let mut fleet = Fleet::open();
    let mut fixtures = Fixtures {
        dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures"),
        bless: std::env::var_os("MAGIC_SYNC_BLESS").is_some(),
        names: fleet.names(),
        differ: Vec::new(),
    };

    // Every register in a state of its own (the patio's stalled: heard,
    // taking nothing), and wishes in each state:
    // applied, refused (too long for the printer), waiting (the printer is
    // off) and, for the register that takes nothing, pending.
    fleet.wish("Front", "Welcome back");
    fleet.wish("Bar", "A footer far too long for the printer");
    fleet.wish("Terrace", "See you later");
    fleet.bar_refuses_a_row();
    fleet.wish("Back", "Open all night");
    fleet.catching_up("Back");
    fleet.stalled("Patio");
    fleet.unreachable("Terrace");
    fleet.awaiting_fix("Kiosk");
    assert_eq!(fleet.state_of("Front"), "synced");
    assert_eq!(fleet.state_of("Back"), "catching_up");
    assert_eq!(fleet.state_of("Terrace"), "unreachable");
    assert_eq!(fleet.state_of("Kiosk"), "awaiting_fix");
    assert_eq!(fleet.state_of("Bar"), "awaiting_fix");
    assert_eq!(fleet.state_of("Patio"), "stalled");
    let overview = fleet.read("SELECT sync.overview()");
    fixtures.hold("overview-every-problem", &overview);
    let listing = fleet.read("SELECT sync.listing()");
    fixtures.hold("listing-every-problem", &listing);
    let health = fleet.read("SELECT sync.health()");
    fixtures.hold("health-every-problem", &health);
    let wishes = fleet.read("SELECT sync.wishes()");
    fixtures.hold("wishes-every-state", &wishes);

    // A row no message can carry: set aside on the server.
    fleet.a_row_too_large();
    let health = fleet.read("SELECT sync.health()");
    fixtures.hold("health-set-aside", &health);

    // The database differs from the declarations: every replica awaits the
    // fix.
    fleet.drift();
    let health = fleet.read("SELECT sync.health()");
    fixtures.hold("health-drift", &health);
    let overview = fleet.read("SELECT sync.overview()");
    fixtures.hold("overview-drift", &overview);

    assert!(
        fixtures.differ.is_empty(),
        "the reads answer otherwise than the dashboard's fixtures (MAGIC_SYNC_BLESS=1 writes \
         them again):\n{}",
        fixtures.differ.join("\n")
    );
}
