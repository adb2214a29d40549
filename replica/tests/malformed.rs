//! Messages no server sends, one test per case name: each is answered
//! `Malformed` with its case, applies nothing, changes nothing, and the
//! message the server really sends next still applies.

mod common;

use common::*;
use magic_sync_replica::proto::wire::{to_replica::Body, Down};
use magic_sync_replica::proto::{LARGEST_NUMBER, PROTOCOL};
use magic_sync_replica::Received;

/// The next Down a server would send, carrying a new product: spoiled by
/// each case in turn.
fn next(server: &mut Server) -> Down {
    server.peek(vec![part("products").product(7, "spoiled", 1)])
}

fn spoil(server: &mut Server, how: impl FnOnce(&mut Down)) -> Vec<u8> {
    let mut down = next(server);
    how(&mut down);
    encode_down(down)
}

fn many_parts(n: usize) -> Vec<Part> {
    (0..n).map(|_| part("orders")).collect()
}

fn check(case: &str, make: fn(&mut Server) -> Vec<u8>) {
    let (_shop, mut replica, mut server) = provisioned();
    let before = replica.last_applied().unwrap();
    say(&mut replica);

    let bytes = make(&mut server);
    match replica.receive(&bytes).unwrap() {
        Received::Malformed(m) => assert_eq!(m.case, case, "{}", m.detail),
        other => panic!("{case}: {other:?}"),
    }
    assert_eq!(
        replica.last_applied().unwrap(),
        before,
        "{case} changed the state"
    );
    assert_eq!(
        names(replica.connection()),
        ["tea", "jam"],
        "{case} applied rows"
    );
    assert!(
        replica.next_up().unwrap().is_none(),
        "{case} left something to say"
    );

    let real = server.down(vec![part("products").product(3, "rye", 2)]);
    apply(&mut replica, &real);
}

macro_rules! malformed {
    ($($case:ident => $make:expr;)*) => {
        $(
            #[test]
            fn $case() {
                check(stringify!($case), $make);
            }
        )*
    };
}

malformed! {
    does_not_decode => |_| vec![0xff, 0xff, 0xff];
    no_protocol => |s| encode(0, Some(Body::Down(next(s))));
    no_body => |_| encode(PROTOCOL, None);
    sequence_zero => |s| spoil(s, |d| d.sequence = 0);
    sequence_too_large => |s| spoil(s, |d| d.sequence = LARGEST_NUMBER + 1);
    no_nonce => |s| spoil(s, |d| d.nonce = 0);
    nonce_too_large => |s| spoil(s, |d| d.nonce = LARGEST_NUMBER + 1);
    follows_itself => |s| spoil(s, |d| d.previous = d.sequence);
    follows_a_later_one => |s| spoil(s, |d| d.previous = d.sequence + 1);
    follows_without_its_nonce => |s| spoil(s, |d| d.previous_nonce = 0);
    follows_nothing_with_a_nonce => |s| spoil(s, |d| {
        d.previous = 0;
        d.snapshot_id = uuid(99);
    });
    follows_a_nonce_too_large => |s| spoil(s, |d| d.previous_nonce = LARGEST_NUMBER + 1);
    epoch_no_uuid => |s| spoil(s, |d| d.epoch = "epoch one".into());
    snapshot_no_uuid => |s| spoil(s, |d| d.snapshot_id = "snapshot one".into());
    begins_no_snapshot => |s| spoil(s, |d| {
        d.previous = 0;
        d.previous_nonce = 0;
    });
    ends_a_snapshot_of_no_id => |s| {
        let mut end = s.peek_end(&["products"]);
        end.snapshot_id.clear();
        encode_end(end)
    };
    no_mac => |s| spoil(s, |d| d.mac.clear());
    mac_too_short => |s| spoil(s, |d| d.mac.truncate(15));
    mac_too_long => |s| spoil(s, |d| d.mac.push(0));
    keys_not_one_per_row => |s| spoil(s, |d| d.tables[0].keys.push(uuid(8)));
    more_rows_than_a_message_carries => |s| {
        let mut products = part("products");
        for n in 0..501 {
            products = products.product(n, "one too many", 1);
        }
        encode_down(s.peek(vec![products]))
    };
    more_tables_than_a_message_carries => |s| encode_down(s.peek(many_parts(501)));
    ends_more_tables_than_a_message_carries => |s| {
        let mut end = s.peek_end(&vec!["orders"; 501]);
        end.snapshot_id = uuid(99);
        encode_end(end)
    };
    files_more_uploads_than_a_message_carries => |_| encode_filed((1..=501).collect());
    names_another_snapshot => |s| spoil(s, |d| d.snapshot_id = uuid(99));
}

#[test]
fn a_message_naming_no_snapshot_while_one_is_in_progress_is_malformed() {
    let shop = Shop::new();
    let mut replica = shop.open();
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("products").product(1, "tea", 3)]),
    );
    let mut down = server.peek(vec![part("products").product(2, "jam", 5)]);
    down.snapshot_id.clear();
    let received = replica.receive(&encode_down(down)).unwrap();
    assert!(
        matches!(received, Received::Malformed(ref m) if m.case == "names_another_snapshot"),
        "{received:?}"
    );
    assert_eq!(names(replica.connection()), ["tea"]);
}

#[test]
fn a_message_naming_a_superseded_snapshot_is_malformed() {
    let shop = Shop::new();
    let mut replica = shop.open();
    let mut server = Server::new();
    apply(&mut replica, &server.begin(vec![]));
    let first = server.snapshot.clone();
    apply(&mut replica, &server.begin(vec![]));
    let mut down = server.peek(vec![part("products").product(2, "jam", 5)]);
    down.snapshot_id = first;
    let received = replica.receive(&encode_down(down)).unwrap();
    assert!(
        matches!(received, Received::Malformed(ref m) if m.case == "names_another_snapshot"),
        "{received:?}"
    );
}

#[test]
fn an_end_while_no_snapshot_is_in_progress_is_malformed() {
    let (_shop, mut replica, mut server) = provisioned();
    let mut end = server.peek_end(&["products"]);
    end.snapshot_id = uuid(99);
    let received = replica.receive(&encode_end(end)).unwrap();
    assert!(
        matches!(received, Received::Malformed(ref m) if m.case == "names_another_snapshot"),
        "{received:?}"
    );
    assert_eq!(names(replica.connection()), ["tea", "jam"]);
}
