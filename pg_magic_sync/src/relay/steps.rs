//! How long each step of a pass took, for the pass's summary: what an
//! operator looks at when a pass is slow.

use std::time::Instant;

use serde_json::{Map, Value};

pub struct Steps {
    last: Instant,
    took: Map<String, Value>,
}

impl Steps {
    pub fn start() -> Steps {
        Steps {
            last: Instant::now(),
            took: Map::new(),
        }
    }

    /// Ends the step `name`: the time since the last step ended.
    pub fn end(&mut self, name: &str) {
        let now = Instant::now();
        let ms = (now - self.last).as_secs_f64() * 1000.0;
        self.took
            .insert(name.to_owned(), Value::from((ms * 10.0).round() / 10.0));
        self.last = now;
    }

    /// Adds time spent on `name` within a step (work done piecemeal, such as
    /// writing what a pass records a few bodies at a time).
    pub fn add(&mut self, name: &str, spent: std::time::Duration) {
        let ms = spent.as_secs_f64() * 1000.0;
        let total = self.took.get(name).and_then(Value::as_f64).unwrap_or(0.0) + ms;
        self.took
            .insert(name.to_owned(), Value::from((total * 10.0).round() / 10.0));
    }

    /// Milliseconds per step.
    pub fn into_json(self) -> Value {
        Value::Object(self.took)
    }
}
