//! Tests that run inside a backend (`cargo pgrx test`): each in a
//! transaction of its own, rolled back after.

mod declaring;
mod filing;
mod kept_plans;
mod publishing;
mod status_states;
mod wishing;

#[pgrx::pg_schema]
#[allow(clippy::module_inception)]
mod tests {
    use pgrx::prelude::*;
    use prost::Message;

    use magic_sync_proto::wire::{to_replica::Body, ToReplica};

    use crate::seal::{self, Sealed};

    const SHOP: &str = "
        CREATE SCHEMA shop;
        CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
        CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL, price_cents bigint NOT NULL);
        SELECT sync.declare_replicas('shop.registers', live => 'active');
        SELECT sync.declare_table('shop.products', sync => 'broadcast');
        INSERT INTO shop.registers (id) VALUES
            ('00000000-0000-0000-0000-00000000000a'), ('00000000-0000-0000-0000-00000000000b');
        INSERT INTO shop.products VALUES
            ('00000000-0000-0000-0000-000000000001', 'Tea', 250),
            ('00000000-0000-0000-0000-000000000002', 'Coffee', 300);
    ";

    const A: &str = "00000000-0000-0000-0000-00000000000a";

    fn count(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).unwrap().unwrap_or(0)
    }

    fn pass() -> serde_json::Value {
        Spi::get_one::<pgrx::JsonB>("SELECT sync_internal.record_pass(false)")
            .unwrap()
            .unwrap()
            .0
    }

    /// The head of a replica's queue, decoded.
    fn next_message(replica: &str) -> Option<(String, ToReplica)> {
        Spi::get_two_with_args::<String, Vec<u8>>(
            "SELECT id, message FROM sync.next($1::uuid)",
            &[replica.into()],
        )
        .ok()
        .and_then(|(id, bytes)| Some((id?, ToReplica::decode(bytes?.as_slice()).unwrap())))
    }

    fn ack(replica: &str, id: &str) -> bool {
        Spi::get_one_with_args::<bool>(
            "SELECT sync.ack($1::uuid, $2)",
            &[replica.into(), id.into()],
        )
        .unwrap()
        .unwrap()
    }

    #[pg_test]
    fn a_pass_provisions_every_live_replica_with_a_snapshot_and_its_end() {
        Spi::run(SHOP).unwrap();
        let summary = pass();
        assert_eq!(summary["provisioned"], 2, "{summary}");
        let (id, first) = next_message(A).expect("a message waits");
        let Some(Body::Down(down)) = first.body else {
            panic!("not a Down: {first:?}")
        };
        assert_eq!(down.previous, 0, "a snapshot follows nothing");
        assert!(!down.snapshot_id.is_empty());
        assert_eq!(down.tables[0].keys.len(), 2);
        assert!(ack(A, &id));
        let (_, second) = next_message(A).expect("the end of the snapshot");
        let Some(Body::EndSnapshot(end)) = second.body else {
            panic!("not an EndSnapshot")
        };
        assert_eq!(end.previous, down.sequence);
        assert_eq!(end.previous_nonce, down.nonce);
        assert_eq!(end.snapshot_id, down.snapshot_id);
        assert_eq!(end.tables, vec!["products".to_owned()]);
        assert_eq!(count("SELECT count(*) FROM sync.held"), 4);
        assert_eq!(count("SELECT count(*) FROM sync.notes"), 0);
    }

    #[pg_test]
    fn a_change_for_every_replica_is_one_body_chained_to_each_ones_last() {
        Spi::run(SHOP).unwrap();
        pass();
        let last: i64 = count(&format!(
            "SELECT last_sequence FROM sync.replicas WHERE id = '{A}'"
        ));
        Spi::run("UPDATE shop.products SET price_cents = 275 WHERE name = 'Tea'").unwrap();
        let summary = pass();
        assert_eq!(summary["messages"], 2, "{summary}");
        assert_eq!(summary["bodies"], 1, "{summary}");
        Spi::run(&format!(
            "DELETE FROM sync.outbox WHERE replica = '{A}' AND position <= {last}"
        ))
        .unwrap();
        let (_, update) = next_message(A).unwrap();
        let Some(Body::Down(down)) = update.body else {
            panic!("not a Down")
        };
        assert_eq!(down.previous as i64, last);
        assert!(down.snapshot_id.is_empty());
        assert_eq!(
            down.tables[0].keys,
            vec!["00000000-0000-0000-0000-000000000001"]
        );
        let row: serde_json::Value = serde_json::from_slice(&down.tables[0].upserts[0]).unwrap();
        assert_eq!(
            row["price_cents"], "275",
            "a 64-bit integer travels as text"
        );
    }

    #[pg_test]
    fn a_message_is_sealed_for_its_replica_under_the_epochs_secret() {
        Spi::run(SHOP).unwrap();
        pass();
        let (_, message) = next_message(A).unwrap();
        let Some(Body::Down(down)) = message.body else {
            panic!("not a Down")
        };
        let secret = Spi::get_one::<Vec<u8>>("SELECT secret FROM sync.epochs WHERE current")
            .unwrap()
            .unwrap();
        let sealed = Sealed {
            replica: A.parse().unwrap(),
            epoch: down.epoch.parse().unwrap(),
            sequence: down.sequence,
            nonce: down.nonce,
        };
        assert!(seal::is_sealed(&secret, &sealed, &down.mac));
        let other = Sealed {
            replica: uuid::Uuid::nil(),
            ..sealed
        };
        assert!(!seal::is_sealed(&secret, &other, &down.mac));
    }

    #[pg_test]
    fn a_message_stays_at_the_head_until_acknowledged_by_its_id() {
        Spi::run(SHOP).unwrap();
        pass();
        let (first, _) = next_message(A).unwrap();
        let (again, _) = next_message(A).unwrap();
        assert_eq!(first, again, "not acknowledged: the same message");
        assert!(!ack(A, "not-its-id"));
        assert_eq!(next_message(A).unwrap().0, first);
        assert!(ack(A, &first));
        assert!(
            !ack(A, &first),
            "a second acknowledgement takes nothing out"
        );
        assert_ne!(next_message(A).unwrap().0, first);
    }

    #[pg_test]
    fn an_update_that_changes_a_key_notes_the_old_key_too() {
        Spi::run(SHOP).unwrap();
        let before = count("SELECT max(id) FROM sync.notes");
        Spi::run(
            "UPDATE shop.products SET id = '00000000-0000-0000-0000-000000000003' \
             WHERE id = '00000000-0000-0000-0000-000000000001'",
        )
        .unwrap();
        let keys = Spi::get_one::<Vec<String>>(&format!(
            "SELECT array_agg(key ORDER BY key) FROM sync.notes WHERE id > {before}"
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            keys,
            vec![
                "00000000-0000-0000-0000-000000000001".to_owned(),
                "00000000-0000-0000-0000-000000000003".to_owned()
            ]
        );
    }

    #[pg_test]
    fn a_deleted_row_is_taken_back_from_every_replica_holding_it() {
        Spi::run(SHOP).unwrap();
        pass();
        Spi::run("DELETE FROM shop.products WHERE name = 'Coffee'").unwrap();
        let summary = pass();
        assert_eq!(summary["messages"], 2, "{summary}");
        assert_eq!(
            count("SELECT count(*) FROM sync.held WHERE leaving IS NOT NULL"),
            2
        );
    }

    /// What the replicas hold of the product `name`: (note, leaving) each.
    fn held_of(name: &str) -> Vec<(i64, Option<i64>)> {
        Spi::connect(|client| {
            client
                .select(
                    "SELECT h.note, h.leaving FROM sync.held h JOIN shop.products p \
                     ON h.key = p.id::text WHERE p.name = $1 ORDER BY h.replica",
                    None,
                    &[name.into()],
                )
                .unwrap()
                .map(|row| {
                    (
                        row.get::<i64>(1).unwrap().unwrap(),
                        row.get::<i64>(2).unwrap(),
                    )
                })
                .collect()
        })
    }

    #[pg_test]
    fn a_change_is_planned_alike_whether_what_is_held_of_it_is_looked_up_or_read_whole() {
        Spi::run(SHOP).unwrap();
        Spi::run(
            "INSERT INTO shop.products SELECT gen_random_uuid(), 'Extra ' || i, i \
             FROM generate_series(1, 60) AS i",
        )
        .unwrap();
        pass();
        // 62 rows recorded (the stand-in's; both replicas follow it), and
        // three replicas planned, the stand-in and the followers: a change
        // of one row (3 pairs) is looked up, one of ten rows (30 pairs)
        // read whole.
        Spi::run("ANALYZE sync.held_recorded").unwrap();
        Spi::run("UPDATE shop.products SET price_cents = 1 WHERE name = 'Tea'").unwrap();
        let looked_up = pass();
        assert!(crate::relay::plan::incremental::few_pairs_touched());
        assert_eq!(looked_up["messages"], 2, "{looked_up}");
        let newest = count("SELECT max(note) FROM sync.held");
        assert_eq!(held_of("Tea"), vec![(newest, None); 2]);
        Spi::run(
            "UPDATE shop.products SET price_cents = price_cents + 1000 WHERE name LIKE 'Extra _'",
        )
        .unwrap();
        let before = newest;
        Spi::run("DELETE FROM shop.products WHERE name = 'Coffee'").unwrap();
        let read_whole = pass();
        assert!(!crate::relay::plan::incremental::few_pairs_touched());
        assert_eq!(read_whole["messages"], 2, "{read_whole}");
        assert_eq!(
            count("SELECT count(*) FROM sync.held WHERE leaving IS NOT NULL"),
            2,
            "Coffee is taken back from both"
        );
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM sync.held h JOIN shop.products p ON h.key = p.id::text \
                 WHERE p.name LIKE 'Extra _' AND h.note > {before}"
            )),
            18,
            "nine rows changed, for both replicas"
        );
        Spi::run("DELETE FROM shop.products WHERE name = 'Tea'").unwrap();
        pass();
        assert!(crate::relay::plan::incremental::few_pairs_touched());
        assert_eq!(
            count("SELECT count(*) FROM sync.held WHERE leaving IS NOT NULL"),
            4,
            "Tea is taken back from both, looked up"
        );
    }

    #[pg_test]
    fn a_replica_no_longer_live_is_forgotten() {
        Spi::run(SHOP).unwrap();
        pass();
        Spi::run(&format!(
            "UPDATE shop.registers SET active = false WHERE id = '{A}'"
        ))
        .unwrap();
        let summary = pass();
        assert_eq!(summary["forgotten"], 1, "{summary}");
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM sync.held WHERE replica = '{A}'"
            )),
            0
        );
        assert!(next_message(A).is_none());
    }

    #[pg_test(error = "magic_sync: TRUNCATE of shop.products is refused")]
    fn truncate_of_a_declared_table_is_refused() {
        Spi::run(SHOP).unwrap();
        Spi::run("TRUNCATE shop.products").unwrap();
    }

    #[pg_test(error = "magic_sync: the table shop.missing does not exist")]
    fn a_declaration_of_a_table_that_does_not_exist_is_refused() {
        Spi::run("SELECT sync.declare_table('shop.missing', sync => 'broadcast')").unwrap();
    }

    /// sync_internal.row_bytes writes every row byte for byte as the JSON the
    /// engine wrote with json_build_object, whatever the types and values.
    #[pg_test]
    fn row_bytes_writes_what_json_build_object_writes() {
        Spi::run(
            "CREATE SCHEMA odd;
             CREATE TYPE odd.mood AS ENUM ('calm', 'loud');
             CREATE DOMAIN odd.label AS text;
             CREATE TABLE odd.things (
                 id uuid PRIMARY KEY, t text, v varchar(12), c char(3), s smallint, i integer,
                 b bigint, n numeric(12, 3), f double precision, ok boolean,
                 at timestamptz, day date, local timestamp, j json, jb jsonb,
                 tags text[], raw bytea, mood odd.mood, label odd.label, names varchar(5)[],
                 free varchar);
             SELECT sync.declare_table('odd.things', sync => 'broadcast');
             INSERT INTO odd.things VALUES
                 (gen_random_uuid(), 'tab\there \"quoted\" back\\slash ' || chr(1) || ' é', 'short',
                  'ab', -32768, 2147483647, -9223372036854775808, -123456789.125, 'NaN', true,
                  'infinity', '2024-02-29', '2024-02-29 12:00:00.5', '{\"k\" : [1, 2]}',
                  '{\"b\": 1, \"a\": [true, null]}', ARRAY['x', NULL, 'y\"z'], '\\x00ff',
                  'loud', 'name', ARRAY['ab', NULL], 'any length at all'),
                 (gen_random_uuid(), '', '', '', 0, 0, 0, 0, 1.5e300, false,
                  '0044-03-15 12:00:00+00 BC', '-infinity', '1999-12-31 23:59:59.999999',
                  'null', '[]', '{}', '', 'calm', '', '{}', ''),
                 (gen_random_uuid(), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                  '2026-11-30 03:04:05.000006+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                  NULL, NULL);
             SELECT set_config('timezone', 'Asia/Kolkata', true);",
        )
        .unwrap();
        let table = crate::catalog::declared_tables()
            .into_iter()
            .find(|t| t.name == "things")
            .expect("odd.things is declared");
        let differing = count(&format!(
            "SELECT count(*) FROM odd.things t \
             WHERE {} IS DISTINCT FROM convert_to(({})::text, 'UTF8')",
            crate::message::row::sql::row_bytes(&table, "t"),
            crate::message::row::sql::row_json(&table, "t"),
        ));
        assert_eq!(differing, 0);
        assert_eq!(count("SELECT count(*) FROM odd.things"), 3);
    }
}
