//! The six frames of aweft's replication protocol v1 (its section 5), as
//! values of `value.rs`: an array whose element 0 is the kind.
//!
//! ```text
//! open     [0, topic, name, root id | null, root kind | null, want]
//! state    [1, topic, commit | null]
//! commits  [2, topic, first sequence, [commit, ...]]
//! refused  [3, topic, sequence, [[code, message, [step, ...] | null], ...]]
//! leave    [4, topic]
//! fault    [5, topic | 0, reason, message]
//! ```
//!
//! Reading a frame has two ways to fail, and the link treats them apart:
//! bytes that are no value of the format end the link (section 5, last
//! rule); a value of the wrong shape is refused with `bad-frame`, and the
//! link goes on.

use super::value::{Undecodable, Value, LARGEST_EXACT};

/// The kind of the document an end holds under a topic's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootKind {
    Object,
    Array,
    Map,
}

impl RootKind {
    fn number(self) -> i64 {
        match self {
            RootKind::Object => 0,
            RootKind::Array => 1,
            RootKind::Map => 2,
        }
    }

    fn from_number(n: i64) -> Option<RootKind> {
        match n {
            0 => Some(RootKind::Object),
            1 => Some(RootKind::Array),
            2 => Some(RootKind::Map),
            _ => None,
        }
    }
}

/// What an end holds under a name: its root's id and kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    pub id: Vec<u8>,
    pub kind: RootKind,
}

/// Why a commit was refused: a code, words, and where, when the refusing
/// end could tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    pub code: String,
    pub message: String,
    pub path: Option<Vec<String>>,
}

impl Reason {
    pub fn new(code: &str, message: impl Into<String>) -> Reason {
        Reason {
            code: code.to_owned(),
            message: message.into(),
            path: None,
        }
    }
}

/// One frame. Topic numbers are the sender's (section 2), from 1; a fault
/// names topic 0 for the link itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    Open {
        topic: u64,
        name: String,
        /// `None`: the sender holds nothing under the name.
        root: Option<Root>,
        want: bool,
    },
    State {
        topic: u64,
        /// `None`: the sender's document is empty.
        commit: Option<Vec<u8>>,
    },
    Commits {
        topic: u64,
        first: u64,
        commits: Vec<Vec<u8>>,
    },
    Refused {
        topic: u64,
        seq: u64,
        reasons: Vec<Reason>,
    },
    Leave {
        topic: u64,
    },
    Fault {
        topic: u64,
        reason: String,
        message: String,
    },
}

/// Why bytes are not a frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotAFrame {
    /// No value of the format: the link ends.
    #[error("the bytes do not decode ({reason}): {0}", reason = .0.reason())]
    Undecodable(Undecodable),
    /// A value of the wrong shape: refused with `bad-frame`.
    #[error("bad-frame: {0}")]
    BadFrame(&'static str),
}

impl NotAFrame {
    /// The reason's name: `bad-frame`, or the format's for bytes that do
    /// not decode.
    pub fn reason(&self) -> &'static str {
        match self {
            NotAFrame::Undecodable(why) => why.reason(),
            NotAFrame::BadFrame(_) => "bad-frame",
        }
    }

    /// Whether the link ends on it (section 5, last rule).
    pub fn ends_the_link(&self) -> bool {
        matches!(self, NotAFrame::Undecodable(_))
    }
}

const OPEN: i64 = 0;
const STATE: i64 = 1;
const COMMITS: i64 = 2;
const REFUSED: i64 = 3;
const LEAVE: i64 = 4;
const FAULT: i64 = 5;

impl Frame {
    /// The topic number the frame carries (0 for a fault about the link).
    pub fn topic(&self) -> u64 {
        match self {
            Frame::Open { topic, .. }
            | Frame::State { topic, .. }
            | Frame::Commits { topic, .. }
            | Frame::Refused { topic, .. }
            | Frame::Leave { topic }
            | Frame::Fault { topic, .. } => *topic,
        }
    }

    /// The frame's bytes.
    pub fn encode(&self) -> Vec<u8> {
        self.to_value().encode()
    }

    pub fn to_value(&self) -> Value {
        let int = |n: u64| Value::Int(n as i64);
        let text = |t: &str| Value::Text(t.to_owned());
        let items = match self {
            Frame::Open {
                topic,
                name,
                root,
                want,
            } => {
                let (id, kind) = match root {
                    Some(root) => (
                        Value::Bytes(root.id.clone()),
                        Value::Int(root.kind.number()),
                    ),
                    None => (Value::Null, Value::Null),
                };
                vec![
                    Value::Int(OPEN),
                    int(*topic),
                    text(name),
                    id,
                    kind,
                    Value::Bool(*want),
                ]
            }
            Frame::State { topic, commit } => vec![
                Value::Int(STATE),
                int(*topic),
                commit.clone().map_or(Value::Null, Value::Bytes),
            ],
            Frame::Commits {
                topic,
                first,
                commits,
            } => vec![
                Value::Int(COMMITS),
                int(*topic),
                int(*first),
                Value::Array(commits.iter().cloned().map(Value::Bytes).collect()),
            ],
            Frame::Refused {
                topic,
                seq,
                reasons,
            } => vec![
                Value::Int(REFUSED),
                int(*topic),
                int(*seq),
                Value::Array(reasons.iter().map(reason_value).collect()),
            ],
            Frame::Leave { topic } => vec![Value::Int(LEAVE), int(*topic)],
            Frame::Fault {
                topic,
                reason,
                message,
            } => vec![Value::Int(FAULT), int(*topic), text(reason), text(message)],
        };
        Value::Array(items)
    }

