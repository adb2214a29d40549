//! The NATS account of the book (docs/src/nats/accounts.conf and
//! device.conf, read here as they are printed there): each device may
//! publish only its own Ups, read and acknowledge only its own consumer,
//! and hear only its own replies; the server half may do everything.

mod common;
#[path = "common/chain.rs"]
mod chain;
#[path = "common/device.rs"]
mod device;
#[path = "common/nats_shop.rs"]
mod nats_shop;
#[path = "common/register_files.rs"]
mod register_files;
#[path = "common/filing_shop.rs"]
mod shop;

use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use async_nats::{ConnectOptions, Event, ServerError};
use chain::Chain;
use device::{wait_until, PATIENCE};
use magic_sync_replica::transport::nats::{Credentials, NatsSettings};
use magic_sync_replica::transport::nats_subjects as subjects;
use magic_sync_replica::transport::{Options, Status};
use magic_sync_tests::nats::{self as nats_server, SERVER_USER};
use nats_shop::{shop_over, start_register_over, SEND_TIMEOUT};
use register_files::{
    sell_through_its_own_connection, until_every_register_holds_the_servers_products,
};
use tokio::runtime::Runtime;
use uuid::Uuid;

const SERVER_PASSWORD: &str = "the head office's secret";

fn password_of(device: Uuid) -> String {
    format!("secret of {device}")
}

/// A device's own connection, as its user, and what the server tells it
/// went wrong (each ServerError's text).
async fn connect_as(
    url: &str,
    device: Uuid,
) -> (async_nats::Client, jetstream::Context, Receiver<String>) {
    let (tell, told) = channel();
    let client = ConnectOptions::with_user_and_password(device.to_string(), password_of(device))
        .custom_inbox_prefix(subjects::inbox_prefix(device))
        .request_timeout(Some(Duration::from_secs(2)))
        .event_callback(move |event| {
            let tell = tell.clone();
            async move {
                if let Event::ServerError(ServerError::Other(text)) = event {
                    let _ = tell.send(text);
                }
            }
        })
        .connect(url)
        .await
        .expect("a device connects as its user");
    let mut js = jetstream::new(client.clone());
    js.set_timeout(Duration::from_secs(2));
    (client, js, told)
}

/// Waits for the server to say it refused `what` for want of permission.
fn refused(told: &Receiver<String>, what: &str) {
    let text = told
        .recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("the server said nothing of {what}"));
    assert!(
        text.contains("Permissions Violation") && text.contains(what),
        "{text}"
    );
}

