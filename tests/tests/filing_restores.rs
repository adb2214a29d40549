//! Either side restored from an older copy, end to end: a register whose
//! SQLite file is put back as it was, and a server whose database is
//! restored from an older dump. Each ends with every register holding
//! exactly what the server has, and every receipt the server kept filed
//! once.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::Path;

use shop::*;
use uuid::Uuid;

fn change_the_catalog(shop: &mut Shop, round: i32) {
    shop.run(&format!(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item {round}.' || i, i FROM generate_series(1, 5) AS i; \
         UPDATE shop.products SET price_cents = price_cents + 1, updated_at = now() \
         WHERE name LIKE 'Item%' AND price_cents % 2 = 0; \
         DELETE FROM shop.products WHERE price_cents = 3"
    ));
}

/// A copy of a register's database as it is now (a backup).
fn copy_of(register: &magic_sync_replica::Replica, to: &Path) {
    register
        .connection()
        .execute("VACUUM INTO ?1", [to.to_str().unwrap()])
        .unwrap();
}

#[test]
fn a_register_restored_from_an_older_copy_ends_holding_what_it_should() {
    let mut shop = Shop::open();
    change_the_catalog(&mut shop, 0);
    let a = shop.add_register("Register 1");
    let file = shop.file_of(a);
    let mut register = open_register(&file, a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let filed_before = sell(&register, &[1, 2]);
    sync_all(&mut shop, std::slice::from_mut(&mut register));

    // Receipts not sent yet when the copy is taken.
    let unsent_at_copy = sell(&register, &[3, 4]);
    let backup = shop.dir().join("backup.db");
    copy_of(&register, &backup);

    // Life goes on: the catalog changes, the receipts go up, more are sold.
    change_the_catalog(&mut shop, 1);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let filed_after = sell(&register, &[5]);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    assert_eq!(shop.receipts().len(), 5);

    // The register's disk is put back as it was at the copy.
    drop(register);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    std::fs::copy(&backup, &file).unwrap();
    let mut register = open_register(&file, a);

    // It says it applied less than before: provisioned again.
    let verdicts = report(&mut shop.pg, &mut register);
    assert!(
        verdicts.iter().any(|v| v["applied"]
            .as_str()
            .is_some_and(|s| s.starts_with("older than the last applied"))),
        "{verdicts:?}"
    );
    for _ in 0..2 {
        sync_all(&mut shop, std::slice::from_mut(&mut register));
    }
    assert_eq!(products_of(&register), shop.products());
    assert_eq!(unfiled(&register), 0);
    let mut expected: Vec<Uuid> = filed_before
        .into_iter()
        .chain(unsent_at_copy)
        .chain(filed_after)
        .collect();
    expected.sort();
    let filed: Vec<Uuid> = shop.receipts().into_iter().map(|r| r.0).collect();
    assert_eq!(filed, expected, "each receipt filed once");
}

/// The shop's database dumped (a backup) to `name` in the shop's
/// directory: answers the dump's file.
fn dump_as(shop: &Shop, name: &str) -> std::path::PathBuf {
    let dump = shop.dir().join(name);
    shop.cluster.dump("shop", &dump);
    dump
}

fn dump(shop: &Shop) -> std::path::PathBuf {
    dump_as(shop, "shop.sql")
}

/// The shop's database dropped and restored from `dump`.
fn restore(shop: &mut Shop, dump: &Path) {
    shop.pg = shop.cluster.connect("postgres");
    shop.cluster.restore("shop", dump);
    shop.reconnect();
}

#[test]
fn a_server_restored_from_an_older_dump_ends_with_every_register_holding_what_it_should() {
    let mut shop = Shop::open();
    change_the_catalog(&mut shop, 0);
    let (_, mut registers) = shop.add_registers(2);
    sync_all(&mut shop, &mut registers);
    let kept: Vec<Uuid> = sell(&registers[0], &[7, 8]);
    sync_all(&mut shop, &mut registers);

    let dump = dump(&shop);

    // The registers move on past what the dump knows.
    for round in 1..=2 {
        change_the_catalog(&mut shop, round);
        sync_all(&mut shop, &mut registers);
    }
    sell(&registers[1], &[9]);
    sync_all(&mut shop, &mut registers);

    // The database is restored from the dump.
    restore(&mut shop, &dump);
    let epochs_before = shop.count("SELECT count(*) FROM sync.epochs");

    // The head office goes on: its next messages are numbered again from
    // where the dump left off, and each register says again what it
    // applied — a message this database has no record of sending.
    change_the_catalog(&mut shop, 3);

    for _ in 0..3 {
        sync_all(&mut shop, &mut registers);
    }
    assert_eq!(
        shop.count("SELECT count(*) FROM sync.epochs"),
        epochs_before + 1,
        "one new epoch"
    );
    assert!(
        shop.count("SELECT count(*) FROM sync.alarms") >= 1,
        "an alarm was raised"
    );
    let products = shop.products();
    for register in &registers {
        assert_eq!(products_of(register), products, "{}", register.me());
    }
    let filed: Vec<Uuid> = shop.receipts().into_iter().map(|r| r.0).collect();
    for id in kept {
        assert!(
            filed.contains(&id),
            "a receipt filed before the dump is kept"
        );
    }
}

#[test]
fn a_server_restored_from_an_older_dump_numbers_its_bodies_and_alarms_past_what_it_restored() {
    let mut shop = Shop::open();
    change_the_catalog(&mut shop, 0);
    shop.add_registers(2);
    // Messages wait in the outbox, their bodies stored, an alarm raised:
    // all in the dump.
    shop.relay();
    shop.run("INSERT INTO sync.alarms (what) VALUES ('before the dump')");
    let dump = dump(&shop);
    restore(&mut shop, &dump);

    for table in ["sync.bodies", "sync.alarms"] {
        let ahead = shop.count(&format!(
            "SELECT (nextval(pg_get_serial_sequence('{table}', 'id')) > \
                     (SELECT max(id) FROM {table}))::int::int8"
        ));
        assert_eq!(ahead, 1, "{table} numbers past the rows restored");
    }
    change_the_catalog(&mut shop, 1);
    let summary = shop.relay();
    assert!(summary["bodies"].as_i64() > Some(0), "{summary}");
}

#[test]
fn a_server_restored_from_an_older_dump_takes_one_new_epoch_however_often_a_register_says_so() {
    let mut shop = Shop::open();
    change_the_catalog(&mut shop, 0);
    let (_, mut registers) = shop.add_registers(2);
    sync_all(&mut shop, &mut registers);
    let dump = dump(&shop);
    for round in 1..=2 {
        change_the_catalog(&mut shop, round);
        sync_all(&mut shop, &mut registers);
    }
    restore(&mut shop, &dump);
    let epochs_before = shop.count("SELECT count(*) FROM sync.epochs");

    // No relay runs: each register says again and again what it applied
    // (past anything the restored database sent it), with a receipt each
    // time. The first to say so takes the new epoch; the rest is news of a
    // chain the server has left.
    for round in 0..3 {
        for register in registers.iter_mut() {
            sell(register, &[10 + round]);
            report(&mut shop.pg, register);
        }
    }
    assert_eq!(
        shop.count("SELECT count(*) FROM sync.epochs"),
        epochs_before + 1,
        "one new epoch"
    );
    for _ in 0..3 {
        sync_all(&mut shop, &mut registers);
    }
    let products = shop.products();
    for register in &registers {
        assert_eq!(products_of(register), products, "{}", register.me());
    }
}

#[test]
fn a_register_not_live_in_the_restored_database_is_marked_for_no_provisioning_it_cannot_have() {
    let mut shop = Shop::open();
    change_the_catalog(&mut shop, 0);
    let (ids, mut registers) = shop.add_registers(1);
    let a = ids[0];
    sync_all(&mut shop, &mut registers);
    // A dump while the register is not live (forgotten, its last applied
    // of the first epoch kept).
    shop.run(&format!(
        "UPDATE shop.registers SET active = false WHERE id = '{a}'"
    ));
    shop.relay();
    let not_live = dump_as(&shop, "not_live.sql");

    // Live again; then the server goes back once, and takes a second
    // epoch, which the register follows.
    shop.run(&format!(
        "UPDATE shop.registers SET active = true WHERE id = '{a}'"
    ));
    sync_all(&mut shop, &mut registers);
    let live = dump_as(&shop, "live.sql");
    change_the_catalog(&mut shop, 1);
    sync_all(&mut shop, &mut registers);
    restore(&mut shop, &live);
    let epochs = shop.count("SELECT count(*) FROM sync.epochs");
    change_the_catalog(&mut shop, 2);
    for _ in 0..3 {
        sync_all(&mut shop, &mut registers);
    }
    assert_eq!(shop.count("SELECT count(*) FROM sync.epochs"), epochs + 1);

    // Restored to when it was not live: the register says it applied a
    // message of an epoch this database never had, and edits its battery.
    restore(&mut shop, &not_live);
    registers[0]
        .connection()
        .execute("UPDATE register_state SET battery = 40", [])
        .unwrap();
    report(&mut shop.pg, &mut registers[0]);

    // No provisioning can come while it is not live: none is marked, no
    // edit waits for one, and the relay has nothing to do.
    assert_eq!(
        shop.count(
            "SELECT count(*) FROM sync.replicas WHERE provision OR provision_at IS NOT NULL"
        ),
        0,
        "marked for provisioning while not live"
    );
    assert_eq!(
        shop.count("SELECT count(*) FROM sync.inbox"),
        0,
        "an edit waits"
    );
    assert_eq!(
        shop.count("SELECT (NOT sync_internal.work_waits())::int::int8"),
        1,
        "work waits"
    );

    // Live again, it is provisioned as any replica that becomes live.
    shop.run(&format!(
        "UPDATE shop.registers SET active = true WHERE id = '{a}'"
    ));
    for _ in 0..3 {
        sync_all(&mut shop, &mut registers);
    }
    assert_eq!(products_of(&registers[0]), shop.products());
}
