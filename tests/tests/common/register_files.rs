//! A register's SQLite file of the filing shop (common/filing_shop.rs), as
//! the register's own program reads and writes it through a connection of
//! its own while its loop runs or is stopped: the products it holds, the
//! receipts it sold, the notes still waiting to be filed; and a wait until
//! every register's file holds exactly the server's products.
//!
//! Why through the file and not the replica: the tests that use it run
//! each register's loop in a thread of its own (common/device.rs), which
//! holds the replica. Included as `register_files` by test files that
//! include the filing shop as `shop` and the device as `device`.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use uuid::Uuid;

use crate::common::{products_held_in, products_of, Product};
use crate::device::PATIENCE;
use crate::shop::{rows_by_register, write_receipt, Shop};

/// A receipt: id, the register that wrote it, total.
pub type Receipt = (Uuid, Uuid, i64);

/// Every product a register's file holds, retired or not, sorted: id,
/// name, price, and its instant as the register wrote it.
pub fn products_in(file: &Path) -> Vec<Product> {
    products_held_in(&Connection::open(file).unwrap())
}

/// The receipts a register's file holds, sorted.
pub fn receipts_in(file: &Path) -> Vec<Receipt> {
    rows_by_register(
        &Connection::open(file).unwrap(),
        "SELECT id, register_id, total_cents FROM receipts",
    )
}

/// How many rows a register wrote that wait to be filed (sent or not).
pub fn unfiled(file: &Path) -> i64 {
    Connection::open(file)
        .unwrap()
        .query_row("SELECT count(*) FROM sync_notes", [], |r| r.get(0))
        .unwrap()
}

/// The register's program sells through a connection of its own, its
/// loop running or stopped, one receipt for each of `totals`: answers the
/// receipts, sorted, as the server is to file them. A running loop hears
/// of them when it next looks, or when the test pokes it.
pub fn sell_through_its_own_connection(file: &Path, me: Uuid, totals: &[i64]) -> Vec<Receipt> {
    let conn = Connection::open(file).unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON")
        .unwrap();
    let mut sold: Vec<Receipt> = totals
        .iter()
        .map(|total| (write_receipt(&conn, me, *total), me, *total))
        .collect();
    sold.sort();
    sold
}

/// Whether a register's file holds exactly the server's products: the
/// same ids, and for each the same name, price and instant.
pub fn holds_the_servers_products(shop: &mut Shop, file: &Path) -> bool {
    products_in(file) == products_of(&mut shop.pg)
}

/// How a register's products differ from the server's, in a few words.
fn difference(servers: &[Product], registers: &[Product]) -> String {
    let missing = servers.iter().filter(|p| !registers.contains(p)).count();
    let extra: Vec<&Product> = registers.iter().filter(|p| !servers.contains(p)).collect();
    format!(
        "{} on the server, {} on the register, {missing} missing or different, \
         {} extra or different (first: {:?})",
        servers.len(),
        registers.len(),
        extra.len(),
        extra.first()
    )
}

/// Waits until every register's file holds exactly the server's products:
/// the same ids, and for each the same name, price and instant. Panics
/// saying how each register that still differs differs.
pub fn until_every_register_holds_the_servers_products(
    shop: &mut Shop,
    files: &[impl AsRef<Path>],
) {
    let began = Instant::now();
    loop {
        let servers = products_of(&mut shop.pg);
        let differing: Vec<String> = files
            .iter()
            .filter_map(|file| {
                let registers = products_in(file.as_ref());
                (registers != servers).then(|| {
                    format!(
                        "{}: {}",
                        file.as_ref().display(),
                        difference(&servers, &registers)
                    )
                })
            })
            .collect();
        if differing.is_empty() {
            return;
        }
        assert!(
            began.elapsed() < PATIENCE,
            "waited {PATIENCE:?} for every register to hold exactly the server's products: {}",
            differing.join("; ")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
