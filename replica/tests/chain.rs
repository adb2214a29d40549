//! The chain of messages: redeliveries, gaps, protocols, and carrying on
//! after the program stops.

mod common;

use common::*;
use magic_sync_replica::proto::wire::{to_replica::Body, Up};
use magic_sync_replica::proto::PROTOCOL;
use magic_sync_replica::{Error, Received};

#[test]
fn a_message_delivered_twice_changes_nothing_the_second_time() {
    let (_shop, mut replica, mut server) = provisioned();
    let bytes = server.down(vec![part("products").product(1, "green tea", 4)]);
    apply(&mut replica, &bytes);
    let before = replica.last_applied().unwrap();
    say(&mut replica);
    as_the_engine(
        replica.connection(),
        "UPDATE products SET name = 'local edit' WHERE name = 'green tea'",
    );

    let again = replica.receive(&bytes).unwrap();
    assert_eq!(
        again,
        Received::Already {
            sequence: server.sequence
        }
    );
    assert_eq!(replica.last_applied().unwrap(), before);
    assert_eq!(
        names(replica.connection()),
        ["local edit", "jam"],
        "nothing was written"
    );
    // It says its last applied again.
    let up = say(&mut replica).expect("an Up after a redelivery");
    assert_eq!((up.epoch, up.sequence), (before.epoch, before.sequence));
}

#[test]
fn an_older_message_of_the_same_epoch_is_already_applied() {
    let (_shop, mut replica, mut server) = provisioned();
    let old = server.down(vec![part("products").product(1, "older", 1)]);
    apply(&mut replica, &old);
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "newer", 1)]),
    );
    assert!(matches!(
        replica.receive(&old).unwrap(),
        Received::Already { .. }
    ));
    assert_eq!(names(replica.connection()), ["newer", "jam"]);
}

#[test]
fn a_message_that_does_not_follow_is_a_gap_and_applies_nothing() {
    let (_shop, mut replica, mut server) = provisioned();
    let applied = replica.last_applied().unwrap();
    server.lose();
    let after_the_lost_one = server.down(vec![part("products").product(1, "green tea", 4)]);
    assert_eq!(
        replica.receive(&after_the_lost_one).unwrap(),
        Received::Gap {
            newest: server.sequence
        }
    );
    assert_eq!(names(replica.connection()), ["tea", "jam"]);
    let now = replica.last_applied().unwrap();
    assert_eq!((now.sequence, now.gap), (applied.sequence, server.sequence));

    // Nothing applies until a snapshot begins: not even a message that
    // follows the last one applied.
    let later = server.down(vec![part("products").product(2, "plum jam", 6)]);
    assert_eq!(
        replica.receive(&later).unwrap(),
        Received::Gap {
            newest: server.sequence
        }
    );
    assert_eq!(names(replica.connection()), ["tea", "jam"]);

    let up = say(&mut replica).expect("the gap is said");
    assert_eq!(up.gap, server.sequence);
    assert_eq!(up.sequence, applied.sequence);

    apply(
        &mut replica,
        &server.begin(vec![part("products").product(3, "rye", 2)]),
    );
    apply(&mut replica, &server.end(&["products"]));
    assert_eq!(names(replica.connection()), ["rye"]);
    assert_eq!(replica.last_applied().unwrap().gap, 0);
    assert_eq!(say(&mut replica).unwrap().gap, 0);
}

#[test]
fn a_message_of_another_nonce_is_a_gap() {
    let (_shop, mut replica, mut server) = provisioned();
    let mut down = server.peek(vec![part("products").product(1, "x", 1)]);
    down.previous_nonce += 1;
    let received = replica.receive(&encode_down(down)).unwrap();
    assert!(matches!(received, Received::Gap { .. }));
}

#[test]
fn the_gap_is_said_again_only_when_it_grows() {
    let (_shop, mut replica, mut server) = provisioned();
    server.lose();
    let first = server.down(vec![]);
    replica.receive(&first).unwrap();
    assert!(say(&mut replica).is_some());
    replica.receive(&first).unwrap(); // the same message again: the gap does not grow
    assert!(say(&mut replica).is_none());
    replica.receive(&server.down(vec![])).unwrap();
    assert_eq!(say(&mut replica).unwrap().gap, server.sequence);
}

#[test]
fn the_gap_is_the_largest_sequence_not_followed_and_a_redelivery_does_not_lower_it() {
    let (_shop, mut replica, mut server) = provisioned();
    let applied = replica.last_applied().unwrap();
    server.lose();
    let first = server.down(vec![]);
    let second = server.down(vec![]);
    assert_eq!(
        replica.receive(&second).unwrap(),
        Received::Gap {
            newest: server.sequence
        }
    );
    // The earlier one comes late: the gap stays at the newer.
    assert_eq!(
        replica.receive(&first).unwrap(),
        Received::Gap {
            newest: server.sequence
        }
    );
    // One at or below the last applied is a redelivery, not a gap.
    let mut again = server.peek(vec![]);
    again.sequence = applied.sequence;
    again.previous = applied.sequence - 1;
    assert!(matches!(
        replica.receive(&encode_down(again)).unwrap(),
        Received::Already { .. }
    ));
    assert_eq!(replica.last_applied().unwrap().gap, server.sequence);
}

