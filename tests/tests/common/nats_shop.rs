//! The filing shop (common/filing_shop.rs) over nats: the cluster whose
//! relay worker publishes to a nats-server, and a register's device
//! program (common/device.rs) over its own consumer there. Included as
//! `nats_shop` by test files that include the filing shop as `shop` and
//! the device as `device`.
#![allow(dead_code)]

use std::time::Duration;

use magic_sync_replica::transport::nats::{Nats, NatsSettings};
use magic_sync_replica::transport::Options;
use magic_sync_replica::Replica;

use crate::device::Device;
use crate::shop::Shop;

/// The worker's sends answered within 2 s or taken for unanswered, as
/// most tests set it on the command line (`shop_over`'s `more`).
pub const SEND_TIMEOUT: &str = "magic_sync.send_timeout=2000";

/// The filing shop on a cluster whose relay worker, in the database
/// `shop`, publishes to the NATS server at `url` and wakes every second,
/// with `more` settings too (`name=value`). These are the server's command
/// line, which a reload cannot change: a setting a test changes later is
/// set in the configuration instead, so none is given here by default.
pub fn shop_over(url: &str, more: &[&str]) -> Shop {
    let url = format!("magic_sync.nats_url={url}");
    let mut settings = vec![
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.transport=nats",
        "magic_sync.idle=1",
        url.as_str(),
    ];
    settings.extend_from_slice(more);
    Shop::open_with(&settings)
}

/// A loop that waits for news at the transport, not by polling: what a
/// register's program writes through another connection goes up when the
/// test pokes the loop, or when it starts again.
pub fn waiting_for_news() -> Options {
    Options {
        poll_every: Duration::from_secs(3600),
        ..Options::default()
    }
}

/// A register's device program over NATS, with these settings and
/// options.
pub fn start_register_over(settings: NatsSettings, options: Options, replica: Replica) -> Device {
    Device::start(replica, options, move |replica| {
        Nats::new(settings, replica).expect("a client of NATS")
    })
}

/// A register's device program over NATS at `url`, by the conventions,
/// waiting for news.
pub fn start_register(url: &str, replica: Replica) -> Device {
    start_register_over(NatsSettings::new(url), waiting_for_news(), replica)
}
