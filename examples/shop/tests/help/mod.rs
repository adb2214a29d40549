//! What the shop's browser tests share: the shop's programs started as a
//! person starts them (each in a directory of its own), headless Chromium
//! driven through examples/shop/web/tests/driver.mjs, the waits, and a
//! screenshot of every open page after each step, under
//! target/shop-screenshots/.
//!
//! Each test file takes what it needs (`mod help;`): what one leaves
//! unused is not dead code.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub fn shop_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the screenshot `name` is saved: target/shop-screenshots/NAME.png.
pub fn screenshot(name: &str) -> String {
    shop_dir()
        .join("../../target/shop-screenshots")
        .join(format!("{name}.png"))
        .display()
        .to_string()
}

pub const HEAD_OFFICE: &str = env!("CARGO_BIN_EXE_head-office");
pub const REGISTER: &str = env!("CARGO_BIN_EXE_register");

/// A program of the shop, stopped as Ctrl-C would when dropped (the test
/// may fail half way): the head office stops its PostgreSQL too.
pub struct Program {
    child: Child,
    pub address: String,
    stopped: bool,
}

impl Program {
    /// Starts `binary` in `dir` and reads the address its first line names.
    pub fn start(binary: &str, dir: &Path, args: &[&str]) -> Program {
        let mut child = Command::new(binary)
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starts {binary}: {e}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line
            .trim()
            .rsplit(' ')
            .next()
            .filter(|a| a.starts_with("http://"))
            .unwrap_or_else(|| panic!("{binary} said {line:?}, not its address"))
            .to_owned();
        Program {
            child,
            address,
            stopped: false,
        }
    }

    /// Stops it as Ctrl-C would (SIGTERM), waiting up to 20 s for it to
    /// end before killing it.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The head office in `dir`, on `bind` (kept across a restart, so
    /// that the registers find it where it was).
    pub fn head_office(dir: &Path, bind: &str, extra: &[&str]) -> Program {
        let mut args = vec!["--bind", bind];
        args.extend_from_slice(extra);
        Program::start(HEAD_OFFICE, dir, &args)
    }

    /// A register named `name` in `dir`, on a port of its own, introducing
    /// itself to the head office at `head_office`; `extra` as typed after.
    pub fn register(dir: &Path, name: &str, head_office: &str, extra: &[&str]) -> Program {
        let mut args = vec!["--name", name, "--port", "0", "--head-office", head_office];
        args.extend_from_slice(extra);
        Program::start(REGISTER, dir, &args)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free port on 127.0.0.1, as `127.0.0.1:PORT`.
pub fn free_address() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string()
}

/// A scratch directory with a directory of its own for each program.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("a scratch directory"),
        }
    }

    /// The directory `name`, made the first time.
    pub fn dir(&self, name: &str) -> PathBuf {
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

/// Headless Chromium, each page a tab of its own, by name.
pub struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The pages opened, in order: a step's screenshots take each.
    pages: Vec<String>,
    /// When it started: each step's screenshots say how long after.
    started: Instant,
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.quit();
    }
}

