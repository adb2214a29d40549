//! `receive` over arbitrary bytes and over valid messages mutated: it never
//! panics, and a message either applies whole or changes nothing.

mod common;

use common::*;
use magic_sync_replica::{Received, Replica};
use proptest::prelude::*;

/// Everything the replica holds and keeps, as text, to compare before and
/// after a message.
fn contents(replica: &Replica) -> Vec<String> {
    let conn = replica.connection();
    let tables = strings(
        conn,
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    );
    let mut out = Vec::new();
    for table in tables {
        let mut statement = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let width = statement.column_count();
        let mut rows: Vec<String> = statement
            .query_map([], |row| {
                let values: Vec<String> = (0..width)
                    .map(|i| format!("{:?}", row.get_ref(i).unwrap()))
                    .collect();
                Ok(values.join(","))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.push(format!("{table}: {}", rows.join("; ")));
    }
    out
}

/// A replica past its provisioning, and the bytes of the next valid message.
fn scene() -> (Shop, Replica, Vec<u8>) {
    let (shop, replica, mut server) = provisioned();
    let next = server.down(vec![
        part("products").product(1, "green tea", 4).delete(&uuid(2)),
        part("orders").row(
            "3",
            serde_json::json!({"id": 3, "product_id": uuid(1), "qty": "2"}),
        ),
    ]);
    (shop, replica, next)
}

fn check_whole_or_nothing(replica: &mut Replica, bytes: &[u8]) {
    let before = contents(replica);
    let received = replica.receive(bytes);
    let after = contents(replica);
    match received {
        Ok(Received::Applied { .. } | Received::Ended { .. }) => {
            // Applied whole: it is the last applied now.
            assert_ne!(before, after);
        }
        Ok(Received::Filed { .. }) | Ok(Received::Already { .. }) | Ok(Received::Gap { .. }) => {
            // These change only where the replica stands, never a row.
            let rows = |c: &[String]| -> Vec<String> {
                c.iter()
                    .filter(|t| !t.starts_with("sync_state"))
                    .cloned()
                    .collect()
            };
            assert_eq!(rows(&before), rows(&after));
        }
        Ok(Received::Malformed(_)) | Err(_) => assert_eq!(before, after),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_and_change_nothing_unless_applied(
        bytes in proptest::collection::vec(any::<u8>(), 0..256)
    ) {
        let (_shop, mut replica, _) = scene();
        check_whole_or_nothing(&mut replica, &bytes);
    }

    #[test]
    fn a_mutated_message_applies_whole_or_changes_nothing(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let (_shop, mut replica, mut bytes) = scene();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        check_whole_or_nothing(&mut replica, &bytes);
    }
}
