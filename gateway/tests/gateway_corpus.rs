//! The corpus of invalid frames and requests of the mapping
//! (tests/gateway_frames/corpus.txt), replayed against the gateway: each
//! case on a link of its own, answered with the refusal the corpus names,
//! and the link going on (it still answers a ping) unless the case says it
//! ends.

mod help;

use help::{Gateway, Heard, RawLink, Shop};
use magic_sync_gateway::link::value::Value;
use magic_sync_gateway::link::{topic_name, Frame, Request};
use uuid::Uuid;

struct Case {
    name: String,
    expected: String,
    payload: String,
}

fn corpus() -> Vec<Case> {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/gateway_frames/corpus.txt"
    );
    std::fs::read_to_string(file)
        .expect("the corpus")
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let parts: Vec<&str> = line.splitn(3, '\t').collect();
            assert_eq!(parts.len(), 3, "a corpus line has three fields: {line:?}");
            Case {
                name: parts[0].to_owned(),
                expected: parts[1].to_owned(),
                payload: parts[2].to_owned(),
            }
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The payload's hex with its placeholders filled in.
fn filled(hex_text: &str, me: Uuid, other: Uuid) -> Vec<u8> {
    let mut text = hex_text.to_owned();
    for (who, id) in [("me", me), ("other", other)] {
        let name = Value::Text(topic_name(id)).encode();
        let upper = Value::Text(
            topic_name(id)
                .to_uppercase()
                .replace("MAGIC_SYNC", "magic_sync"),
        )
        .encode();
        let bytes = Value::Bytes(id.as_bytes().to_vec()).encode();
        text = text
            .replace(&format!("{{name:{who}}}"), &hex(&name))
            .replace(&format!("{{upper-name:{who}}}"), &hex(&upper))
            .replace(&format!("{{id:{who}}}"), &hex(&bytes));
    }
    unhex(&text)
}

/// Whether what the gateway said is what the case expects; answers
/// whether the link goes on.
fn judge(case: &Case, link: &mut RawLink) -> bool {
    let (kind, reason) = case
        .expected
        .split_once(':')
        .unwrap_or((case.expected.as_str(), ""));
    let heard = link.until(&case.name, |h| {
        !matches!(
            h,
            Heard::Frame(Frame::Commits { .. }) | Heard::Request(Request::Pong { .. })
        )
    });
    match (kind, heard) {
        ("refused", Heard::Request(Request::Refused { reason: got, .. })) => {
            assert_eq!(got, reason, "{}", case.name);
            true
        }
        (
            "fault",
            Heard::Frame(Frame::Fault {
                topic, reason: got, ..
            }),
        ) => {
            assert_eq!(got, reason, "{}", case.name);
            assert_ne!(
                topic, 0,
                "{}: a fault about one topic, not the link",
                case.name
            );
            true
        }
        ("refused-frame", Heard::Frame(Frame::Refused { reasons, .. })) => {
            assert_eq!(reasons[0].code, reason, "{}", case.name);
            true
        }
        (
            "ends",
            Heard::Frame(Frame::Fault {
                topic: 0,
                reason: got,
                ..
            }),
        ) => {
            assert_eq!(got, reason, "{}", case.name);
            assert_eq!(link.next(), Heard::Closed, "{}: the link ends", case.name);
            false
        }
        ("closed", Heard::Closed) => false,
        (_, other) => panic!("{}: expected {}, heard {other:?}", case.name, case.expected),
    }
}

#[test]
fn every_invalid_frame_and_request_of_the_corpus_gets_the_refusal_it_names() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let me = shop.add_register("Me");
    let other = shop.add_register("Other");
    let token = gateway.issue(me);
    let cases = corpus();
    assert!(cases.len() > 50, "the corpus is read whole");
    for case in &cases {
        let mut link = RawLink::connect(&gateway, &[&token]).expect("the credential is taken");
        if !case.name.starts_with("open-") {
            link.open(1, me);
        }
        let goes_on = match case.payload.split_once(':') {
            Some(("hex", bytes)) => {
                link.send_bytes(filled(bytes, me, other));
                judge(case, &mut link)
            }
            Some(("text", text)) => {
                link.send_text(text);
                judge(case, &mut link)
            }
            _ => panic!("{}: a payload is hex: or text:", case.name),
        };
        if goes_on {
            assert!(link.answers_a_ping(7), "{}: the link goes on", case.name);
        }
    }
    assert_eq!(shop.receipts(), [], "nothing was filed");
}
