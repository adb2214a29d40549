//! The request channel: text messages on the link's socket, beside the
//! binary frames (aweft section 6), each a JSON object with a `type`.
//! Topics are named by the sender's number, as in frames. A request
//! refused is answered with `refused`, and never ends the link.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// Device to gateway: the replica committed the commit `seq` the
    /// gateway sent on its topic (protocol 5.1): the next may come.
    Ack {
        topic: u64,
        seq: u64,
    },
    /// Either way: are you there? Answered by `pong` with the same id.
    Ping {
        id: u64,
    },
    Pong {
        id: u64,
    },
    /// Device to gateway: one more credential for this link, for a
    /// device that cannot set a header (a browser).
    Credential {
        token: String,
    },
    /// Gateway to device: the credential was taken; it allows `replica`.
    Allowed {
        replica: String,
    },
    /// Gateway to device: the commit `seq` of the device's topic was filed
    /// (the server's transaction committed). `topic` is the gateway's
    /// number for it.
    Taken {
        topic: u64,
        seq: u64,
    },
    /// Gateway to device: a frame or request refused, the link going on.
    Refused {
        reason: String,
        message: String,
        /// The topic the refused frame or request named, as its sender
        /// numbered it, when it named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        topic: Option<u64>,
    },
}

impl Request {
    /// The request's text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("a request prints")
    }

    /// Reads a request; `None` for text that is no request of the mapping.
    pub fn from_text(text: &str) -> Option<Request> {
        serde_json::from_str(text).ok()
    }

    pub fn refused(reason: &str, message: impl Into<String>, topic: Option<u64>) -> Request {
        Request::Refused {
            reason: reason.to_owned(),
            message: message.into(),
            topic,
        }
    }
}
