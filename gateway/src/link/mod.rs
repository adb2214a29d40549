//! The link between the gateway and its devices: aweft's replication
//! protocol v1 (frames in `frame`, their bytes in `value`) with
//! magic_sync's messages as the commits it carries, and the text requests
//! that ride beside it on the same socket (`request`). Both ends use this
//! module: the gateway, and the replica library's WebSocket client.
//!
//! A topic is a replica. Its name is `magic_sync/` and the replica's id;
//! its root is the replica's id (16 bytes) as an object. The mapping is
//! written down in docs/src/aweft-link.md.

pub mod frame;
pub mod request;
pub mod value;

use uuid::Uuid;

pub use frame::{Frame, NotAFrame, Reason, Root, RootKind};
pub use request::Request;

/// What a topic's name begins with; the replica's id follows.
pub const NAME_PREFIX: &str = "magic_sync/";

/// The fault and refusal reasons of the mapping, beside aweft's own
/// (`bad-frame`, `no-topic`, `root-mismatch`, `no-document`).
pub mod reasons {
    /// A frame of the wrong shape (aweft section 5).
    pub const BAD_FRAME: &str = "bad-frame";
    /// A frame about a topic that is not open (aweft section 2).
    pub const NO_TOPIC: &str = "no-topic";
    /// An open whose root is another document's (aweft section 2).
    pub const ROOT_MISMATCH: &str = "root-mismatch";
    /// An open naming something that is no replica.
    pub const NO_DOCUMENT: &str = "no-document";
    /// A replica the link's credentials do not allow.
    pub const NOT_ALLOWED: &str = "not-allowed";
    /// A topic already open under that number, or the replica already
    /// open on this link.
    pub const TOPIC_IN_USE: &str = "topic-in-use";
    /// A text message that is no request of the mapping.
    pub const BAD_REQUEST: &str = "bad-request";
    /// An acknowledgement of a commit that is not the one in flight.
    pub const NOT_IN_FLIGHT: &str = "not-in-flight";
    /// A credential the gateway does not know, or revoked.
    pub const BAD_CREDENTIAL: &str = "bad-credential";
    /// A commit the server could not read as an Up: filed as nothing.
    pub const MALFORMED: &str = "malformed";
    /// An Up or message of a later protocol than the receiving end's.
    pub const LATER_PROTOCOL: &str = "later-protocol";
    /// A commit larger than the server's message limit.
    pub const TOO_LARGE: &str = "too-large";
    /// A state: the server's document is not the device's to replace.
    pub const NOT_TAKEN: &str = "not-taken";
    /// The gateway lost its database, or is stopping: the link ends.
    pub const SERVER_AWAY: &str = "server-away";
    pub const GOING_AWAY: &str = "going-away";
    /// A credential revoked while its link was open.
    pub const REVOKED: &str = "revoked";
    /// Nothing heard within the idle timeout.
    pub const IDLE: &str = "idle";
}

/// The topic name of a replica.
pub fn topic_name(replica: Uuid) -> String {
    format!("{NAME_PREFIX}{}", replica.hyphenated())
}

/// The replica a topic name names, if it names one.
pub fn replica_named(name: &str) -> Option<Uuid> {
    let id = name.strip_prefix(NAME_PREFIX)?;
    // Only the canonical form: one replica, one name.
    let replica = Uuid::parse_str(id).ok()?;
    (replica.hyphenated().to_string() == id).then_some(replica)
}

/// The root both ends hold for a replica: its id, as an object. It names
/// the document and nothing about where it stands: the replica protocol's
/// own numbering (epoch, sequence, nonce) says that, and acts on it.
pub fn root_of(replica: Uuid) -> Root {
    Root {
        id: replica.as_bytes().to_vec(),
        kind: RootKind::Object,
    }
}
