//! The server installation's epochs (`sync.epochs`): every message is
//! numbered and sealed in the current one, under its secret. The first is
//! begun by the first pass; a new one is begun when the database is found
//! to have gone back (file/went_back.rs), so nothing sealed before it
//! can be taken for what is sent after.

use pgrx::prelude::*;
use uuid::Uuid;

use crate::error::Error;
use crate::seal;
use crate::spi::{self, from_pg, to_pg};
use crate::statements::epochs::{BEGIN, CURRENT, CURRENT_ID};

/// The epoch messages are numbered and sealed in.
pub struct Epoch {
    pub id: Uuid,
    pub secret: Vec<u8>,
}

/// The current epoch, begun the first time it is needed.
pub fn current() -> Epoch {
    let found = Spi::connect(|client| {
        let mut rows = client
            .select(CURRENT, Some(1), &[])
            .unwrap_or_else(|e| Error::spi(CURRENT, e).raise());
        rows.next().map(|row| Epoch {
            id: from_pg(spi::column(&row, 1, "sync.epochs.id")),
            secret: spi::column(&row, 2, "sync.epochs.secret"),
        })
    });
    found.unwrap_or_else(|| begin(Uuid::new_v4()))
}

/// The id of the current epoch, if one began.
pub fn current_id() -> Option<Uuid> {
    spi::one_fixed::<pgrx::Uuid>(CURRENT_ID).map(from_pg)
}

/// An epoch's secret, when this database has that epoch.
pub fn secret_of(epoch: Uuid) -> Option<Vec<u8>> {
    spi::one(
        "SELECT secret FROM sync.epochs WHERE id = $1",
        &[to_pg(epoch).into()],
    )
}

/// Ends the current epoch, if any, and begins `id` with a new secret.
pub fn begin(id: Uuid) -> Epoch {
    let epoch = Epoch {
        id,
        secret: seal::draw_secret().to_vec(),
    };
    spi::run("UPDATE sync.epochs SET current = false WHERE current");
    spi::run_with(
        BEGIN,
        &[to_pg(epoch.id).into(), epoch.secret.clone().into()],
    );
    epoch
}
