//! Hostile devices against the gateway's binary: who a device is comes
//! only from its credential, a revoked credential ends its links, and the
//! bounds hold (frame size, a flood, silence, the number of links). The
//! aweft case names: bad-frame, no-topic, root-mismatch (and each of the
//! invalid fixtures) are in the corpus (gateway_corpus.rs); here, what
//! needs more than one frame.

mod help;

use std::net::TcpStream;

use help::{open_register, Gateway, Heard, RawLink, Shop};
use magic_sync_gateway::link::{topic_name, Frame, Request};
use tungstenite::protocol::Role;
use tungstenite::{Message, WebSocket};

fn fault_reason(heard: &Heard) -> Option<(u64, &str)> {
    match heard {
        Heard::Frame(Frame::Fault { topic, reason, .. }) => Some((*topic, reason.as_str())),
        _ => None,
    }
}

fn is_fault(heard: &Heard) -> bool {
    fault_reason(heard).is_some()
}

#[test]
fn a_device_with_one_registers_credential_cannot_open_read_or_upload_as_another() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let mine = shop.add_register("Mine");
    let theirs = shop.add_register("Theirs");
    help::wait_until("the other register's provisioning queued", || {
        queued(&mut shop, theirs) > 0
    });
    let waiting = queued(&mut shop, theirs);
    let mut link = RawLink::connect(&gateway, &[&gateway.issue(mine)]).unwrap();

    // Open: refused, and the topic never becomes live.
    link.send(&Frame::Open {
        topic: 1,
        name: topic_name(theirs),
        root: Some(magic_sync_gateway::link::root_of(theirs)),
        want: false,
    });
    let heard = link.until("the refusal", is_fault);
    assert_eq!(fault_reason(&heard), Some((1, "not-allowed")));
    // Read: nothing of theirs comes, and their messages stay queued.
    link.request(&Request::Ack { topic: 1, seq: 1 });
    let heard = link.until("the ack refused", |h| {
        matches!(h, Heard::Request(Request::Refused { .. }))
    });
    assert!(
        matches!(heard, Heard::Request(Request::Refused { reason, .. }) if reason == "no-topic")
    );
    assert_eq!(
        queued(&mut shop, theirs),
        waiting,
        "nothing of theirs was taken"
    );

    // Upload: an Up their register built, sent on my topic, is filed as
    // mine, and their receipt in it is left out.
    let ours = link.open(2, mine);
    let their_file = shop.file_of(theirs);
    let mut their_register = open_register(&their_file, theirs);
    help::sell(&their_file, theirs, 666);
    let up = their_register
        .next_up()
        .unwrap()
        .expect("their receipt goes up");
    link.send(&Frame::Commits {
        topic: 2,
        first: 1,
        commits: vec![up.bytes.clone()],
    });
    let heard = link.until("the Up answered", |h| {
        matches!(
            h,
            Heard::Request(Request::Taken { .. }) | Heard::Frame(Frame::Refused { .. })
        )
    });
    assert_eq!(
        heard,
        Heard::Request(Request::Taken {
            topic: ours,
            seq: 1
        })
    );
    assert_eq!(shop.receipts(), [], "no receipt filed as theirs");
}

fn queued(shop: &mut Shop, replica: uuid::Uuid) -> i64 {
    shop.pg
        .query_one(
            "SELECT count(*) FROM sync.outbox WHERE replica = $1",
            &[&replica],
        )
        .unwrap()
        .get(0)
}

#[test]
fn a_revoked_credential_is_refused_at_the_next_connect_and_its_open_links_are_ended() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let me = shop.add_register("R");
    let token = gateway.issue(me);
    let mut link = RawLink::connect(&gateway, &[&token]).unwrap();
    link.open(1, me);

    assert_eq!(gateway.revoke(me), "1 credential(s) revoked");
    let heard = link.until("the link ended", is_fault);
    assert_eq!(fault_reason(&heard), Some((0, "revoked")));
    assert_eq!(link.next(), Heard::Closed);
    assert_eq!(RawLink::connect(&gateway, &[&token]).err(), Some(401));
}

