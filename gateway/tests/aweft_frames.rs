//! aweft's frame fixtures, v1 (github: torrinworx/aweft, spec/frames/ at
//! commit 953cf6568080b9576ca863175c59a4a64ae1f381), as test vectors: each
//! valid fixture's frame encodes to its bytes exactly and its bytes decode
//! to it; each invalid one is refused for the reason it names. The bytes
//! are the fixtures' own; the frames are written here from each fixture's
//! decoded form.

use magic_sync_gateway::link::frame::{Frame, NotAFrame, Reason, Root, RootKind};

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

const ID_01: &str = "0102030405060708090a0b0c";
/// The commit of fixtures 003 and 005: one add of "title" = "plan".
const COMMIT_TITLE: &str = "818184004c0102030405060708090a0b0c8200657469746c6564706c616e";
/// The second commit of fixture 005: a remove of "gone".
const COMMIT_GONE: &str = "818183024c0102030405060708090a0b0c820064676f6e65";

fn valid_fixtures() -> Vec<(&'static str, Frame, &'static str)> {
    vec![
        (
            "001-open",
            Frame::Open {
                topic: 1,
                name: "board:42".into(),
                root: Some(Root {
                    id: unhex(ID_01),
                    kind: RootKind::Object,
                }),
                want: false,
            },
            "86000168626f6172643a34324c0102030405060708090a0b0c00f4",
        ),
        (
            "002-open-want",
            Frame::Open {
                topic: 4,
                name: "board:42".into(),
                root: Some(Root {
                    id: unhex("1112131415161718191a1b1c"),
                    kind: RootKind::Map,
                }),
                want: true,
            },
            "86000468626f6172643a34324c1112131415161718191a1b1c02f5",
        ),
        (
            "003-state",
            Frame::State {
                topic: 2,
                commit: Some(unhex(COMMIT_TITLE)),
            },
            "830102581e818184004c0102030405060708090a0b0c8200657469746c6564706c616e",
        ),
        (
            "004-state-empty",
            Frame::State {
                topic: 2,
                commit: None,
            },
            "830102f6",
        ),
        (
            "005-commits",
            Frame::Commits {
                topic: 1,
                first: 5,
                commits: vec![unhex(COMMIT_TITLE), unhex(COMMIT_GONE)],
            },
            "8402010582581e818184004c0102030405060708090a0b0c8200657469746c6564706c616e58\
             18818183024c0102030405060708090a0b0c820064676f6e65",
        ),
        (
            "006-refused",
            Frame::Refused {
                topic: 3,
                seq: 4,
                reasons: vec![
                    Reason {
                        code: "not-here".into(),
                        message: "users/x/verified is not written at this end".into(),
                        path: Some(vec!["users".into(), "x".into(), "verified".into()]),
                    },
                    Reason::new(
                        "unreachable",
                        "AQIDBAUGBwgJCgsM has no attach path from the root",
                    ),
                ],
            },
            "840303048283686e6f742d68657265782b75736572732f782f7665726966696564206973206e6f74\
             207772697474656e206174207468697320656e64836575736572736178687665726966696564836b\
             756e726561636861626c65783141514944424155474277674a4367734d20686173206e6f20617474\
             61636820706174682066726f6d2074686520726f6f74f6",
        ),
        ("007-leave", Frame::Leave { topic: 7 }, "820407"),
        (
            "008-fault-topic",
            Frame::Fault {
                topic: 6,
                reason: "no-topic".into(),
                message: "nothing here is open as topic 6".into(),
            },
            "840506686e6f2d746f706963781f6e6f7468696e672068657265206973206f70656e20617320746f\
             7069632036",
        ),
        (
            "009-fault-link",
            Frame::Fault {
                topic: 0,
                reason: "bad-frame".into(),
                message: "a frame is a non-empty array".into(),
            },
            "840500696261642d6672616d65781c61206672616d652069732061206e6f6e2d656d707479206172\
             726179",
        ),
        (
            "010-open-nothing",
            Frame::Open {
                topic: 2,
                name: "board:42".into(),
                root: None,
                want: true,
            },
            "86000268626f6172643a3432f6f6f5",
        ),
    ]
}

/// Every invalid fixture of v1, by its name, and its bytes: each names
/// `bad-frame` as its reason.
const INVALID_FIXTURES: [(&str, &str); 20] = [
    ("invalid-001-not-an-array", "646f70656e"),
    ("invalid-002-empty", "80"),
    ("invalid-003-unknown-kind", "82186301"),
    ("invalid-004-wrong-arity", "83040100"),
    ("invalid-005-topic-not-a-number", "820465626f617264"),
    ("invalid-006-empty-commits", "8402010180"),
    ("invalid-007-empty-reasons", "8403010180"),
    (
        "invalid-008-unknown-root-kind",
        "86000161624c0102030405060708090a0b0c09f4",
    ),
    (
        "invalid-009-want-not-a-boolean",
        "86000161624c0102030405060708090a0b0c0063796573",
    ),
    (
        "invalid-010-name-not-text",
        "860001074c0102030405060708090a0b0c00f4",
    ),
    (
        "invalid-011-root-not-bytes",
        "8600016162696e6f7420627974657300f4",
    ),
    (
        "invalid-012-commit-not-bytes",
        "8402010181696e6f74206279746573",
    ),
    (
        "invalid-013-reason-path-not-text",
        "840301018183616161628101",
    ),
    ("invalid-014-reason-wrong-arity", "84030101818261616162"),
    ("invalid-015-fault-message-not-text", "8405006377687901"),
    ("invalid-016-topic-zero", "820400"),
    (
        "invalid-017-sequence-zero",
        "8402010081581e818184004c0102030405060708090a0b0c8200657469746c6564706c616e",
    ),
    (
        "invalid-018-refused-sequence-zero",
        "84030100818361616162f6",
    ),
    ("invalid-019-open-half-a-root", "8600016162f600f5"),
    ("invalid-020-open-nothing-without-want", "8600016162f6f6f4"),
];

#[test]
fn every_valid_fixture_encodes_to_its_bytes_and_decodes_to_its_frame() {
    for (name, frame, bytes) in valid_fixtures() {
        let bytes = unhex(bytes);
        assert_eq!(frame.encode(), bytes, "{name} encodes to its bytes");
        assert_eq!(
            Frame::decode(&bytes),
            Ok(frame),
            "{name} decodes to its frame"
        );
    }
}

#[test]
fn every_invalid_fixture_is_refused_as_bad_frame_and_does_not_end_the_link() {
    for (name, bytes) in INVALID_FIXTURES {
        let refused = Frame::decode(&unhex(bytes)).expect_err(name);
        assert!(
            matches!(refused, NotAFrame::BadFrame(_)),
            "{name}: {refused:?}"
        );
        assert_eq!(refused.reason(), "bad-frame", "{name}");
        assert!(!refused.ends_the_link(), "{name}");
    }
}

#[test]
fn bytes_that_do_not_decode_end_the_link_with_the_formats_reason() {
    // A commits frame cut short, and one with a byte after its end.
    let truncated = Frame::decode(&unhex("8402010581581e8181")).unwrap_err();
    assert_eq!(truncated.reason(), "truncated");
    assert!(truncated.ends_the_link());
    let trailing = Frame::decode(&unhex("82040700")).unwrap_err();
    assert_eq!(trailing.reason(), "trailing-bytes");
    assert!(trailing.ends_the_link());
}