impl Browser {
    /// Closes Chromium and the driver (at once the second time).
    pub fn quit(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = writeln!(self.stdin, "{}", json!({ "quit": true }));
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    pub fn start() -> Browser {
        let mut child = Command::new("node")
            .arg(shop_dir().join("web/tests/driver.mjs"))
            .current_dir(shop_dir().join("web"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starts node");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Browser {
            child,
            stdin,
            stdout,
            pages: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Asks the driver; a page that never shows what was waited for fails
    /// the test, saying what it showed.
    pub fn ask(&mut self, command: Value) -> Vec<String> {
        writeln!(self.stdin, "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let answer: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("the driver said {line:?}: {e}"));
        assert!(
            answer.get("error").is_none(),
            "asked {command}, the page answered: {answer:#}"
        );
        serde_json::from_value(answer["texts"].clone()).unwrap()
    }

    /// Opens `url` in the tab `page` (a new one the first time).
    pub fn open(&mut self, page: &str, url: &str) {
        self.ask(json!({ "open": page, "url": url }));
        if !self.pages.iter().any(|p| p == page) {
            self.pages.push(page.to_owned());
        }
    }

    /// Closes the tab `page` (its program stopped for good).
    pub fn close(&mut self, page: &str) {
        self.ask(json!({ "close": page }));
        self.pages.retain(|p| p != page);
    }

    pub fn click(&mut self, page: &str, css: &str) {
        self.ask(json!({ "page": page, "click": css }));
    }

    pub fn fill(&mut self, page: &str, css: &str, value: &str) {
        self.ask(json!({ "page": page, "fill": css, "value": value }));
    }

    /// Types `value` into `css` and leaves the field, as a person changes
    /// a name or a price in place.
    pub fn type_and_leave(&mut self, page: &str, css: &str, value: &str) {
        self.ask(json!({ "page": page, "fill": css, "value": value, "press": "Tab" }));
    }

    /// What the elements `css` picks show, once one of them shows `text`.
    pub fn shows(&mut self, page: &str, css: &str, text: &str) -> Vec<String> {
        self.ask(json!({ "page": page, "wait": css, "text": text }))
    }

    /// What the elements `css` picks show, once there are `count` of them.
    pub fn counts(&mut self, page: &str, css: &str, count: usize) -> Vec<String> {
        self.ask(json!({ "page": page, "wait": css, "count": count }))
    }

    /// As `counts`, waiting up to `patience` (the driver's own is 20 s).
    pub fn counts_within(
        &mut self,
        page: &str,
        css: &str,
        count: usize,
        patience: Duration,
    ) -> Vec<String> {
        self.ask(json!({
            "page": page, "wait": css, "count": count,
            "patience": patience.as_millis() as u64,
        }))
    }

    /// As `shows`, waiting up to `patience`.
    pub fn shows_within(
        &mut self,
        page: &str,
        css: &str,
        text: &str,
        patience: Duration,
    ) -> Vec<String> {
        self.ask(json!({
            "page": page, "wait": css, "text": text,
            "patience": patience.as_millis() as u64,
        }))
    }

    /// What each element `css` picks shows now.
    pub fn read(&mut self, page: &str, css: &str) -> Vec<String> {
        self.ask(json!({ "page": page, "read": css }))
    }

    /// Every open page as it is now, saved as `step-page.png`.
    pub fn screenshots(&mut self, step: &str) {
        let began = Instant::now();
        println!("{step}: {:.1?} into the walk", self.started.elapsed());
        let shots: Vec<[String; 2]> = self
            .pages
            .iter()
            .map(|page| [page.clone(), screenshot(&format!("{step}-{page}"))])
            .collect();
        self.ask(json!({ "screenshots": shots }));
        let took = began.elapsed();
        if took > Duration::from_secs(2) {
            println!("  (its screenshots took {took:.1?})");
        }
    }

    pub fn screenshot_of(&mut self, page: &str, step: &str) {
        self.ask(json!({ "page": page, "screenshot": screenshot(&format!("{step}-{page}")) }));
    }

    /// Adds a product at the head office, as a person does: its name and
    /// price typed into the form, Add clicked.
    pub fn add_product(&mut self, name: &str, price: &str) {
        self.fill("head-office", ".add-product .new-name", name);
        self.fill("head-office", ".add-product .new-price", price);
        self.click("head-office", ".add-product button");
    }
}

/// The dashboard's banner, green: everything in sync.
pub const GREEN: &str = ".msd-banner[data-tone=\"ok\"]";
/// The dashboard's banner, amber: catching up.
pub const AMBER: &str = ".msd-banner[data-tone=\"busy\"]";
/// The dashboard's banner, red: a fix is needed.
pub const RED: &str = ".msd-banner[data-tone=\"fix\"]";

/// A product on a register's page.
pub fn held(product: &str) -> String {
    format!(".held-catalog .product[data-product=\"{product}\"]")
}

/// A product in the head office's catalog.
pub fn product(name: &str) -> String {
    format!(".catalog .product[data-product=\"{name}\"]")
}

/// The registers "who holds it?" lists for a product, in one state.
pub fn places_of(product: &str, state: &str) -> String {
    format!(".holders[data-product=\"{product}\"] .msd-place[data-state=\"{state}\"]")
}

/// The receipts filed at the head office from one register.
pub fn filed_from(register: &str) -> String {
    format!(".receipts-filed .receipt[data-register=\"{register}\"]")
}

/// A register on the dashboard, in one state (synced, catching_up,
/// awaiting_fix, unreachable, …).
pub fn dashboard_register(state: &str) -> String {
    format!(".msd-replica[data-state=\"{state}\"]")
}

/// The shop as the book starts it: a head office (its own PostgreSQL, made
/// in its scratch directory) and Register 1 and Register 2, each page open
/// in the browser (`head-office`, `register-1`, `register-2`). Dropped,
/// the browser closes, then the registers and the head office stop.
pub struct Shop {
    pub browser: Browser,
    pub registers: Vec<Program>,
    pub head_office: Program,
    /// The head office's address, the same across its restart.
    pub bind: String,
    /// What the head office is started with besides its address.
    pub head_office_args: Vec<String>,
    pub scratch: Scratch,
}

impl Drop for Shop {
    /// Closes the browser, then stops the registers and the head office,
    /// saying how long each took.
    fn drop(&mut self) {
        let began = Instant::now();
        self.browser.quit();
        let browser = began.elapsed();
        for register in &mut self.registers {
            register.stop();
        }
        let registers = began.elapsed() - browser;
        self.head_office.stop();
        println!(
            "closed: the browser in {browser:.1?}, the registers in {registers:.1?}, the head office in {:.1?}",
            began.elapsed() - browser - registers
        );
    }
}

impl Shop {
    /// Starts the shop and waits until both registers are online holding
    /// the first catalog (`products` of them), and the dashboard is green.
    pub fn open(products: usize) -> Shop {
        Shop::open_with(products, &[])
    }

    /// As `open`, the head office started with `head_office_args` too
    /// (`--transport nats`, say).
    pub fn open_with(products: usize, head_office_args: &[&str]) -> Shop {
        let scratch = Scratch::new();
        let bind = free_address();
        let began = Instant::now();
        let head_office =
            Program::head_office(&scratch.dir("head-office"), &bind, head_office_args);
        println!(
            "the head office, its PostgreSQL made, answered in {:.1?}",
            began.elapsed()
        );
        let registers: Vec<Program> = ["Register 1", "Register 2"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let dir = scratch.dir(&format!("register-{}", i + 1));
                Program::register(&dir, name, &head_office.address, &[])
            })
            .collect();
        let mut browser = Browser::start();
        browser.open("head-office", &head_office.address);
        browser.open("register-1", &registers[0].address);
        browser.open("register-2", &registers[1].address);
        for page in ["register-1", "register-2"] {
            browser.shows(page, ".connection", "Online");
            browser.counts(page, ".held-catalog .product", products);
        }
        browser.counts("head-office", ".registers .register", 2);
        browser.shows("head-office", ".msd-banner", "Everything is in sync");
        println!(
            "the shop open, both registers in sync, in {:.1?}",
            began.elapsed()
        );
        Shop {
            browser,
            registers,
            head_office,
            bind,
            head_office_args: head_office_args.iter().map(|a| a.to_string()).collect(),
            scratch,
        }
    }

    /// Stops the head office as Ctrl-C would and starts it again in the
    /// same directory, on the same address.
    pub fn restart_head_office(&mut self) {
        self.head_office.stop();
        let args: Vec<&str> = self.head_office_args.iter().map(String::as_str).collect();
        self.head_office =
            Program::head_office(&self.scratch.dir("head-office"), &self.bind, &args);
    }

    /// Starts a register of another name in a directory of its own
    /// (`register-N`, the same each time for the same N), `extra` typed
    /// after, and opens its page as `register-N`.
    pub fn start_register(&mut self, number: usize, extra: &[&str]) -> Program {
        let dir = self.scratch.dir(&format!("register-{number}"));
        let register = Program::register(
            &dir,
            &format!("Register {number}"),
            &self.head_office.address,
            extra,
        );
        self.browser
            .open(&format!("register-{number}"), &register.address);
        register
    }
}

/// A product's name, changed in place, in the head office's catalog.
pub fn name_of(product: &str) -> String {
    format!(".product[data-product=\"{product}\"] .name")
}

/// A product's price, changed in place, in the head office's catalog.
pub fn price_of(product: &str) -> String {
    format!(".product[data-product=\"{product}\"] .price")
}

/// The "who holds it?" button beside a product at the head office.
pub fn who(product: &str) -> String {
    format!(".product[data-product=\"{product}\"] .who")
}

impl Browser {
    /// Picks the option shown as `label` in the list `css`.
    pub fn select(&mut self, page: &str, css: &str, label: &str) {
        self.ask(json!({ "page": page, "select": css, "label": label }));
    }

    /// Makes a sale on a register's page as a person does: each product
    /// picked with how many, added to the sale, then "Sell these".
    pub fn sell(&mut self, page: &str, lines: &[(&str, u32)]) {
        for (product, quantity) in lines {
            self.select(page, ".sale .sale-product", product);
            self.fill(page, ".sale .sale-quantity", &quantity.to_string());
            self.click(page, ".sale .add-line");
        }
        self.click(page, ".sale .complete-sale");
    }
}

/// The receipts a register's page lists.
pub const RECEIPTS: &str = ".receipt";
