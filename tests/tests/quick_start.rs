//! The quick start (docs/src/quick-start.md) run as the page writes it, so
//! that the page cannot drift from the code.
//!
//! Each fenced block of the page carries a mark after its language:
//!
//! - `quick-start`: run. A shell block runs in one bash session kept for
//!   the whole page, as the reader's terminal would be (what a block
//!   defines, later blocks use); an SQL block runs in `psql -d shop`.
//!   With `wait` too, it is run again until it prints what the page says
//!   (the relay worker works in its own time).
//! - `quick-start-output`: what the block run before it prints. A `…` in a
//!   line stands for any text (an upload's random number, say).
//! - `quick-start-file=NAME`: saved as NAME in the working directory.
//! - `quick-start-settings`: the server's settings; the throwaway cluster
//!   starts with them, as the reader's server does once restarted.
//! - `quick-start-not-run`: shown only (installing packages, the demo).
//!
//! A block without a mark fails the test: nothing on the page escapes it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use magic_sync_tests::cluster::bindir;
use magic_sync_tests::Cluster;

const PAGE: &str = include_str!("../../docs/src/quick-start.md");

/// How long a block may take, and a `wait` block may take to print what
/// the page says.
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq)]
enum Mark {
    Run { wait: bool },
    Output,
    File(String),
    Settings,
    NotRun,
}

#[derive(Debug)]
struct Block {
    line: usize,
    language: String,
    mark: Mark,
    text: String,
}

/// The page's fenced blocks, in order, each with its mark.
fn blocks(page: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = page.lines().enumerate();
    while let Some((number, line)) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        let mut words = info.split_whitespace();
        let language = words.next().unwrap_or("").to_owned();
        let words: Vec<&str> = words.collect();
        let mark = match words.as_slice() {
            ["quick-start"] => Mark::Run { wait: false },
            ["quick-start", "wait"] => Mark::Run { wait: true },
            ["quick-start-output"] => Mark::Output,
            ["quick-start-settings"] => Mark::Settings,
            ["quick-start-not-run"] => Mark::NotRun,
            [file] if file.starts_with("quick-start-file=") => {
                Mark::File(file["quick-start-file=".len()..].to_owned())
            }
            other => panic!(
                "quick-start.md line {}: the block is marked {other:?}, none of \
                 quick-start [wait], quick-start-output, quick-start-file=NAME, \
                 quick-start-settings, quick-start-not-run",
                number + 1
            ),
        };
        let mut text = String::new();
        for (_, line) in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            text.push_str(line.get(indent..).unwrap_or(line.trim_start()));
            text.push('\n');
        }
        blocks.push(Block {
            line: number + 1,
            language,
            mark,
            text,
        });
    }
    blocks
}

/// Lines without trailing blanks, and no blank lines at the end.
fn lines_of(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_owned()).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// Whether `line` is `pattern`, each `…` in it standing for any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let mut parts = pattern.split('…');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.len() >= part.len() && rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

fn output_matches(expected: &str, printed: &str) -> bool {
    let (expected, printed) = (lines_of(expected), lines_of(printed));
    expected.len() == printed.len()
        && expected
            .iter()
            .zip(&printed)
            .all(|(e, p)| line_matches(e, p))
}

/// The reader's terminal: one bash session for every shell block, with
/// `set -e`, so that a command that fails ends it.
struct Terminal {
    bash: Child,
    stdin: ChildStdin,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
}

const DONE: &str = "@@quick-start: block done@@";

impl Terminal {
    fn start(dir: &Path, path: &str, cluster: &Cluster) -> Terminal {
        let mut bash = Command::new("bash")
            .args(["--noprofile", "--norc", "-e", "-o", "pipefail", "-s"])
            .current_dir(dir)
            .env("PATH", path)
            .env("PGHOST", cluster.socket_dir())
            .env("PGPORT", cluster.port().to_string())
            .env("PGUSER", "postgres")
            .env_remove("PGDATABASE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts bash");
        let stdin = bash.stdin.take().unwrap();
        let stdout = lines_from(bash.stdout.take().unwrap());
        let stderr = lines_from(bash.stderr.take().unwrap());
        Terminal {
            bash,
            stdin,
            stdout,
            stderr,
        }
    }

    /// Runs a block; answers what it printed on stdout.
    fn run(&mut self, block: &Block) -> String {
        // The marker follows what the block printed on a line of its own
        // whether or not that ended in a newline; the newline it adds is
        // taken off again below.
        write!(self.stdin, "{}\nprintf '\\n%s\\n' '{DONE}'\n", block.text).unwrap();
        self.stdin.flush().unwrap();
        let began = Instant::now();
        let mut printed = String::new();
        loop {
            let left = PATIENCE.saturating_sub(began.elapsed());
            match self.stdout.recv_timeout(left) {
                Ok(line) if line == DONE => break,
                Ok(line) => {
                    printed.push_str(&line);
                    printed.push('\n');
                }
                Err(e) => {
                    // Ended (a command failed) or stuck: what it said on
                    // stderr, all of it once bash is gone.
                    let _ = self.bash.kill();
                    let _ = self.bash.wait();
                    let said: Vec<String> = self.stderr.iter().collect();
                    panic!(
                        "quick-start.md line {}: the block did not finish ({e:?}); it printed\n{printed}\nand on stderr\n{}",
                        block.line,
                        said.join("\n")
                    )
                }
            }
        }
        printed.pop();
        // What went to stderr is shown, as the reader would see it.
        for line in self.stderr.try_iter() {
            eprintln!("  stderr: {line}");
        }
        printed
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.bash.kill();
        let _ = self.bash.wait();
    }
}

