//! Wishes, inside a backend (`cargo pgrx test`): how a wish is encoded as
//! it is sent, and a digest of sync_wishes held against the answers the
//! server keeps. Each test in a transaction of its own, rolled back after.

#[pgrx::pg_schema]
#[allow(clippy::module_inception)]
mod tests {
    use pgrx::prelude::*;
    use prost::Message;
    use serde_json::{json, Value};

    use magic_sync_proto::digest::{fingerprint, wish_line};
    use magic_sync_proto::wire::{Digest, Up, Wish};

    use crate::catalog::{self, wishes};
    use crate::message::row::{sql, Travel};
    use crate::seal::{self, Sealed};

    const SHOP: &str = "
        CREATE SCHEMA shop;
        CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
        CREATE TABLE shop.footers (register_id uuid PRIMARY KEY, text text NOT NULL,
                                   changed_at timestamptz NOT NULL, printed bigint NOT NULL DEFAULT 0);
        SELECT sync.declare_replicas('shop.registers', live => 'active');
        SELECT sync.declare_table('shop.footers', mirror => 'setting', origin => 'register_id',
                                  version => 'changed_at', desired => '{text}', apply => 'if_unchanged',
                                  unmirrored => '{printed}');
        INSERT INTO shop.registers (id) VALUES ('00000000-0000-0000-0000-00000000000a');
        INSERT INTO shop.footers VALUES ('00000000-0000-0000-0000-00000000000a', 'Thank you',
                                         '2026-10-12 10:00:00.123456+00', 3);
        INSERT INTO sync.epochs (id, secret) VALUES ('00000000-0000-0000-0000-0000000000e1', '\\x0101010101010101010101010101010101010101010101010101010101010101');
        INSERT INTO sync.replicas (id, live, provision, epoch, last_sequence, last_nonce,
                                   snapshot_sequence, applied_epoch, applied_sequence, applied_nonce)
        VALUES ('00000000-0000-0000-0000-00000000000a', true, false,
                '00000000-0000-0000-0000-0000000000e1', 11, 1100, 5,
                '00000000-0000-0000-0000-0000000000e1', 10, 1000);
        INSERT INTO sync.sync_wishes (id, replica, table_name, key, wanted, based_on, version, note)
        VALUES ('00000000-0000-0000-0000-00000000f001', '00000000-0000-0000-0000-00000000000a',
                'footers', '00000000-0000-0000-0000-00000000000a', '{\"text\": \"Hello\"}',
                '\"2026-10-12T10:00:00.123456Z\"', 7, 'from the page');
        INSERT INTO sync.held_recorded (replica, table_name, key, note, sent)
        VALUES ('00000000-0000-0000-0000-00000000000a', 'sync_wishes',
                '00000000-0000-0000-0000-00000000f001', 0, 11);
    ";

    const A: &str = "00000000-0000-0000-0000-00000000000a";
    const E: &str = "00000000-0000-0000-0000-0000000000e1";
    const WISH: &str = "00000000-0000-0000-0000-00000000f001";

    fn run(sql: &str) {
        Spi::run(sql).unwrap();
    }

    /// The wish as a pass would send it: the Wish message, decoded.
    fn as_sent() -> Wish {
        let tables = wishes::with_wishes(catalog::declared_tables());
        let table = tables
            .iter()
            .find(|t| Travel::of(t) == Travel::AsWish)
            .unwrap();
        let bytes = Spi::get_one::<Vec<u8>>(&format!(
            "SELECT {} FROM sync.sync_wishes AS t",
            sql::row_bytes(table, "t")
        ))
        .unwrap()
        .unwrap();
        Wish::decode(bytes.as_slice()).unwrap()
    }

    /// An Up saying the replica applied message 11 (the last sent it),
    /// sealed, with these digests.
    fn applied_with(digests: Vec<Digest>) -> Up {
        let (sequence, nonce) = (11, 1100);
        let mac = seal::seal(
            &[1u8; 32],
            &Sealed {
                replica: A.parse().unwrap(),
                epoch: E.parse().unwrap(),
                sequence,
                nonce,
            },
        );
        Up {
            protocol: 1,
            epoch: E.into(),
            sequence,
            nonce,
            mac: mac.to_vec(),
            digests,
            ..Up::default()
        }
    }

    fn receive(up: &Up) -> Value {
        Spi::get_one_with_args::<pgrx::JsonB>(
            "SELECT sync.receive($1::uuid, $2)",
            &[A.into(), up.encode_to_vec().into()],
        )
        .unwrap()
        .unwrap()
        .0
    }

    fn digest_of(lines: &[String]) -> Digest {
        Digest {
            table: "sync_wishes".into(),
            count: lines.len() as u64,
            fingerprint: fingerprint(lines),
        }
    }