#[test]
fn a_message_of_another_epoch_that_begins_no_snapshot_is_a_gap() {
    let (_shop, mut replica, mut server) = provisioned();
    server.new_epoch();
    server.nonce = 5;
    let received = replica.receive(&server.down(vec![])).unwrap();
    assert_eq!(received, Received::Gap { newest: 2 });
}

#[test]
fn nothing_applied_yet_follows_nothing() {
    let shop = Shop::new();
    let mut replica = shop.open();
    let mut server = Server::new();
    server.sequence = 5;
    server.nonce = 55;
    let received = replica.receive(&server.down(vec![])).unwrap();
    assert_eq!(received, Received::Gap { newest: 6 });
}

#[test]
fn a_later_protocol_is_an_error_and_changes_nothing() {
    let (_shop, mut replica, mut server) = provisioned();
    let before = replica.last_applied().unwrap();
    let down = server.peek(vec![part("products").product(1, "green tea", 4)]);
    let bytes = encode(PROTOCOL + 1, Some(Body::Down(down)));
    match replica.receive(&bytes) {
        Err(Error::LaterProtocol { theirs, ours }) => {
            assert_eq!((theirs, ours), (PROTOCOL + 1, PROTOCOL))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(replica.last_applied().unwrap(), before);
    assert_eq!(names(replica.connection()), ["tea", "jam"]);
}

#[test]
fn a_field_the_replica_does_not_know_is_ignored() {
    let (_shop, mut replica, mut server) = provisioned();
    let mut bytes = server.down(vec![part("products").product(1, "green tea", 4)]);
    // Field 111, a varint: a field a later server might add.
    bytes.extend_from_slice(&[0xF8, 0x06, 0x01]);
    apply(&mut replica, &bytes);
    assert_eq!(names(replica.connection()), ["green tea", "jam"]);
}

#[test]
fn filed_is_answered_and_changes_nothing_else() {
    let (_shop, mut replica, _server) = provisioned();
    let before = replica.last_applied().unwrap();
    say(&mut replica);
    let received = replica.receive(&encode_filed(vec![57, 58])).unwrap();
    assert_eq!(
        received,
        Received::Filed {
            uploads: vec![57, 58]
        }
    );
    assert_eq!(replica.last_applied().unwrap(), before);
    assert!(replica.next_up().unwrap().is_none());
}

#[test]
fn reopening_the_file_carries_on_where_it_was() {
    let shop = Shop::new();
    let mut server = Server::new();
    let snapshot;
    {
        let mut replica = shop.open();
        snapshot = server.begin(vec![part("products").product(1, "tea", 3)]);
        apply(&mut replica, &snapshot);
        // The program stops in the middle of the snapshot.
    }
    let mut replica = shop.open();
    assert!(replica.last_applied().unwrap().snapshot.is_some());
    assert!(matches!(
        replica.receive(&snapshot).unwrap(),
        Received::Already { .. }
    ));
    apply(
        &mut replica,
        &server.down(vec![part("products").product(2, "jam", 5)]),
    );
    apply(&mut replica, &server.end(&["products"]));
    drop(replica);

    let mut replica = shop.open();
    assert_eq!(names(replica.connection()), ["tea", "jam"]);
    let applied = replica.last_applied().unwrap();
    assert_eq!(
        (applied.epoch.as_str(), applied.sequence),
        (server.epoch.as_str(), server.sequence)
    );
    assert_eq!(applied.snapshot, None);
    // What it applied before it stopped was never said: it says it now.
    assert_eq!(say(&mut replica).unwrap().sequence, server.sequence);
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "green tea", 4)]),
    );
}

#[test]
fn a_gap_survives_reopening() {
    let (shop, mut replica, mut server) = provisioned();
    server.lose();
    replica.receive(&server.down(vec![])).unwrap();
    drop(replica);
    let mut replica = shop.open();
    assert_eq!(replica.last_applied().unwrap().gap, server.sequence);
    let later = server.down(vec![part("products").product(1, "x", 1)]);
    assert!(matches!(
        replica.receive(&later).unwrap(),
        Received::Gap { .. }
    ));
}

#[test]
fn the_up_echoes_the_last_applied_as_it_came() {
    let (_shop, mut replica, mut server) = provisioned();
    let mut down = server.peek(vec![]);
    // An epoch spelt in capitals, and a mac of any 16 bytes: both given back as they came.
    down.epoch = down.epoch.to_uppercase();
    down.mac = (200..216).collect();
    let (epoch, mac, sequence, nonce) = (
        down.epoch.clone(),
        down.mac.clone(),
        down.sequence,
        down.nonce,
    );
    apply(&mut replica, &encode_down(down));
    let up: Up = say(&mut replica).unwrap();
    assert_eq!(up.protocol, PROTOCOL);
    assert_eq!(
        (up.epoch, up.sequence, up.nonce, up.mac),
        (epoch, sequence, nonce, mac)
    );
}