fn lines_from(stream: impl Read + Send + 'static) -> Receiver<String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// An SQL block in `psql -d shop`, as the page tells the reader to run it.
fn psql(dir: &Path, path: &str, cluster: &Cluster, block: &Block) -> String {
    let mut psql = Command::new("psql")
        .args(["-X", "-v", "ON_ERROR_STOP=1", "-d", "shop"])
        .current_dir(dir)
        .env("PATH", path)
        .env("PGHOST", cluster.socket_dir())
        .env("PGPORT", cluster.port().to_string())
        .env("PGUSER", "postgres")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts psql");
    psql.stdin
        .take()
        .unwrap()
        .write_all(block.text.as_bytes())
        .unwrap();
    let out = psql.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "quick-start.md line {}: psql failed:\n{}{}",
        block.line,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `name = 'value'` lines, as postgresql.conf has them, as `name=value`.
fn settings(block: &Block) -> Vec<String> {
    block
        .text
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (name, value) = l.split_once('=').expect("name = value");
            format!("{}={}", name.trim(), value.trim().trim_matches('\''))
        })
        .collect()
}

/// The command line, built as this test's own binaries are (the same
/// profile, and the replica's features as this crate asks for them, so
/// nothing but the binary itself is built again): answers its directory.
fn build_the_command_line() -> PathBuf {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(Path::parent)
        .expect("the profile's directory")
        .to_owned();
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    cargo
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(["build", "--quiet", "-p", "magic_sync_tests", "-p"])
        .args(["magic_sync_replica", "--bin", "magic-sync-replica"]);
    if dir.file_name().is_some_and(|name| name == "release") {
        cargo.arg("--release");
    }
    // What cargo set for this test's own run, not the user's settings: a
    // build script that reads one (ring's reads CARGO_MANIFEST_DIR) would
    // be built again, here and in the next `cargo test` after it.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
            ]
            .contains(&name.as_ref())
        {
            cargo.env_remove(name.as_ref());
        }
    }
    let status = cargo.status().expect("runs cargo");
    assert!(status.success(), "cargo could not build magic-sync-replica");
    assert!(dir.join("magic-sync-replica").is_file(), "{dir:?}");
    dir
}

#[test]
fn every_block_of_the_quick_start_is_marked_and_every_output_follows_a_block_that_runs() {
    let blocks = blocks(PAGE);
    let mut before: Option<&Block> = None;
    for block in &blocks {
        if block.mark == Mark::Output {
            assert!(
                matches!(before.map(|b| &b.mark), Some(Mark::Run { .. })),
                "quick-start.md line {}: an output block follows no block that runs",
                block.line
            );
        }
        before = Some(block);
    }
    let runs = |language: &str| {
        blocks
            .iter()
            .filter(|b| b.language == language && matches!(b.mark, Mark::Run { .. }))
            .count()
    };
    assert!(runs("sh") >= 5 && runs("sql") >= 5, "{blocks:#?}");
    assert_eq!(
        blocks.iter().filter(|b| b.mark == Mark::Settings).count(),
        1
    );
    assert!(line_matches("uploads: […]", "uploads: [123, 4]"));
    assert!(line_matches("a … b … c", "a x b y c"));
    assert!(!line_matches("a … b", "a x c"));
    assert!(!line_matches("ab", "abc"));
}

#[test]
fn the_quick_start_on_ones_own_postgresql_runs_as_written_and_prints_what_it_says() {
    assert!(
        Command::new("sqlite3").arg("--version").output().is_ok(),
        "the quick start writes a sale with sqlite3: apt-get install sqlite3"
    );
    let blocks = blocks(PAGE);
    let settings = settings(
        blocks
            .iter()
            .find(|b| b.mark == Mark::Settings)
            .expect("the server's settings"),
    );
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let bin = build_the_command_line();
    let cluster = Cluster::start_with(&settings);
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        bindir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tempfile::tempdir().unwrap();
    let mut terminal = Terminal::start(dir.path(), &path, &cluster);

    let mut ran = 0;
    for (i, block) in blocks.iter().enumerate() {
        let wait = match &block.mark {
            Mark::Run { wait } => *wait,
            Mark::File(name) => {
                std::fs::write(dir.path().join(name), &block.text).unwrap();
                continue;
            }
            _ => continue,
        };
        let expected = blocks
            .get(i + 1)
            .filter(|next| next.mark == Mark::Output)
            .map(|next| next.text.as_str());
        let began = Instant::now();
        loop {
            eprintln!("quick-start.md line {}", block.line);
            let printed = match block.language.as_str() {
                "sh" => terminal.run(block),
                "sql" => psql(dir.path(), &path, &cluster, block),
                other => panic!("line {}: no way to run {other}", block.line),
            };
            let Some(expected) = expected else { break };
            if output_matches(expected, &printed) {
                break;
            }
            assert!(
                wait && began.elapsed() < PATIENCE,
                "quick-start.md line {}: the page says it prints\n{expected}\nand it printed\n{printed}",
                block.line
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        ran += 1;
    }
    assert!(ran >= 10, "only {ran} blocks ran");
}
