//! Replicas that stop moving (sql/stalls.sql): every few seconds the
//! worker asks which stalled replicas' next step is due, and says what it
//! did. The steps themselves are recorded by that query; what is the
//! transport's (over nats, a consumer made again) is carried out by the
//! push (publish/push.rs).

use pgrx::prelude::*;
use uuid::Uuid;

use super::name::NAME;
use super::transaction::{spi_failure, transaction};
use crate::error::Error;
use crate::settings;
use crate::statements::worker::stalls::{LOST, STALL_CHECKS};

/// A step taken with one stalled replica.
pub struct Step {
    pub replica: Uuid,
    /// 1: noticed (over nats, its consumer made again); 2: provisioned
    /// again through a fresh consumer.
    pub step: i64,
    pub messages: i64,
    pub since: String,
    /// Heard since its position stopped: alive, and taking nothing.
    pub heard: bool,
}

/// Takes the steps due with stalled replicas, and says each in the log: a
/// warning (beside its alarm) for a replica heard while stalled, a line of
/// the log for one that may only be away.
pub fn check() -> Result<Vec<Step>, Error> {
    let stalled_after = f64::from(settings::STALLED_AFTER.get().max(1));
    let taken = transaction(false, || {
        Spi::get_one_with_args::<pgrx::JsonB>(STALL_CHECKS, &[stalled_after.into()])
    })?
    .map_err(|e| spi_failure(STALL_CHECKS, e))?;
    let steps: Vec<Step> = taken
        .and_then(|taken| taken.0.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(step_of)
        .collect();
    for step in &steps {
        say(step);
    }
    Ok(steps)
}

fn step_of(value: &serde_json::Value) -> Option<Step> {
    Some(Step {
        replica: Uuid::try_parse(value["replica"].as_str()?).ok()?,
        step: value["step"].as_i64()?,
        messages: value["messages"].as_i64().unwrap_or(0),
        since: value["since"].as_str().unwrap_or_default().to_owned(),
        heard: value["heard"].as_bool().unwrap_or(false),
    })
}

fn say(step: &Step) {
    let nats = settings::TRANSPORT.get() == settings::Transport::Nats;
    let what = match (step.step, nats) {
        (2, _) => "provisioned again through a fresh consumer",
        (_, true) => "its consumer made again",
        (_, false) => "nothing the server holds keeps it from them: see the device's own log",
    };
    let Step {
        replica,
        messages,
        since,
        ..
    } = step;
    if step.heard || step.step == 2 {
        pgrx::warning!(
            "{NAME}: replica {replica} is stalled: heard, but it has applied nothing since \
             {since} while {messages} message(s) wait for it; {what} (sync.alarms)"
        );
    } else if nats {
        pgrx::log!(
            "{NAME}: replica {replica} has applied nothing since {since} while {messages} \
             message(s) wait for it, and is not heard (away, or stuck): {what}"
        );
    }
}

/// These stalled replicas' messages are gone from the transport: each is
/// provisioned again, with an alarm (sql/stalls.sql). Answers how many
/// were. Runs inside the caller's transaction.
pub fn lost(replicas: &[Uuid]) -> Result<i64, Error> {
    let ids: Vec<pgrx::Uuid> = replicas.iter().map(|r| crate::spi::to_pg(*r)).collect();
    Spi::get_one_with_args::<i64>(LOST, &[ids.into()])
        .map(|n| n.unwrap_or(0))
        .map_err(|e| spi_failure(LOST, e))
}