#[test]
fn a_device_may_use_its_own_subjects_and_consumer_and_no_other_devices() {
    let a = Uuid::new_v4();
    let b = Uuid::new_v4();
    let (password_a, password_b) = (password_of(a), password_of(b));
    let config = nats_server::accounts_config(
        SERVER_PASSWORD,
        &[(a, password_a.as_str()), (b, password_b.as_str())],
    );
    let nats = nats_server::start_with_config(&config);
    let runtime = Runtime::new().unwrap();

    // The server half, with every right.
    let server = runtime.block_on(async {
        let client = ConnectOptions::with_user_and_password(
            SERVER_USER.to_owned(),
            SERVER_PASSWORD.to_owned(),
        )
        .connect(nats.url())
        .await
        .expect("the server half connects");
        let js = jetstream::new(client);
        nats_server::create_streams(&js).await;
        nats_server::create_consumer(&js, a).await;
        nats_server::create_consumer(&js, b).await;
        let mut chain_a = Chain::new();
        let mut chain_b = Chain::new();
        nats_server::publish_down(&js, a, "1", chain_a.begin(&[(Uuid::new_v4(), "Tea", 250)]))
            .await;
        nats_server::publish_down(&js, b, "2", chain_b.begin(&[(Uuid::new_v4(), "Jam", 400)]))
            .await;
        js
    });

    // Device A, as itself, reaching for B.
    runtime.block_on(async {
        let (client, js, told) = connect_as(&nats.url(), a).await;

        let b_up = subjects::up_subject(subjects::DEFAULT_PREFIX, b, "main");
        let published = match js.publish(b_up.clone(), b"an Up".to_vec().into()).await {
            Ok(ack) => ack.await.map(|_| ()),
            Err(e) => Err(e),
        };
        assert!(published.is_err(), "A published on B's up subject");
        refused(&told, &format!("Publish to \"{b_up}\""));

        let info = js
            .get_consumer_from_stream::<consumer::pull::Config, _, _>(
                subjects::consumer_name(b),
                subjects::DOWN_STREAM,
            )
            .await;
        assert!(info.is_err(), "A read B's consumer");
        refused(&told, &format!("CONSUMER.INFO.MAGIC_SYNC_DOWN.{b}"));

        let next = format!("$JS.API.CONSUMER.MSG.NEXT.MAGIC_SYNC_DOWN.{b}");
        client
            .publish_with_reply(next.clone(), format!("_INBOX.{a}.pull"), "1".into())
            .await
            .unwrap();
        refused(&told, &format!("Publish to \"{next}\""));

        let _ = client.subscribe(format!("_INBOX.{b}.>")).await;
        refused(&told, &format!("Subscription to \"_INBOX.{b}.>\""));
    });
    // Nothing of A's reached B's subjects, and B's message still waits.
    runtime.block_on(async {
        let mut up = server.get_stream(subjects::UP_STREAM).await.unwrap();
        assert_eq!(up.info().await.unwrap().state.messages, 0);
        let consumer: consumer::PullConsumer = server
            .get_consumer_from_stream(subjects::consumer_name(b), subjects::DOWN_STREAM)
            .await
            .unwrap();
        let info = consumer.get_info().await.unwrap();
        assert_eq!((info.num_pending, info.delivered.stream_sequence), (1, 0));
    });

    // Its own it may: the device loop, as A, takes its message and says so.
    let dir = tempfile::tempdir().unwrap();
    let replica = common::open_replica(
        &dir.path().join("a.db"),
        shop::REGISTER_SCHEMA,
        shop::tables(),
        a,
        Default::default(),
    );
    let mut settings = NatsSettings::new(nats.url());
    settings.credentials = Credentials::UserPassword {
        user: a.to_string(),
        password: password_a.clone(),
    };
    let mut device = start_register_over(settings, Options::default(), replica);
    device.expect("A's message applied", |s| matches!(s, Status::Applied(_)));
    device.expect("A's Up sent", |s| matches!(s, Status::Sent { .. }));
    device.stop();
    runtime.block_on(async {
        let stream = server.get_stream(subjects::UP_STREAM).await.unwrap();
        let first = stream.get_raw_message(1).await.unwrap();
        assert_eq!(
            first.subject.as_str(),
            subjects::up_subject(subjects::DEFAULT_PREFIX, a, "main")
        );
    });
}

/// The relay worker itself in the book's account: it logs in as the server
/// half's user (`magic_sync.nats_user`, the password in
/// `magic_sync.nats_password_file`), makes the streams and the device's
/// consumer, publishes down and files what comes up; the device, as its
/// own user, takes its messages and sends its receipts.
#[test]
fn the_relay_worker_logs_in_as_the_accounts_server_user_and_serves_a_device_of_its_own_user() {
    let a = Uuid::new_v4();
    let password_a = password_of(a);
    let config = nats_server::accounts_config(SERVER_PASSWORD, &[(a, password_a.as_str())]);
    let nats = nats_server::start_with_config(&config);

    // The password in a file the server's account can read, out of the
    // settings any session may read.
    let secrets = tempfile::tempdir().unwrap();
    let password_file = secrets.path().join("nats-password");
    std::fs::write(&password_file, format!("{SERVER_PASSWORD}\n")).unwrap();
    for (path, mode) in [(secrets.path(), 0o755), (password_file.as_path(), 0o644)] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let user = format!("magic_sync.nats_user={SERVER_USER}");
    let file = format!("magic_sync.nats_password_file={}", password_file.display());
    let mut shop = shop_over(&nats.url(), &[SEND_TIMEOUT, &user, &file]);
    shop.pg
        .execute(
            "INSERT INTO shop.registers (id, name) VALUES ($1, 'A')",
            &[&a],
        )
        .unwrap();
    shop.pg
        .execute(
            "INSERT INTO shop.register_state (id, register_id, note) VALUES ($1, $1, 'new')",
            &[&a],
        )
        .unwrap();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );

    let file_a = shop.file_of(a);
    let replica = shop::open_register(&file_a, a);
    let mut settings = NatsSettings::new(nats.url());
    settings.credentials = Credentials::UserPassword {
        user: a.to_string(),
        password: password_a,
    };
    // The receipts are written through another connection, which the
    // loop hears of by looking every 200 ms.
    let options = Options {
        poll_every: Duration::from_millis(200),
        ..Options::default()
    };
    let device = start_register_over(settings, options, replica);

    until_every_register_holds_the_servers_products(&mut shop, &[&file_a]);
    let sold = sell_through_its_own_connection(&file_a, a, &[1250, 399]);
    wait_until("the device's receipts filed", || shop.receipts() == sold);
    device.stop();
    assert!(
        !shop.cluster.log().contains("Authorization Violation"),
        "the worker logged in"
    );
}
