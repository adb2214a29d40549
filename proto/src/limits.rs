//! How much one message carries (protocol §4.0 and §7).

/// What one message may carry. The server keeps every message within its
/// limits; a replica takes messages up to its own, which are the server's or
/// more, and keeps every `Up` within them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Rows in one message: upserts and deletes together (in an `Up`,
    /// rejections count as rows too).
    pub rows: usize,
    /// Tables (parts) in one message.
    pub tables: usize,
    /// Upload numbers in one `Filed`.
    pub uploads: usize,
    /// Bytes of one encoded message.
    pub bytes: usize,
}

impl Limits {
    /// 500 rows, 500 tables, 500 uploads, 1 MiB: what NATS takes by default.
    pub const DEFAULT: Limits = Limits {
        rows: 500,
        tables: 500,
        uploads: 500,
        bytes: 1024 * 1024,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}
