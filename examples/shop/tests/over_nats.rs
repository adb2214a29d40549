//! The shop over NATS (`head-office --transport nats`: a nats-server of its
//! own, under its data directory, that its PostgreSQL relays to and the
//! registers take their messages from), walked in headless Chromium as
//! in_a_browser.rs walks it over the gateway: a product added, a register
//! offline selling, the head office restarted meanwhile, back online.
//! Screenshots under target/shop-screenshots/ (named `nats-…`).
//!
//! Needs what in_a_browser.rs needs, and Debian's nats-server on the PATH
//! (scripts/setup.sh installs it).

mod help;

use std::time::{Duration, Instant};

use help::{filed_from, held, price_of, Shop, AMBER, GREEN};

#[test]
fn the_shop_over_nats_takes_a_product_added_and_files_what_a_register_sold_offline_once() {
    let mut shop = Shop::open_with(3, &["--transport", "nats"]);
    let address = shop.head_office.address.clone();
    let browser = &mut shop.browser;

    // The head office tells its registers to reach it over NATS.
    browser.open("link", &format!("{address}/api/link"));
    let link = browser.read("link", "body");
    assert!(link[0].contains("\"transport\":\"nats\""), "{link:?}");
    browser.close("link");
    browser.screenshots("nats-0-started");

    // A product added: on both registers within five seconds (the book's
    // second, with in_a_browser.rs's margin), green.
    let added = Instant::now();
    browser.add_product("Muffin", "2.20");
    for page in ["register-1", "register-2"] {
        let within = Duration::from_secs(5).saturating_sub(added.elapsed());
        let seen = browser.counts_within(page, &held("Muffin"), 1, within);
        assert_eq!(seen, ["Muffin 2.20 Sell"], "{page}");
        println!("Muffin on {page}'s page {:.1?} after Add", added.elapsed());
    }
    browser.counts("head-office", GREEN, 1);
    browser.screenshots("nats-1-product-added");

    // Register 2 offline sells; a price changes and the head office is
    // restarted (its nats-server with it) before Register 2 is back.
    browser.click("register-2", ".go-offline");
    browser.shows("register-2", ".connection", "Offline");
    browser.click("register-2", &format!("{} .sell", held("Muffin")));
    browser.shows(
        "register-2",
        ".not-at-head-office",
        "1 receipt not at the head office yet",
    );
    browser.type_and_leave("head-office", &price_of("Muffin"), "2.40");
    browser.shows("register-1", &held("Muffin"), "Muffin 2.40");
    browser.counts("head-office", AMBER, 1);
    browser.screenshots("nats-2-register-2-offline");
    shop.restart_head_office();
    let browser = &mut shop.browser;

    // Back online: it takes the new price, its receipt is filed once, and
    // the page is green.
    browser.click("register-2", ".go-online");
    browser.shows("register-2", &held("Muffin"), "Muffin 2.40");
    browser.shows(
        "register-2",
        ".not-at-head-office",
        "Every receipt is at the head office.",
    );
    let filed = browser.counts("head-office", &filed_from("Register 2"), 1);
    assert!(filed[0].contains("Muffin 2.20"), "{filed:?}");
    browser.counts("head-office", GREEN, 1);
    assert_eq!(
        browser.read("head-office", &filed_from("Register 2")).len(),
        1,
        "filed once"
    );
    browser.screenshots("nats-3-back-online");
}
