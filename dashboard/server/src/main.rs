//! `magic-sync-dashboard --database URL`: the dashboard of any database with
//! the magic_sync extension, at http://127.0.0.1:8080/.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use magic_sync_dashboard_server::{serve, Config};

const USAGE: &str = "\
magic-sync-dashboard --database URL [options]

Serves the dashboard's page and the status reads of the database at URL
(a libpq connection string or postgres:// URL), connected as a role that
may only read the status: CREATE ROLE dashboard LOGIN; SELECT
sync.allow_reading('dashboard').

  --listen ADDR         where to listen (127.0.0.1:8080); an address other
                        machines reach needs a token
  --token TOKEN         ask every read for this token (or set
                        MAGIC_SYNC_DASHBOARD_TOKEN, which ps does not show)
  --refresh SECONDS     how often the page reads again (3)
  --silent-after SECONDS  a replica silent longer is \"not answering\" (900)
  --assets DIR          the built page (dashboard/dist/app of the source)
  --any-role            take a role that may do more than read the status
";

fn fail(why: &str) -> ! {
    eprintln!("magic-sync-dashboard: {why}\n\n{USAGE}");
    std::process::exit(2)
}

fn config() -> Config {
    let mut args = std::env::args().skip(1);
    let mut database = None;
    let mut listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let mut token = std::env::var("MAGIC_SYNC_DASHBOARD_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    let mut assets = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../dist/app"));
    let mut refresh = Duration::from_secs(3);
    let mut silent_after = Duration::from_secs(900);
    let mut any_role = false;
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{arg} needs a value")))
        };
        let seconds = |v: String| {
            v.parse::<f64>()
                .ok()
                .filter(|s| *s > 0.0)
                .map(Duration::from_secs_f64)
                .unwrap_or_else(|| fail(&format!("{v}: not a number of seconds")))
        };
        match arg.as_str() {
            "--database" => database = Some(value()),
            "--listen" => {
                let v = value();
                listen = v
                    .parse()
                    .unwrap_or_else(|_| fail(&format!("{v}: not an address and port")))
            }
            "--token" => token = Some(value()),
            "--refresh" => refresh = seconds(value()),
            "--silent-after" => silent_after = seconds(value()),
            "--assets" => assets = PathBuf::from(value()),
            "--any-role" => any_role = true,
            "--help" | "-h" => {
                print!("{USAGE}");
                std::process::exit(0)
            }
            other => fail(&format!("{other}: not an option")),
        }
    }
    Config {
        database: database.unwrap_or_else(|| fail("--database is needed")),
        listen,
        token,
        assets,
        refresh,
        silent_after,
        any_role,
    }
}

fn main() {
    let config = config();
    let token = config.token.clone();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let served = runtime.block_on(serve(
        config,
        |addr| {
            // The token goes after `#`: the browser keeps it, no log sees it.
            let fragment = token.map(|t| format!("#token={t}")).unwrap_or_default();
            println!("magic-sync-dashboard: http://{addr}/{fragment}");
        },
        stop,
    ));
    if let Err(why) = served {
        eprintln!("magic-sync-dashboard: {why}");
        std::process::exit(1)
    }
}
