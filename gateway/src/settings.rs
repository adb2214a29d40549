//! What the gateway is told: where to listen, which database, its bounds.

use std::net::SocketAddr;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Settings {
    /// Where it listens: 127.0.0.1:8787 unless told otherwise.
    pub listen: SocketAddr,
    /// The database, as the extension's gateway role (a libpq connection
    /// string or URL).
    pub database: String,
    /// Connections it files and takes messages through, shared by every
    /// link (each takes many queries at once).
    pub connections: usize,
    /// The server's message limit (`magic_sync.message_bytes`): a commit
    /// larger than this is refused with `too-large`.
    pub message_bytes: usize,
    /// The largest WebSocket message it reads; a larger one ends the link.
    pub frame_bytes: usize,
    /// How many links it carries at once; one more is answered 503.
    pub max_links: usize,
    /// A link that says nothing for this long is closed.
    pub idle_timeout: Duration,
    /// How long, once asked to stop, it waits for links to finish what
    /// they do.
    pub stop_within: Duration,
}

impl Settings {
    pub fn new(database: impl Into<String>) -> Settings {
        let message_bytes = 1024 * 1024;
        Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            database: database.into(),
            connections: 4,
            message_bytes,
            frame_bytes: message_bytes + 4096,
            max_links: 10_000,
            idle_timeout: Duration::from_secs(90),
            stop_within: Duration::from_secs(10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_listens_on_the_loopback_unless_told_otherwise() {
        let settings = Settings::new("dbname=shop");
        assert!(settings.listen.ip().is_loopback());
        assert_eq!(settings.listen.port(), 8787);
    }
}
