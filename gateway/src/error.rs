//! The gateway's one error type: each variant says whose fault it is.

/// What stops the gateway from doing what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database, or the way to it: asked again after a pause.
    #[error("the database: {0}")]
    Database(#[from] tokio_postgres::Error),
    /// Whoever runs the gateway: a setting, a key file, an address that
    /// cannot be bound, a role missing a right.
    #[error("the gateway's setup: {0}")]
    Setup(String),
}

impl Error {
    pub(crate) fn setup(text: impl Into<String>) -> Error {
        Error::Setup(text.into())
    }
}
