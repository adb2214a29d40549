//! The book's later "Things to try", walked in headless Chromium on one
//! shop (a head office and two registers, as in_a_browser.rs starts them,
//! with help/): a product a register sold deleted at the head office.
//! What each page shows is checked after each step, and every open page
//! is saved under target/shop-screenshots/ (named `lost-…`).
//!
//! Needs what in_a_browser.rs needs (the pages built, Debian's chromium,
//! the extension installed): scripts/test.sh sees to it.

mod help;

use help::{filed_from, held, product, Shop, GREEN, RECEIPTS};

#[test]
fn a_product_a_register_sold_deleted_is_retired_there_and_deleted_on_the_other() {
    let mut shop = Shop::open(3);
    let browser = &mut shop.browser;
    browser.screenshots("lost-0-started");

    // Register 1 sells two cakes and a tea, as one receipt with its
    // lines; the receipt is filed at the head office with them.
    browser.sell("register-1", &[("Cake", 2), ("Tea", 1)]);
    let receipts = browser.counts("register-1", RECEIPTS, 1);
    assert!(
        receipts[0].starts_with("2 × Cake 9.00, Tea 2.50; total 11.50"),
        "{receipts:?}"
    );
    browser.shows(
        "register-1",
        ".not-at-head-office",
        "Every receipt is at the head office.",
    );
    let filed = browser.counts("head-office", &filed_from("Register 1"), 1);
    assert!(filed[0].contains("2 × Cake 9.00, Tea 2.50"), "{filed:?}");
    browser.screenshots("lost-1-cake-sold");

    // Cake deleted at the head office: Register 1, which sold it, retires
    // it (out of its list, still behind its receipt); Register 2 deletes
    // it; the dashboard is green.
    browser.click("head-office", &format!("{} .delete", product("Cake")));
    browser.counts("head-office", &product("Cake"), 0);
    for page in ["register-1", "register-2"] {
        browser.counts(page, &held("Cake"), 0);
        browser.counts(page, ".held-catalog .product", 2);
    }
    let retired = browser.counts(
        "register-1",
        ".receipt .line[data-product=\"Cake\"][data-retired=\"true\"]",
        1,
    );
    assert_eq!(retired, ["2 × Cake 9.00 (retired)"]);
    let receipts = browser.read("register-1", RECEIPTS);
    assert!(
        receipts[0].starts_with("2 × Cake 9.00 (retired), Tea 2.50; total 11.50"),
        "{receipts:?}"
    );
    // Register 2 cannot sell it: it is in no list of its.
    let on_sale = browser.read("register-2", ".sale .sale-product option");
    assert!(!on_sale.iter().any(|o| o == "Cake"), "{on_sale:?}");
    // At the head office the receipt keeps its lines, the cakes said to
    // be of a product since deleted.
    let filed = browser.shows(
        "head-office",
        &filed_from("Register 1"),
        "2 × a product since deleted 9.00",
    );
    assert_eq!(filed.len(), 1, "{filed:?}");
    assert!(filed[0].contains("Tea 2.50"), "{filed:?}");
    browser.counts("head-office", GREEN, 1);
    browser.screenshots("lost-2-cake-deleted");
}