    #[pg_test]
    fn a_wish_is_sent_as_the_setting_row_the_server_holds_with_the_wish_laid_over() {
        run(SHOP);
        let wish = as_sent();
        assert_eq!(wish.id, WISH);
        assert_eq!((wish.table.as_str(), wish.key.as_str()), ("footers", A));
        assert_eq!((wish.version, wish.note.as_str()), (7, "from the page"));
        assert_eq!((wish.answered, wish.outcome.as_str()), (0, ""));
        let wanted: Value = serde_json::from_slice(&wish.wanted).unwrap();
        // Its travelling columns only: printed does not travel.
        assert_eq!(
            wanted,
            json!({"register_id": A, "text": "Hello", "changed_at": "2026-10-12T10:00:00.123456Z"})
        );
    }

    #[pg_test]
    fn a_wish_of_a_row_the_server_no_longer_holds_is_sent_as_the_row_wished() {
        run(SHOP);
        run("DELETE FROM shop.footers");
        let wanted: Value = serde_json::from_slice(&as_sent().wanted).unwrap();
        assert_eq!(
            wanted,
            json!({"register_id": A, "text": "Hello", "changed_at": "2026-10-12T10:00:00.123456Z"})
        );
    }

    #[pg_test]
    fn a_digest_of_sync_wishes_is_held_against_the_answers_the_server_keeps() {
        run(SHOP);
        let unanswered = vec![wish_line(WISH, None)];
        let verdict = receive(&applied_with(vec![digest_of(&unanswered)]));
        assert_eq!(
            verdict["digests"]["tables"]["sync_wishes"], "matches",
            "{verdict}"
        );
        // Answered applied: the line says the version and the outcome.
        run(&format!(
            "UPDATE sync.sync_wishes SET answered = 7, outcome = 'applied' WHERE id = '{WISH}'; \
             UPDATE sync.replicas SET digests_at = NULL WHERE id = '{A}'"
        ));
        let applied = vec![wish_line(WISH, Some(("7", "applied")))];
        let verdict = receive(&applied_with(vec![digest_of(&applied)]));
        assert_eq!(
            verdict["digests"]["tables"]["sync_wishes"], "matches",
            "{verdict}"
        );
        // A replica that holds no answer of it (restored from an older
        // copy, say) differs, and is provisioned again.
        run(&format!(
            "UPDATE sync.replicas SET digests_at = NULL WHERE id = '{A}'"
        ));
        let verdict = receive(&applied_with(vec![digest_of(&unanswered)]));
        assert_eq!(
            verdict["digests"]["tables"]["sync_wishes"], "differs",
            "{verdict}"
        );
        assert_eq!(verdict["digests"]["then"], "provisioned again");
    }

    /// The state the listing says the replica is in, and its wishes.
    fn listed() -> (String, Value) {
        let listing = Spi::get_one::<pgrx::JsonB>("SELECT sync.listing()")
            .unwrap()
            .unwrap()
            .0;
        let line = &listing["replicas"][0];
        (
            line["state"].as_str().unwrap().to_owned(),
            line["wishes"].clone(),
        )
    }

    #[pg_test]
    fn a_replica_with_a_wish_not_answered_is_catching_up_and_one_waiting_is_answered() {
        run(SHOP);
        // Everything else where it should be: every message confirmed, no
        // change waiting to be planned.
        run(&format!(
            "UPDATE sync.replicas SET applied_sequence = 11, applied_nonce = 1100 WHERE id = '{A}'; \
             DELETE FROM sync.notes"
        ));
        let (state, wishes) = listed();
        assert_eq!(state, "catching_up");
        assert_eq!(wishes["pending"], 1);
        run(&format!(
            "UPDATE sync.sync_wishes SET answered = 7, outcome = 'waiting', reason = 'off' WHERE id = '{WISH}'"
        ));
        let (state, wishes) = listed();
        assert_eq!(state, "synced");
        assert_eq!(
            (wishes["pending"].clone(), wishes["waiting"].clone()),
            (json!(0), json!(1))
        );
        // An answer of a version replaced since leaves it pending.
        run(&format!(
            "UPDATE sync.sync_wishes SET answered = 5, outcome = 'applied' WHERE id = '{WISH}'"
        ));
        assert_eq!(listed().0, "catching_up");
    }

    #[pg_test]
    fn a_digest_of_sync_wishes_waits_while_the_inbox_keeps_answers_of_the_replica() {
        run(SHOP);
        run(&format!(
            "INSERT INTO sync.inbox (replica, table_name, key, op, row, reason, waiting, retry_at) \
             VALUES ('{A}', 'sync_wishes', '{WISH}', 'u', '{{}}', 'refused', false, now() + interval '1 hour')"
        ));
        let verdict = receive(&applied_with(vec![digest_of(&[wish_line(WISH, None)])]));
        assert_eq!(
            verdict["digests"]["tables"]["sync_wishes"], "skipped: rows of it wait in the inbox",
            "{verdict}"
        );
    }
}