    /// Reads a frame from a binary message's bytes.
    pub fn decode(bytes: &[u8]) -> Result<Frame, NotAFrame> {
        let value = Value::decode(bytes).map_err(NotAFrame::Undecodable)?;
        Frame::from_value(value).map_err(NotAFrame::BadFrame)
    }

    /// Reads a frame from a decoded value; the error says what is wrong
    /// with its shape.
    pub fn from_value(value: Value) -> Result<Frame, &'static str> {
        let Value::Array(items) = value else {
            return Err("a frame is an array");
        };
        let Some(Value::Int(kind)) = items.first() else {
            return Err("a frame is a non-empty array whose first element is its kind");
        };
        let arity = match *kind {
            OPEN => 6,
            STATE => 3,
            COMMITS | REFUSED | FAULT => 4,
            LEAVE => 2,
            _ => return Err("the kind is none of the six"),
        };
        if items.len() != arity {
            return Err("the frame has the wrong number of elements for its kind");
        }
        let kind = *kind;
        let mut rest = items.into_iter().skip(1);
        let mut next = || rest.next().expect("the arity was checked");
        if kind == FAULT {
            return Ok(Frame::Fault {
                topic: number(next(), 0, "a fault's topic is a number from 0")?,
                reason: text(next(), "a fault's reason is text")?,
                message: text(next(), "a fault's message is text")?,
            });
        }
        let topic = number(next(), 1, "a topic is a number from 1")?;
        Ok(match kind {
            OPEN => open(topic, next(), next(), next(), next())?,
            STATE => Frame::State {
                topic,
                commit: match next() {
                    Value::Null => None,
                    Value::Bytes(b) => Some(b),
                    _ => return Err("a state's commit is bytes or null"),
                },
            },
            COMMITS => Frame::Commits {
                topic,
                first: number(next(), 1, "a sequence is a number from 1")?,
                commits: commits(next())?,
            },
            REFUSED => Frame::Refused {
                topic,
                seq: number(next(), 1, "a sequence is a number from 1")?,
                reasons: reasons(next())?,
            },
            _ => Frame::Leave { topic },
        })
    }
}

fn reason_value(reason: &Reason) -> Value {
    let path = match &reason.path {
        Some(steps) => Value::Array(steps.iter().cloned().map(Value::Text).collect()),
        None => Value::Null,
    };
    Value::Array(vec![
        Value::Text(reason.code.clone()),
        Value::Text(reason.message.clone()),
        path,
    ])
}

fn number(value: Value, least: u64, wrong: &'static str) -> Result<u64, &'static str> {
    match value {
        Value::Int(n) if n >= least as i64 && n as u64 <= LARGEST_EXACT => Ok(n as u64),
        _ => Err(wrong),
    }
}

fn text(value: Value, wrong: &'static str) -> Result<String, &'static str> {
    match value {
        Value::Text(t) => Ok(t),
        _ => Err(wrong),
    }
}

fn open(
    topic: u64,
    name: Value,
    id: Value,
    kind: Value,
    want: Value,
) -> Result<Frame, &'static str> {
    let name = text(name, "a topic's name is text")?;
    let Value::Bool(want) = want else {
        return Err("want is a boolean");
    };
    let root = match (id, kind) {
        (Value::Null, Value::Null) => None,
        (Value::Bytes(id), Value::Int(kind)) => Some(Root {
            id,
            kind: RootKind::from_number(kind).ok_or("a root kind is 0, 1 or 2")?,
        }),
        (Value::Null, _) | (_, Value::Null) => {
            return Err("a root id and kind are both given or both null")
        }
        (Value::Bytes(_), _) => return Err("a root kind is 0, 1 or 2"),
        _ => return Err("a root id is bytes"),
    };
    if root.is_none() && !want {
        return Err("an end that holds nothing wants the other end's state");
    }
    Ok(Frame::Open {
        topic,
        name,
        root,
        want,
    })
}

fn commits(value: Value) -> Result<Vec<Vec<u8>>, &'static str> {
    let Value::Array(items) = value else {
        return Err("a frame's commits are an array");
    };
    if items.is_empty() {
        return Err("a commits frame carries at least one commit");
    }
    items
        .into_iter()
        .map(|item| match item {
            Value::Bytes(b) => Ok(b),
            _ => Err("a commit is bytes"),
        })
        .collect()
}

fn reasons(value: Value) -> Result<Vec<Reason>, &'static str> {
    let Value::Array(items) = value else {
        return Err("a refused's reasons are an array");
    };
    if items.is_empty() {
        return Err("a refused carries at least one reason");
    }
    items.into_iter().map(reason).collect()
}

fn reason(value: Value) -> Result<Reason, &'static str> {
    let Value::Array(parts) = value else {
        return Err("a reason is an array");
    };
    let [code, message, path]: [Value; 3] = parts
        .try_into()
        .map_err(|_| "a reason is a code, a message and a path")?;
    let path = match path {
        Value::Null => None,
        Value::Array(steps) => Some(
            steps
                .into_iter()
                .map(|step| text(step, "a path is text steps or null"))
                .collect::<Result<_, _>>()?,
        ),
        _ => return Err("a path is text steps or null"),
    };
    Ok(Reason {
        code: text(code, "a reason's code is text")?,
        message: text(message, "a reason's message is text")?,
        path,
    })
}
