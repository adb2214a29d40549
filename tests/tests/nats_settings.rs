//! The nats transport's settings as the relay worker takes them: how it
//! logs in, refused plainly when set wrong, and the streams it makes kept
//! to what the settings say when they change.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/nats_shop.rs"]
mod nats_shop;
#[path = "common/filing_shop.rs"]
mod shop;

use async_nats::jetstream;
use device::wait_until;
use magic_sync_tests::nats::{self as nats_server, NatsServer};
use nats_shop::{shop_over, SEND_TIMEOUT};
use postgres::Client;

/// Sets a setting as its owner would, in the configuration, and reloads.
fn configure(pg: &mut Client, setting: &str, value: &str) {
    pg.batch_execute(&format!("ALTER SYSTEM SET {setting} = '{value}'"))
        .unwrap();
    pg.batch_execute("SELECT pg_reload_conf()").unwrap();
}

fn down_stream_bound(nats: &NatsServer) -> Option<i64> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client);
        let mut stream = js.get_stream("MAGIC_SYNC_DOWN").await.ok()?;
        Some(stream.info().await.ok()?.config.max_messages_per_subject)
    })
}

#[test]
fn a_user_without_a_password_file_is_refused_naming_both_settings() {
    let nats = nats_server::start();
    let shop = shop_over(
        &nats.url(),
        &[SEND_TIMEOUT, "magic_sync.nats_user=magic_sync"],
    );
    wait_until("the worker to say what is wrong", || {
        shop.cluster
            .log()
            .contains("magic_sync.nats_user is set but magic_sync.nats_password_file is not")
    });
}

#[test]
fn a_password_file_that_cannot_be_read_is_refused_naming_it_and_its_setting() {
    let nats = nats_server::start();
    let shop = shop_over(
        &nats.url(),
        &[
            SEND_TIMEOUT,
            "magic_sync.nats_user=magic_sync",
            "magic_sync.nats_password_file=/nonexistent/nats-password",
        ],
    );
    wait_until("the worker to say what is wrong", || {
        let log = shop.cluster.log();
        log.contains("cannot read /nonexistent/nats-password (magic_sync.nats_password_file)")
    });
}

#[test]
fn credentials_and_a_user_both_set_are_refused_naming_both_settings() {
    let nats = nats_server::start();
    let shop = shop_over(
        &nats.url(),
        &[
            SEND_TIMEOUT,
            "magic_sync.nats_user=magic_sync",
            "magic_sync.nats_credentials=/etc/magic_sync/relay.creds",
        ],
    );
    wait_until("the worker to say what is wrong", || {
        shop.cluster
            .log()
            .contains("set magic_sync.nats_credentials or magic_sync.nats_user, not both")
    });
}

#[test]
fn a_stream_made_before_its_bound_changed_is_brought_to_the_new_bound() {
    let nats = nats_server::start();
    // Set in the configuration file, not on the command line, whose
    // settings a reload cannot change.
    let mut shop = shop_over(&nats.url(), &[SEND_TIMEOUT]);
    configure(&mut shop.pg, "magic_sync.outbox_messages", "100");
    wait_until("the worker to make its streams", || {
        down_stream_bound(&nats) == Some(100)
    });
    configure(&mut shop.pg, "magic_sync.outbox_messages", "50");
    wait_until("the stream to take the new bound", || {
        down_stream_bound(&nats) == Some(50)
    });
}