#[test]
fn a_credential_presented_on_the_request_channel_allows_its_replica_and_a_bad_one_is_refused() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let me = shop.add_register("R");
    let mut link = RawLink::connect(&gateway, &[]).expect("a link may say who it is later");
    link.request(&Request::Credential {
        token: "msgw.forged".into(),
    });
    let heard = link.next();
    assert!(
        matches!(heard, Heard::Request(Request::Refused { reason, .. }) if reason == "bad-credential")
    );
    link.request(&Request::Credential {
        token: gateway.issue(me),
    });
    assert_eq!(
        link.next(),
        Heard::Request(Request::Allowed {
            replica: me.to_string()
        })
    );
    link.open(1, me);
    assert_eq!(
        RawLink::connect(&gateway, &["msgw.forged"]).err(),
        Some(401)
    );
}

#[test]
fn a_commit_over_the_message_limit_is_refused_too_large_and_a_frame_over_the_frame_limit_ends_the_link(
) {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &["--message-bytes", "1000"]);
    let me = shop.add_register("R");
    let token = gateway.issue(me);
    let mut link = RawLink::connect(&gateway, &[&token]).unwrap();
    let ours = link.open(1, me);
    link.send(&Frame::Commits {
        topic: 1,
        first: 1,
        commits: vec![vec![0; 1500]],
    });
    let heard = link.until("the refusal", |h| {
        matches!(h, Heard::Frame(Frame::Refused { .. }))
    });
    let Heard::Frame(Frame::Refused {
        topic,
        seq,
        reasons,
    }) = heard
    else {
        unreachable!()
    };
    assert_eq!(
        (topic, seq, reasons[0].code.as_str()),
        (ours, 1, "too-large")
    );
    assert!(link.answers_a_ping(1), "the link goes on");

    link.send(&Frame::Commits {
        topic: 1,
        first: 2,
        commits: vec![vec![0; 20_000]],
    });
    assert_eq!(
        link.until("the link ended", |h| *h == Heard::Closed),
        Heard::Closed
    );
    assert_eq!(shop.receipts(), []);
}

#[test]
fn a_flood_of_frames_is_answered_in_order_one_at_a_time_and_the_link_goes_on() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let me = shop.add_register("R");
    let mut register = open_register(&shop.file_of(me), me);
    let up = register
        .next_up()
        .unwrap()
        .expect("where the register stands");
    let mut link = RawLink::connect(&gateway, &[&gateway.issue(me)]).unwrap();
    let ours = link.open(1, me);

    // A second writer on the same socket: the device sends without
    // reading, and only the socket's own buffers slow it.
    const FLOOD: u64 = 500;
    let tcp: TcpStream = link.tcp().try_clone().unwrap();
    let flooding = std::thread::spawn(move || {
        let mut writer = WebSocket::from_raw_socket(tcp, Role::Client, None);
        for seq in 1..=FLOOD {
            let frame = Frame::Commits {
                topic: 1,
                first: seq,
                commits: vec![up.bytes.clone()],
            };
            writer.send(Message::Binary(frame.encode().into())).unwrap();
        }
    });
    let mut answered = Vec::new();
    while answered.len() < FLOOD as usize {
        match link.next() {
            Heard::Request(Request::Taken { topic, seq }) => {
                assert_eq!(topic, ours);
                answered.push(seq);
            }
            Heard::Closed => panic!("the link ended after {} answers", answered.len()),
            _ => {}
        }
    }
    flooding.join().unwrap();
    assert_eq!(
        answered,
        (1..=FLOOD).collect::<Vec<_>>(),
        "every Up filed, in order"
    );
}

#[test]
fn a_link_that_says_nothing_is_closed_after_the_idle_timeout() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &["--idle-timeout", "0.5"]);
    let me = shop.add_register("R");
    let mut link = RawLink::connect(&gateway, &[&gateway.issue(me)]).unwrap();
    let heard = link.until("the link ended", is_fault);
    assert_eq!(fault_reason(&heard), Some((0, "idle")));
    assert_eq!(link.next(), Heard::Closed);
}

#[test]
fn links_past_the_maximum_are_refused_until_one_ends() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &["--max-links", "2"]);
    let me = shop.add_register("R");
    let token = gateway.issue(me);
    let first = RawLink::connect(&gateway, &[&token]).unwrap();
    let _second = RawLink::connect(&gateway, &[&token]).unwrap();
    assert_eq!(RawLink::connect(&gateway, &[&token]).err(), Some(503));
    drop(first);
    help::wait_until("a place free again", || {
        RawLink::connect(&gateway, &[&token]).is_ok()
    });
}
