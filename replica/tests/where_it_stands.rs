//! A replica that opens says where it stands at once, on its first lane,
//! even with nothing else to say: its last applied message, as that
//! message carried its numbers (sequence 0 when it applied nothing), its
//! gap and its backlog. So the server finds out a database put back to an
//! older copy, or a device set up again under its id (protocol A.1, A.2).

mod common;

use std::time::Duration;

use common::*;
use magic_sync_replica::proto::limits::Limits;
use magic_sync_replica::proto::wire::Up;
use magic_sync_replica::{install, Lane, Refusal, Replica, Settings};

fn open_with(shop: &Shop, settings: Settings) -> Replica {
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    Replica::open(conn, tables(), me(), settings).unwrap()
}

/// What the Up says of where the replica stands.
fn standing(up: &Up) -> (String, u64, u64, Vec<u8>, u64) {
    (
        up.epoch.clone(),
        up.sequence,
        up.nonce,
        up.mac.clone(),
        up.gap,
    )
}

/// Where the replica stands, as it keeps it.
fn kept(replica: &Replica) -> (String, u64, u64, Vec<u8>, u64) {
    let applied = replica.last_applied().unwrap();
    (
        applied.epoch,
        applied.sequence,
        applied.nonce,
        applied.mac,
        applied.gap,
    )
}

/// Says everything there is to say.
fn say_all(replica: &mut Replica) {
    while say(replica).is_some() {}
}

#[test]
fn a_replica_that_opens_says_where_it_stands_at_once() {
    let (shop, mut replica, server) = provisioned();
    say_all(&mut replica);
    let before = kept(&replica);
    drop(replica);

    let mut replica = shop.open();
    let upload = replica
        .next_up()
        .unwrap()
        .expect("where it stands, at once");
    assert_eq!(upload.lane, "main");
    let up = upload.message();
    assert_eq!(standing(&up), before);
    assert_eq!(
        (up.epoch.as_str(), up.sequence),
        (server.epoch.as_str(), server.sequence)
    );
    assert_eq!(up.mac.len(), 16, "the seal as the message carried it");
    assert_eq!(up.backlog.expect("its backlog, even empty").tables, []);
    assert!(up.tables.is_empty() && up.uploads.is_empty() && up.rejected.is_empty());
}

#[test]
fn a_replica_that_applied_nothing_says_sequence_zero() {
    let shop = Shop::new();
    let mut replica = shop.open();
    let up = say(&mut replica).expect("where it stands, at once");
    assert_eq!(standing(&up), (String::new(), 0, 0, Vec::new(), 0));
    assert_eq!(up.backlog.expect("its backlog, even empty").tables, []);
    assert!(up.tables.is_empty() && up.uploads.is_empty());
}

#[test]
fn it_says_so_once_per_open() {
    let shop = Shop::new();
    let mut replica = shop.open();
    // Built and neither sent nor refused: built again.
    let built = replica.next_up().unwrap().unwrap();
    let again = replica.next_up().unwrap().unwrap();
    assert_eq!(built.message(), again.message());
    // Refused for now: offered again.
    replica.refused(&again, Refusal::Transient).unwrap();
    let upload = replica.next_up().unwrap().unwrap();
    replica.sent(&upload).unwrap();
    assert!(replica.next_up().unwrap().is_none(), "said once");
    assert!(replica.next_up().unwrap().is_none());
    drop(replica);

    let mut replica = shop.open();
    assert!(
        say(&mut replica).is_some(),
        "and once more on the next open"
    );
    assert!(say(&mut replica).is_none());
}

#[test]
fn after_it_said_so_only_what_else_is_due_goes() {
    let (_shop, mut replica, mut server) = provisioned();
    say(&mut replica).unwrap();
    assert!(say(&mut replica).is_none());
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "green tea", 4)]),
    );
    let up = say(&mut replica).expect("a message applied");
    assert_eq!(up.sequence, server.sequence);
    assert!(up.backlog.is_none(), "its backlog did not change");
    assert!(say(&mut replica).is_none());
}

#[test]
fn a_replica_put_back_to_an_older_copy_says_the_older_message() {
    let (shop, mut replica, mut server) = provisioned();
    say_all(&mut replica);
    let older = kept(&replica);
    let copy = shop.dir.path().join("copy.db");
    replica
        .connection()
        .execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
        .unwrap();
    apply(
        &mut replica,
        &server.down(vec![part("products").product(3, "rye", 2)]),
    );
    say_all(&mut replica);
    drop(replica);

    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", shop.path().display()));
    }
    std::fs::copy(&copy, shop.path()).unwrap();
    let mut replica = shop.open();
    let up = say(&mut replica).expect("where it stands, at once");
    assert_eq!(standing(&up), older);
    assert!(up.sequence < server.sequence);
    assert!(say(&mut replica).is_none());
}

