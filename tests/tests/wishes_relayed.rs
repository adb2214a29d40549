//! A wish travels as a row of sync_wishes (protocol 4.5, A.6): sent to the
//! replica its setting row belongs to, as the Wish message, its `wanted`
//! the setting row encoded as the setting's rows are, with the wished
//! columns and the version it is based on laid over; taken back when it is
//! withdrawn. A snapshot names the settings the server records the replica
//! holding (`recorded`, 4.2), before the wishes, and lists sync_wishes
//! among its tables. Read off the default transport's queue and decoded
//! with the proto crate.

use magic_sync_proto::wire::{to_replica, DownTable, ToReplica, Wish};
use magic_sync_tests::Cluster;
use postgres::Client;
use prost::Message;
use serde_json::{json, Value};
use uuid::Uuid;

const SCHEMA: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL);
    CREATE TABLE shop.footers (register_id uuid PRIMARY KEY, text text NOT NULL,
                               changed_at timestamptz NOT NULL);
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.footers', mirror => 'setting', origin => 'register_id',
                              version => 'changed_at', desired => '{text}', apply => 'if_unchanged');
";

const A: &str = "01960000-0000-7000-8000-00000000000a";
const B: &str = "01960000-0000-7000-8000-00000000000b";

/// Every message waiting for `replica`, each taken and acknowledged.
fn take_all(pg: &mut Client, replica: Uuid) -> Vec<ToReplica> {
    let mut taken = Vec::new();
    loop {
        let Some(row) = pg
            .query_opt("SELECT id, message FROM sync.next($1)", &[&replica])
            .unwrap()
        else {
            return taken;
        };
        let id: String = row.get(0);
        let bytes: Vec<u8> = row.get(1);
        taken.push(ToReplica::decode(bytes.as_slice()).expect("a ToReplica"));
        assert!(pg
            .query_one("SELECT sync.ack($1, $2)", &[&replica, &id])
            .unwrap()
            .get::<_, bool>(0));
    }
}

/// The parts of the Downs among `messages`, in order.
fn parts(messages: &[ToReplica]) -> Vec<DownTable> {
    messages
        .iter()
        .filter_map(|m| match &m.body {
            Some(to_replica::Body::Down(down)) => Some(down.tables.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The tables an EndSnapshot among `messages` names.
fn ended(messages: &[ToReplica]) -> Vec<String> {
    messages
        .iter()
        .find_map(|m| match &m.body {
            Some(to_replica::Body::EndSnapshot(end)) => Some(end.tables.clone()),
            _ => None,
        })
        .expect("an EndSnapshot")
}

fn relay(pg: &mut Client) {
    pg.batch_execute("CALL sync.relay()").unwrap();
}

#[test]
fn a_wish_reaches_only_its_replica_as_the_wish_row_is_sent_again_when_replaced_and_taken_back_when_withdrawn(
) {
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(SCHEMA).unwrap();
    let (a, b): (Uuid, Uuid) = (A.parse().unwrap(), B.parse().unwrap());
    pg.execute(
        "INSERT INTO shop.registers (id) VALUES ($1), ($2)",
        &[&a, &b],
    )
    .unwrap();
    pg.batch_execute(&format!(
        "INSERT INTO shop.footers VALUES ('{A}', 'Thank you', '2026-10-12 10:00:00.123456+00'), \
                                         ('{B}', 'Merci', '2026-10-12 11:00:00+00')"
    ))
    .unwrap();
    relay(&mut pg);

    // The snapshot names the footer each register reported, before any
    // wish, and lists sync_wishes among its tables.
    for (replica, key) in [(a, A), (b, B)] {
        let messages = take_all(&mut pg, replica);
        let all = parts(&messages);
        let recorded: Vec<&DownTable> = all.iter().filter(|p| p.table == "footers").collect();
        assert_eq!(recorded.len(), 1, "one part of footers");
        assert_eq!(recorded[0].recorded, vec![key.to_owned()]);
        assert!(recorded[0].upserts.is_empty() && recorded[0].deletes.is_empty());
        assert!(ended(&messages).contains(&"sync_wishes".to_owned()));
    }

    let id: Uuid = pg
        .query_one(
            "SELECT sync.desire('footers', $1, 'from the page')",
            &[&json!({"register_id": A, "text": "Hello", "changed_at": "2026-10-12T10:00:00.123456Z"})],
        )
        .unwrap()
        .get(0);
    let version: i64 = pg
        .query_one("SELECT version FROM sync.sync_wishes WHERE id = $1", &[&id])
        .unwrap()
        .get(0);
    relay(&mut pg);
    assert!(
        take_all(&mut pg, b).is_empty(),
        "the other register is sent nothing"
    );
    let sent = parts(&take_all(&mut pg, a));
    assert_eq!(sent.len(), 1);
    let part = &sent[0];
    assert_eq!(part.table, "sync_wishes");
    assert_eq!(part.keys, vec![id.to_string()]);
    let wish = Wish::decode(part.upserts[0].as_slice()).expect("a Wish");
    assert_eq!(wish.id, id.to_string());
    assert_eq!((wish.table.as_str(), wish.key.as_str()), ("footers", A));
    assert_eq!(wish.version, version as u64);
    assert_eq!(wish.note, "from the page");
    assert_eq!(wish.answered, 0, "the server never sends an answer");
    assert!(wish.outcome.is_empty() && wish.reason.is_empty() && wish.answered_at.is_empty());
    let wanted: Value = serde_json::from_slice(&wish.wanted).expect("the row as JSON");
    assert_eq!(
        wanted,
        json!({"register_id": A, "text": "Hello", "changed_at": "2026-10-12T10:00:00.123456Z"})
    );

    // Wished again: the same wish, sent again under a new version.
    pg.execute(
        "SELECT sync.desire('footers', $1)",
        &[&json!({"register_id": A, "text": "Hello!", "changed_at": "2026-10-12T10:00:00.123456Z"})],
    )
    .unwrap();
    relay(&mut pg);
    let sent = parts(&take_all(&mut pg, a));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].keys, vec![id.to_string()]);
    let replaced = Wish::decode(sent[0].upserts[0].as_slice()).expect("a Wish");
    assert_ne!(replaced.version, wish.version, "a new version");
    let wanted: Value = serde_json::from_slice(&replaced.wanted).unwrap();
    assert_eq!(wanted["text"], "Hello!");

    // Provisioned again: the wish goes with the snapshot, after the
    // setting's recorded keys.
    pg.execute("SELECT sync.resync($1)", &[&a]).unwrap();
    relay(&mut pg);
    let messages = take_all(&mut pg, a);
    let tables: Vec<String> = parts(&messages).iter().map(|p| p.table.clone()).collect();
    let footers = tables
        .iter()
        .position(|t| t == "footers")
        .expect("footers recorded");
    let wishes = tables
        .iter()
        .position(|t| t == "sync_wishes")
        .expect("the wish again");
    assert!(footers < wishes, "{tables:?}");

    // Withdrawn: its id in a delete of sync_wishes.
    let withdrawn: bool = pg
        .query_one("SELECT sync.withdraw('footers', $1)", &[&A])
        .unwrap()
        .get(0);
    assert!(withdrawn);
    relay(&mut pg);
    let sent = parts(&take_all(&mut pg, a));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].table, "sync_wishes");
    assert_eq!(sent[0].deletes, vec![id.to_string()]);
    assert!(sent[0].upserts.is_empty());
}
