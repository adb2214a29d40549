//! Filing, inside a backend (`cargo pgrx test`): each test in a
//! transaction of its own, rolled back after (so `now()` stands still in
//! it, and what a test says happens a minute later, it writes).

#[pgrx::pg_schema]
#[allow(clippy::module_inception)]
mod tests {
    use pgrx::prelude::*;
    use prost::Message;
    use serde_json::{json, Value};

    use magic_sync_proto::wire::{Digest, Rejection, Up, UpTable};

    use crate::seal::{self, Sealed};

    const SHOP: &str = "
        CREATE SCHEMA shop;
        CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
        CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL);
        CREATE TABLE shop.register_state (id uuid PRIMARY KEY, register_id uuid NOT NULL,
                                          note text NOT NULL DEFAULT '', battery integer);
        SELECT sync.declare_replicas('shop.registers', live => 'active');
        SELECT sync.declare_table('shop.products', sync => 'broadcast');
        SELECT sync.declare_table('shop.register_state', mirror => 'both', sync => 'assigned(register_id)',
                                  origin => 'register_id', replica_owned => '{battery}');
        INSERT INTO shop.registers (id) VALUES ('00000000-0000-0000-0000-00000000000a');
        INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-000000000001', 'Tea'),
                                         ('00000000-0000-0000-0000-000000000002', 'Jam');
        INSERT INTO shop.register_state (id, register_id, note) VALUES
            ('00000000-0000-0000-0000-0000000000c1', '00000000-0000-0000-0000-00000000000a', 'till'),
            ('00000000-0000-0000-0000-0000000000c2', '00000000-0000-0000-0000-00000000000a', 'drawer');
        INSERT INTO sync.epochs (id, secret) VALUES ('00000000-0000-0000-0000-0000000000e1', '\\x0101010101010101010101010101010101010101010101010101010101010101');
        INSERT INTO sync.replicas (id, live, provision, epoch, last_sequence, last_nonce,
                                   snapshot_sequence, applied_epoch, applied_sequence, applied_nonce)
        VALUES ('00000000-0000-0000-0000-00000000000a', true, false,
                '00000000-0000-0000-0000-0000000000e1', 11, 1100, 5,
                '00000000-0000-0000-0000-0000000000e1', 10, 1000);
    ";

    const A: &str = "00000000-0000-0000-0000-00000000000a";
    const E: &str = "00000000-0000-0000-0000-0000000000e1";
    const TEA: &str = "00000000-0000-0000-0000-000000000001";
    const JAM: &str = "00000000-0000-0000-0000-000000000002";
    const TILL: &str = "00000000-0000-0000-0000-0000000000c1";
    const DRAWER: &str = "00000000-0000-0000-0000-0000000000c2";

    fn run(sql: &str) {
        Spi::run(sql).unwrap();
    }

    fn one<T: FromDatum + IntoDatum>(sql: &str) -> Option<T> {
        Spi::get_one::<T>(sql).unwrap()
    }

    /// What the relay records sending: a row held as of message `sent`.
    fn held(table: &str, key: &str, sent: i64) {
        run(&format!(
            "INSERT INTO sync.held_recorded (replica, table_name, key, note, sent) VALUES ('{A}', '{table}', '{key}', 0, {sent}) \
             ON CONFLICT (replica, table_name, key) DO UPDATE SET sent = excluded.sent, leaving = NULL"
        ));
    }

    /// The relay sent message `sequence` (nonce sequence * 100).
    fn sent_up_to(sequence: i64) {
        run(&format!(
            "UPDATE sync.replicas SET last_sequence = {sequence}, last_nonce = {} WHERE id = '{A}'",
            sequence * 100
        ));
    }

    /// An Up saying the replica applied message `sequence`, sealed.
    fn applied(sequence: u64) -> Up {
        let nonce = sequence * 100;
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

    fn battery(of: &str) -> Option<i32> {
        one::<i32>(&format!(
            "SELECT battery FROM shop.register_state WHERE id = '{of}'"
        ))
    }

    fn edit(battery: i32) -> UpTable {
        UpTable {
            table: "register_state".into(),
            upserts: vec![json!({"id": TILL, "battery": battery.to_string()})
                .to_string()
                .into_bytes()],
            keys: vec![TILL.into()],
            ..UpTable::default()
        }
    }

    #[pg_test]
    fn an_edit_that_comes_while_the_replica_is_provisioned_again_waits_until_it_holds_the_row() {
        run(SHOP);
        run(&format!(
            "UPDATE sync.replicas SET provision = true WHERE id = '{A}'"
        ));
        let verdict = receive(&Up {
            tables: vec![edit(50)],
            uploads: vec![9],
            ..applied(10)
        });
        assert_eq!(verdict["rows"][0]["waiting"], json!([TILL]), "{verdict}");
        assert_eq!(battery(TILL), None);
        assert_eq!(verdict["answered"], json!([9]), "it counts as filed");

        // The snapshot is written (it carries the row), then applied.
        held("register_state", TILL, 12);
        sent_up_to(12);
        run(&format!(
            "UPDATE sync.replicas SET provision = false, snapshot_sequence = 12 WHERE id = '{A}'"
        ));
        let verdict = receive(&applied(12));
        assert_eq!(verdict["refiled"]["filed"], 1, "{verdict}");
        assert_eq!(battery(TILL), Some(50));
        assert_eq!(one::<i64>("SELECT count(*) FROM sync.inbox"), Some(0));
    }

    #[pg_test]
    fn an_edit_of_a_row_the_server_is_taking_back_is_left_out() {
        run(SHOP);
        held("register_state", TILL, 9);
        run(&format!(
            "UPDATE sync.held_recorded SET leaving = 11 WHERE key = '{TILL}'"
        ));
        let verdict = receive(&Up {
            tables: vec![edit(50)],
            uploads: vec![7],
            ..applied(10)
        });
        assert!(
            verdict["rows"][0]["left_out"][0]["why"]
                .as_str()
                .unwrap()
                .contains("taking back"),
            "{verdict}"
        );
        assert_eq!(battery(TILL), None);
        // One never sent it is malformed.
        run(&format!(
            "DELETE FROM sync.held_recorded WHERE key = '{TILL}'"
        ));
        let verdict = receive(&Up {
            tables: vec![edit(51)],
            uploads: vec![8],
            ..applied(10)
        });
        assert!(
            verdict["rows"][0]["left_out"][0]["why"]
                .as_str()
                .unwrap()
                .contains("does not hold"),
            "{verdict}"
        );
    }

    #[pg_test]
    fn a_refusal_is_taken_once_a_later_message_that_carries_the_row_is_applied() {
        run(SHOP);
        held("products", TEA, 11);
        let rejection = Rejection {
            table: "products".into(),
            key: TEA.to_uppercase(),
            reason: "check failed".into(),
            epoch: E.into(),
            sequence: 11,
            held_back: false,
        };
        let verdict = receive(&Up {
            rejected: vec![rejection.clone()],
            ..applied(11)
        });
        assert_eq!(verdict["applied"], "counted", "{verdict}");
        let refused = format!("SELECT refused FROM sync.held WHERE key = '{TEA}'");
        assert_eq!(one::<String>(&refused).as_deref(), Some("check failed"));
        assert_eq!(
            one::<bool>("SELECT retry_at > now() FROM sync.held WHERE refused IS NOT NULL"),
            Some(true)
        );

        // Of an older message than the last that carried it: left out.
        held("products", TEA, 12);
        sent_up_to(12);
        let verdict = receive(&Up {
            rejected: vec![Rejection {
                sequence: 10,
                ..rejection
            }],
            ..applied(11)
        });
        assert!(
            verdict["rejections"][0]["verdict"]
                .as_str()
                .unwrap()
                .contains("left out"),
            "{verdict}"
        );
        // The relay sent it again in 12; applying 12 takes the refusal.
        receive(&applied(12));
        assert_eq!(one::<String>(&refused), None);
    }

    #[pg_test]
    fn a_delete_of_its_own_row_leaves_it_held_where_a_message_on_its_way_carries_it() {
        run(SHOP);
        held("register_state", TILL, 12);
        held("register_state", DRAWER, 9);
        sent_up_to(12);
        let deletes = UpTable {
            table: "register_state".into(),
            deletes: vec![TILL.into(), DRAWER.into()],
            ..UpTable::default()
        };
        let verdict = receive(&Up {
            tables: vec![deletes],
            uploads: vec![4],
            ..applied(11)
        });
        assert_eq!(verdict["rows"][0]["deleted"], 2, "{verdict}");
        assert_eq!(
            one::<i64>("SELECT count(*) FROM shop.register_state"),
            Some(0)
        );
        let held: Option<String> =
            one("SELECT string_agg(key, ',') FROM sync.held WHERE table_name = 'register_state'");
        assert_eq!(
            held.as_deref(),
            Some(TILL),
            "12 carries the till, and 11 was the last applied"
        );
    }

    #[pg_test]
    fn a_replica_that_says_it_needs_provisioning_again_and_again_waits_between() {
        run(SHOP);
        let verdict = receive(&Up {
            gap: 11,
            ..applied(10)
        });
        assert_eq!(verdict["gap"], "provisioned again", "{verdict}");
        // The relay provisions it (from a snapshot that began before 11);
        // it says so again within the minute.
        run(&format!(
            "UPDATE sync.replicas SET provision = false WHERE id = '{A}'"
        ));
        let verdict = receive(&Up {
            gap: 11,
            ..applied(10)
        });
        assert_eq!(verdict["gap"], "provisioned again once it may", "{verdict}");
        assert_eq!(
            one::<bool>("SELECT provision FROM sync.replicas"),
            Some(false)
        );
        assert_eq!(
            one::<bool>("SELECT provision_at = now() + interval '1 minute' FROM sync.replicas"),
            Some(true)
        );
        // A gap past anything sent is none it could have missed.
        let verdict = receive(&Up {
            gap: 99,
            ..applied(10)
        });
        assert_eq!(verdict["gap"], "past anything sent: left out", "{verdict}");
    }

    #[pg_test]
    fn digests_that_differ_provision_again_and_again_within_a_day_only_raise_an_alarm() {
        run(SHOP);
        held("products", TEA, 11);
        held("products", JAM, 11);
        let digests = vec![Digest {
            table: "products".into(),
            count: 1,
            fingerprint: 7,
        }];
        let verdict = receive(&Up {
            digests: digests.clone(),
            ..applied(11)
        });
        assert_eq!(
            verdict["digests"]["tables"]["products"], "differs",
            "{verdict}"
        );
        assert_eq!(verdict["digests"]["then"], "provisioned again");
        // Provisioned, ten minutes on, and they differ again.
        run(&format!(
            "UPDATE sync.replicas SET provision = false, digests_at = NULL WHERE id = '{A}'"
        ));
        let verdict = receive(&Up {
            digests: digests.clone(),
            ..applied(11)
        });
        assert_eq!(
            verdict["digests"]["then"], "differ again within a day: logged, not acted on",
            "{verdict}"
        );
        assert_eq!(
            one::<bool>("SELECT provision FROM sync.replicas"),
            Some(false)
        );
        assert_eq!(one::<i64>("SELECT count(*) FROM sync.alarms"), Some(1));
        // Sooner than ten minutes after the last comparison: not compared.
        let verdict = receive(&Up {
            digests: digests.clone(),
            ..applied(11)
        });
        assert_eq!(
            verdict["digests"],
            "not compared: compared less than ten minutes ago"
        );
        // Two digests of one table: none compared.
        let twice = vec![digests[0].clone(), digests[0].clone()];
        let verdict = receive(&Up {
            digests: twice,
            ..applied(11)
        });
        assert_eq!(
            verdict["digests"],
            "malformed: two digests of one table; none compared"
        );
    }

    #[pg_test]
    fn matching_digests_leave_out_the_rows_the_replica_refused() {
        run(SHOP);
        held("products", TEA, 11);
        held("products", JAM, 11);
        run(&format!(
            "UPDATE sync.held_recorded SET refused = 'no', refused_by = 11 WHERE key = '{JAM}'"
        ));
        let fingerprint = magic_sync_proto::digest::fingerprint([TEA]);
        let digests = vec![
            Digest {
                table: "products".into(),
                count: 1,
                fingerprint,
            },
            Digest {
                table: "receipts".into(),
                count: 3,
                fingerprint: 1,
            },
        ];
        let verdict = receive(&Up {
            digests,
            ..applied(11)
        });
        assert_eq!(
            verdict["digests"]["tables"]["products"], "matches",
            "{verdict}"
        );
        assert_eq!(
            verdict["digests"]["tables"]["receipts"],
            "skipped: a table the server does not know"
        );
    }

    #[pg_test]
    fn the_server_going_back_takes_a_new_epoch_and_keeps_the_answers_to_uploads() {
        run(SHOP);
        run(&format!(
            "INSERT INTO sync.outbox (replica, position, id, kind, head) VALUES \
             ('{A}', 11, 'm11', 'down', '\\x'), ('{A}', 12, 'filed-12', 'filed', '\\x')"
        ));
        let verdict = receive(&applied(15));
        assert!(
            verdict["applied"]
                .as_str()
                .unwrap()
                .starts_with("past anything sent"),
            "{verdict}"
        );
        assert_eq!(one::<i64>("SELECT count(*) FROM sync.epochs"), Some(2));
        assert_ne!(
            one::<pgrx::Uuid>("SELECT id FROM sync.epochs WHERE current").map(|u| u.to_string()),
            Some(E.to_owned())
        );
        assert_eq!(
            one::<String>("SELECT string_agg(kind, ',') FROM sync.outbox").as_deref(),
            Some("filed")
        );
        assert_eq!(
            one::<bool>("SELECT provision FROM sync.replicas"),
            Some(true)
        );
        assert_eq!(one::<i64>("SELECT count(*) FROM sync.alarms"), Some(1));
    }
    #[pg_test]
    fn a_delete_the_database_refuses_is_kept_and_the_row_noted_to_go_again() {
        run(SHOP);
        run(&format!(
            "CREATE TABLE shop.till_log (till uuid REFERENCES shop.register_state (id)); \
             INSERT INTO shop.till_log VALUES ('{TILL}')"
        ));
        held("register_state", TILL, 9);
        let notes = format!("SELECT count(*) FROM sync.notes WHERE key = '{TILL}'");
        let before = one::<i64>(&notes).unwrap_or(0);
        let deletes = UpTable {
            table: "register_state".into(),
            deletes: vec![TILL.into()],
            ..UpTable::default()
        };
        let verdict = receive(&Up {
            tables: vec![deletes],
            uploads: vec![3],
            ..applied(10)
        });
        assert!(
            verdict["rows"][0]["kept"][0]["why"]
                .as_str()
                .unwrap()
                .contains("foreign key"),
            "{verdict}"
        );
        assert_eq!(verdict["answered"], json!([3]));
        assert_eq!(
            one::<String>("SELECT string_agg(op, ',') FROM sync.inbox").as_deref(),
            Some("d")
        );
        assert_eq!(
            one::<i64>("SELECT count(*) FROM sync.held"),
            Some(0),
            "held no more: the delete is a fact"
        );
        assert_eq!(
            one::<i64>(&notes),
            Some(before + 1),
            "noted, so the relay sends the row again"
        );
        // Once the row may go, filing the inbox again lets it go.
        run("DELETE FROM shop.till_log");
        run("SELECT sync.refile(true)");
        assert_eq!(one::<i64>("SELECT count(*) FROM sync.inbox"), Some(0));

        assert_eq!(
            one::<i64>(&format!(
                "SELECT count(*) FROM shop.register_state WHERE id = '{TILL}'"
            )),
            Some(0)
        );
    }

    #[pg_test]
    fn an_up_of_rows_under_no_upload_number_is_malformed_and_files_nothing() {
        run(SHOP);
        held("register_state", TILL, 9);
        let verdict = receive(&Up {
            tables: vec![edit(50)],
            ..applied(10)
        });
        assert_eq!(verdict["verdict"], "malformed", "{verdict}");
        assert_eq!(battery(TILL), None, "nothing filed");
        assert_eq!(one::<i64>("SELECT count(*) FROM sync.inbox"), Some(0));
    }

    #[pg_test]
    fn an_upload_number_of_0_or_past_2_63_is_malformed() {
        run(SHOP);
        held("register_state", TILL, 9);
        for number in [0, 1 << 63] {
            let verdict = receive(&Up {
                tables: vec![edit(50)],
                uploads: vec![5, number],
                ..applied(10)
            });
            assert_eq!(verdict["verdict"], "malformed", "{number}: {verdict}");
            assert!(verdict["why"]
                .as_str()
                .unwrap()
                .contains(&number.to_string()));
        }
        assert_eq!(battery(TILL), None, "nothing filed");
        assert_eq!(
            one::<i64>("SELECT count(*) FROM sync.outbox WHERE kind = 'filed'"),
            Some(0),
            "nothing answered"
        );
    }

    #[pg_test]
    fn a_delete_of_another_replicas_record_is_left_out_and_said_so() {
        run(SHOP);
        run("CREATE TABLE shop.receipts (id uuid PRIMARY KEY, register_id uuid NOT NULL, total bigint NOT NULL); \
             SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id'); \
             INSERT INTO shop.receipts VALUES \
                 ('00000000-0000-0000-0000-0000000000f1', '00000000-0000-0000-0000-00000000000b', 100), \
                 ('00000000-0000-0000-0000-0000000000f2', '00000000-0000-0000-0000-00000000000a', 200)");
        let deletes = UpTable {
            table: "receipts".into(),
            deletes: vec![
                "00000000-0000-0000-0000-0000000000f1".into(),
                "00000000-0000-0000-0000-0000000000f2".into(),
            ],
            ..UpTable::default()
        };
        let verdict = receive(&Up {
            tables: vec![deletes],
            uploads: vec![6],
            ..applied(10)
        });
        let part = &verdict["rows"][0];
        assert_eq!(part["deleted"], 1, "its own receipt goes: {verdict}");
        assert_eq!(
            part["left_out"],
            json!([{"key": "00000000-0000-0000-0000-0000000000f1", "why": "a delete of another replica's row"}]),
            "{verdict}"
        );
        assert_eq!(one::<i64>("SELECT count(*) FROM shop.receipts"), Some(1));
        assert_eq!(verdict["answered"], json!([6]));
    }

    #[pg_test]
    fn an_up_handed_over_again_after_a_later_one_is_a_redelivery_and_costs_nothing() {
        run(SHOP);
        held("register_state", TILL, 9);
        sent_up_to(12);
        let first = Up {
            tables: vec![edit(50)],
            uploads: vec![21],
            ..applied(11)
        };
        assert_eq!(receive(&first)["answered"], json!([21]));
        let later = Up {
            tables: vec![edit(51)],
            uploads: vec![22],
            ..applied(12)
        };
        assert_eq!(receive(&later)["applied"], "counted");
        let again = receive(&first);
        assert_eq!(again, json!({"verdict": "redelivered", "answered": [21]}));
        assert_eq!(battery(TILL), Some(51), "the later edit stands");
        assert_eq!(
            one::<bool>(&format!(
                "SELECT provision FROM sync.replicas WHERE id = '{A}'"
            )),
            Some(false),
            "not provisioned again"
        );
        // An Up of no uploads that says an older position cannot be told
        // from a replica restored from an older copy: provisioned again.
        let report = receive(&applied(11));
        assert_eq!(report["verdict"], "filed", "{report}");
        assert_eq!(
            one::<bool>(&format!(
                "SELECT provision FROM sync.replicas WHERE id = '{A}'"
            )),
            Some(true)
        );
    }

    #[pg_test]
    fn an_up_naming_one_upload_number_twice_is_answered_and_known_again() {
        run(SHOP);
        held("register_state", TILL, 9);
        let up = Up {
            tables: vec![edit(50)],
            uploads: vec![31, 31],
            ..applied(10)
        };
        assert_eq!(receive(&up)["answered"], json!([31, 31]));
        assert_eq!(receive(&up)["verdict"], "redelivered");
    }
}
