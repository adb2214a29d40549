//! A register over NATS that runs until it is killed: the device program
//! of the NATS fault loop (tests/tests/nats_fault_loop.rs). The replica's
//! device loop runs in a thread of its own; the main thread sells, a
//! receipt every so often through a connection of its own, and pokes the
//! loop, as a register's till does.
//!
//! `nats_register NATS_URL FILE REGISTER_ID SELL_EVERY_MS`: 0 sells
//! nothing. Each thing the loop does is a line on stderr.

use std::path::Path;
use std::time::Duration;

use magic_sync_replica::transport::nats::{Nats, NatsSettings};
use magic_sync_replica::transport::{run, Control, Options};
use magic_sync_replica::Settings;
use magic_sync_tests::killed_register::{connect, open_with, write_receipt};
use uuid::Uuid;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, file, id, sell_every] = args.as_slice() else {
        eprintln!("usage: nats_register NATS_URL FILE REGISTER_ID SELL_EVERY_MS");
        std::process::exit(2);
    };
    let me: Uuid = id.parse().expect("a register id");
    let sell_every: u64 = sell_every.parse().expect("milliseconds");
    let file = Path::new(file);
    // An answer (Filed) lost with a nats-server killed before it wrote it
    // down, or dropped from the subject by a provisioning's purge, is made
    // good by sending the upload again: after 20 s here, not the default
    // five minutes, so the loop settles within its bound.
    let settings = Settings {
        resend_after: Duration::from_secs(20),
        ..Settings::default()
    };
    let mut replica = open_with(file, me, settings);
    // A consumer that hands out nothing while messages wait is found
    // within seconds, not the default half minute: the faults come fast.
    let nats_settings = NatsSettings {
        stuck_after: Duration::from_secs(3),
        ..NatsSettings::new(url.as_str())
    };
    let mut nats = Nats::new(nats_settings, &replica).expect("a client of NATS");
    let control = Control::new();
    let steering = control.clone();
    let looping = std::thread::spawn(move || {
        let options = Options {
            poll_every: Duration::from_secs(2),
            ..Options::default()
        };
        run(&mut replica, &mut nats, &options, &steering, |status| {
            eprintln!("nats_register {me}: {status}");
        });
    });
    if sell_every == 0 {
        looping.join().expect("the loop ends without a panic");
        return;
    }
    let till = connect(file);
    loop {
        std::thread::sleep(Duration::from_millis(sell_every));
        write_receipt(&till, me);
        control.poke();
    }
}
