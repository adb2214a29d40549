//! The nats transport's settings as the relay worker takes them: how it
//! logs in, refused plainly when set wrong, and the streams it makes kept
//! to what the settings say when they change.

use std::time::{Duration, Instant};

use async_nats::jetstream;
use magic_sync_tests::nats::{self as nats_server, NatsServer};
use magic_sync_tests::Cluster;
use postgres::Client;

const PATIENCE: Duration = Duration::from_secs(60);

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A cluster whose relay worker publishes to `nats`, with these settings
/// too, and the database it relays, with the extension.
fn worker_over(nats: &NatsServer, more: &[&str]) -> (Cluster, Client) {
    let url = format!("magic_sync.nats_url={}", nats.url());
    let mut settings = vec![
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.transport=nats",
        "magic_sync.idle=1",
        "magic_sync.send_timeout=2000",
        url.as_str(),
    ];
    settings.extend_from_slice(more);
    let cluster = Cluster::start_with(&settings);
    let pg = cluster.database_with_extension("shop");
    (cluster, pg)
}

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
    let (cluster, _pg) = worker_over(&nats, &["magic_sync.nats_user=magic_sync"]);
    wait_until("the worker to say what is wrong", || {
        cluster
            .log()
            .contains("magic_sync.nats_user is set but magic_sync.nats_password_file is not")
    });
}

#[test]
fn a_password_file_that_cannot_be_read_is_refused_naming_it_and_its_setting() {
    let nats = nats_server::start();
    let (cluster, _pg) = worker_over(
        &nats,
        &[
            "magic_sync.nats_user=magic_sync",
            "magic_sync.nats_password_file=/nonexistent/nats-password",
        ],
    );
    wait_until("the worker to say what is wrong", || {
        let log = cluster.log();
        log.contains("cannot read /nonexistent/nats-password (magic_sync.nats_password_file)")
    });
}

#[test]
fn credentials_and_a_user_both_set_are_refused_naming_both_settings() {
    let nats = nats_server::start();
    let (cluster, _pg) = worker_over(
        &nats,
        &[
            "magic_sync.nats_user=magic_sync",
            "magic_sync.nats_credentials=/etc/magic_sync/relay.creds",
        ],
    );
    wait_until("the worker to say what is wrong", || {
        cluster
            .log()
            .contains("set magic_sync.nats_credentials or magic_sync.nats_user, not both")
    });
}

#[test]
fn a_stream_made_before_its_bound_changed_is_brought_to_the_new_bound() {
    let nats = nats_server::start();
    // Set in the configuration file, not on the command line, whose
    // settings a reload cannot change.
    let (_cluster, mut pg) = worker_over(&nats, &[]);
    configure(&mut pg, "magic_sync.outbox_messages", "100");
    wait_until("the worker to make its streams", || {
        down_stream_bound(&nats) == Some(100)
    });
    configure(&mut pg, "magic_sync.outbox_messages", "50");
    wait_until("the stream to take the new bound", || {
        down_stream_bound(&nats) == Some(50)
    });
}