#[test]
fn a_device_set_up_again_under_its_id_says_sequence_zero() {
    let (shop, mut replica, _server) = provisioned();
    say_all(&mut replica);
    drop(replica);

    // Another device, or the same re-imaged: an empty database, the same id.
    let fresh = Shop::new();
    let mut replica = fresh.open();
    assert_eq!(replica.me(), me());
    let up = say(&mut replica).expect("where it stands, at once");
    assert_eq!(standing(&up), (String::new(), 0, 0, Vec::new(), 0));
    assert_eq!(up.backlog.unwrap().tables, []);
    drop(shop);
}

#[test]
fn its_backlog_goes_with_it_whatever_was_said_before() {
    let shop = Shop::new();
    // Said at most hourly: only opening says it now.
    let settings = Settings {
        backlog_every: Duration::from_secs(3600),
        backlog_again: Duration::from_secs(3600),
        ..Settings::default()
    };
    let mut replica = open_with(&shop, settings.clone());
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("products").product(1, "tea", 3)]),
    );
    say_all(&mut replica);
    write_receipt(replica.connection(), &receipt(1), 1, 1);
    say_all(&mut replica);
    drop(replica);

    let mut replica = open_with(&shop, settings);
    let up = say(&mut replica).expect("where it stands, at once");
    let backlog = up.backlog.expect("its backlog");
    assert_eq!(backlog.tables.len(), 1);
    assert_eq!(backlog.tables[0].table, "receipts");
    assert_eq!(
        (backlog.tables[0].unsent, backlog.tables[0].unfiled),
        (0, 1)
    );
}

#[test]
fn rows_waiting_go_in_the_same_up() {
    let (shop, mut replica, server) = provisioned();
    say_all(&mut replica);
    drop(replica);
    let mut replica = shop.open();
    write_receipt(replica.connection(), &receipt(1), 1, 1);
    let up = say(&mut replica).expect("where it stands, with its rows");
    assert_eq!(up.sequence, server.sequence);
    assert_eq!(up.tables[0].keys, [receipt(1)]);
    let backlog = up.backlog.expect("its backlog");
    assert_eq!(
        (backlog.tables[0].unsent, backlog.tables[0].unfiled),
        (0, 1)
    );
    assert!(say(&mut replica).is_none());
}

#[test]
fn a_gap_goes_with_it() {
    let (shop, mut replica, mut server) = provisioned();
    server.lose();
    let newest = server.down(vec![part("products").product(1, "x", 1)]);
    replica.receive(&newest).unwrap();
    say_all(&mut replica);
    drop(replica);

    let mut replica = shop.open();
    let up = say(&mut replica).expect("where it stands, at once");
    assert_eq!(up.gap, server.sequence);
    assert_eq!(up.sequence, server.sequence - 2);
}

#[test]
fn it_is_said_on_the_first_lane_only() {
    let shop = Shop::new();
    let settings = Settings {
        lanes: vec![Lane::new("main", &[]), Lane::new("receipts", &["receipts"])],
        ..Settings::default()
    };
    let mut replica = open_with(&shop, settings);
    assert!(replica.next_up_on("receipts").unwrap().is_none());
    let upload = replica.next_up_on("main").unwrap().expect("on the first");
    assert!(upload.message().backlog.is_some());
    replica.sent(&upload).unwrap();
    assert!(replica.next_up().unwrap().is_none());
}

#[test]
fn rejections_that_take_its_place_leave_it_owed() {
    let shop = Shop::new();
    let settings = Settings {
        limits: Limits {
            rows: 2,
            ..Limits::DEFAULT
        },
        ..Settings::default()
    };
    let mut replica = open_with(&shop, settings.clone());
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("products")
            .product(1, "a", -1)
            .product(2, "b", -1)]),
    );
    apply(
        &mut replica,
        &server.down(vec![part("products").product(3, "c", -1)]),
    );
    drop(replica);

    let mut replica = open_with(&shop, settings);
    let first = say(&mut replica).unwrap();
    assert_eq!(first.rejected.len(), 2);
    assert_eq!(first.sequence, 0, "the rejections first, without it");
    let second = say(&mut replica).unwrap();
    assert_eq!(second.rejected.len(), 1);
    assert_eq!(second.sequence, server.sequence);
    assert!(second.backlog.is_some());
    assert!(say(&mut replica).is_none());
}
