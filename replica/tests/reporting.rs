//! What the replica tells the server: the Up.

mod common;

use common::*;
use magic_sync_replica::proto::limits::Limits;
use magic_sync_replica::proto::PROTOCOL;
use magic_sync_replica::{install, Replica, Settings};

#[test]
fn nothing_applied_has_nothing_to_say_once_it_said_where_it_stands() {
    let shop = Shop::new();
    let mut replica = shop.open();
    // On opening it says where it stands: nothing applied.
    let up = say(&mut replica).expect("where it stands, at once");
    assert_eq!((up.epoch.as_str(), up.sequence), ("", 0));
    assert!(replica.next_up().unwrap().is_none());
}

#[test]
fn an_applied_message_is_said_once() {
    let (_shop, mut replica, server) = provisioned();
    let upload = replica.next_up().unwrap().unwrap();
    assert_eq!(upload.lane, "main");
    let up = upload.message();
    assert_eq!(up.protocol, PROTOCOL);
    assert_eq!(up.sequence, server.sequence);
    assert_eq!(up.gap, 0);
    assert!(up.rejected.is_empty());
    // Not sent yet: the same is still to say.
    assert_eq!(replica.next_up().unwrap().unwrap().message(), up);
    replica.sent(&upload).unwrap();
    assert!(replica.next_up().unwrap().is_none());
}

#[test]
fn a_report_the_transport_took_is_kept_without_a_write_and_said_again_once_opened_again() {
    let (shop, mut replica, mut server) = provisioned();
    say(&mut replica);
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "tea", 4)]),
    );
    let report = replica.next_up().unwrap().unwrap();
    assert!(report.only_says_applied());
    let changes = replica.connection().total_changes();
    replica.sent(&report).unwrap();
    // No commit, so no sync of the disk, for what may be said twice.
    assert_eq!(replica.connection().total_changes(), changes);
    assert!(replica.next_up().unwrap().is_none(), "said once");
    // Opened again, it says where it stands first thing all the same.
    drop(replica.into_connection());
    let mut replica = shop.open();
    let up = say(&mut replica).expect("where it stands, on opening");
    assert_eq!(up.sequence, server.sequence);
    assert!(say(&mut replica).is_none());
}

#[test]
fn what_is_applied_after_the_up_was_built_is_said_next() {
    let (_shop, mut replica, mut server) = provisioned();
    let upload = replica.next_up().unwrap().unwrap();
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "x", 1)]),
    );
    replica.sent(&upload).unwrap();
    assert_eq!(say(&mut replica).unwrap().sequence, server.sequence);
}

#[test]
fn a_rejection_is_reported_once() {
    let (_shop, mut replica, mut server) = provisioned();
    say(&mut replica);
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "tea", -1)]),
    );
    let up = say(&mut replica).unwrap();
    assert_eq!(up.rejected.len(), 1);
    assert!(say(&mut replica).is_none());
    // Kept all the same, until the row is taken: it holds a copy of it.
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        1
    );
}

#[test]
fn a_rejection_is_reported_when_its_epoch_comes_next_spelt_in_capitals() {
    let (_shop, mut replica, mut server) = provisioned();
    say(&mut replica);
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "tea", -1)]),
    );
    // The same epoch, spelt otherwise: epochs are compared as UUIDs.
    server.epoch = server.epoch.to_uppercase();
    apply(
        &mut replica,
        &server.down(vec![part("products").product(2, "jam", 6)]),
    );
    let up = say(&mut replica).unwrap();
    assert_eq!(up.rejected.len(), 1, "{up:?}");
    assert_eq!(up.rejected[0].key, uuid(1));
}

#[test]
fn rejections_that_do_not_fit_one_up_go_first_without_the_last_applied() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    let settings = Settings {
        limits: Limits {
            rows: 2,
            ..Limits::DEFAULT
        },
        ..Settings::default()
    };
    let mut replica = Replica::open(conn, tables(), me(), settings).unwrap();
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

    let first = say(&mut replica).unwrap();
    assert_eq!(first.rejected.len(), 2);
    assert_eq!(
        (first.epoch.as_str(), first.sequence),
        ("", 0),
        "says nothing of what was applied"
    );
    let second = say(&mut replica).unwrap();
    assert_eq!(second.rejected.len(), 1);
    assert_eq!(second.sequence, server.sequence);
    assert!(say(&mut replica).is_none());
}
