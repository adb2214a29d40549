//! Writing an answer: JSON for programs, indented lines for people. A
//! reader that stops reading early (`show DB | head`) is no failure.

use std::io::{self, Write};

use serde_json::Value;

/// Writes the answer to stdout, all of it, flushed.
pub fn write(answer: &Value, as_json: bool) -> io::Result<()> {
    let text = if as_json {
        let mut text = serde_json::to_string_pretty(answer).expect("a JSON value prints");
        text.push('\n');
        text
    } else {
        human(answer, 0)
    };
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// The reader closed the pipe: it has read all it wanted.
pub fn reader_left(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::BrokenPipe
}

/// A line on stderr; one that cannot be written is let go, like stdout's.
pub fn say(text: &str) {
    let _ = writeln!(io::stderr().lock(), "{text}");
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
        Value::Null | Value::Array(_) | Value::Object(_) => "none".into(),
        other => other.to_string(),
    }
}
