//! The shop's head office:
//!
//!     head-office [--database URL] [--bind ADDR] [--data DIR] [--assets DIR]
//!                 [--transport ws|nats] [--nats URL]
//!
//! With no database named, it starts a PostgreSQL cluster of its own under
//! `head-office-data/` in the directory it runs in (kept between runs: a
//! restart is the same head office), with the extension preloaded and its
//! relay worker on the database `shop`; with `--database URL` it uses
//! yours (the extension preloaded there, as docs/src/quick-start.md says).
//! Either way it makes its tables and declares them the first time. It
//! mounts the WebSocket gateway (`/link`) that the registers connect
//! through, and serves its page: the catalog, the registers and their
//! footers (with the wishes of them), the receipts filed and the
//! dashboard. `--transport nats` has the registers reach it over NATS
//! JetStream instead of the gateway: the NATS server `--nats` names, or,
//! with none named, a nats-server of its own under its data directory
//! (its own PostgreSQL is started relaying over it; a database of yours
//! must be set so already, `magic_sync.transport` and `magic_sync.nats_url`).
//! A register asks which (`GET /api/link`) as it starts. It binds
//! 127.0.0.1:8080 unless told otherwise (`--bind`),
//! and says where on its first line. Ctrl-C stops it (and its own
//! PostgreSQL) losing nothing.
//!
//! Its HTTP API (JSON; a failure is `{"error": why}`):
//!
//!     GET    /api/products                      the catalog
//!     POST   /api/products {name, price_cents}  a product added
//!     PATCH  /api/products/{id} {name?, price_cents?}
//!     DELETE /api/products/{id}
//!     GET    /api/registers                     POST: a register introduces itself {id, name}
//!     GET    /api/link                          how registers reach it: {transport: ws} or {transport: nats, url}
//!     GET    /api/receipts                      the receipts filed, each with its lines
//!     GET    /api/footers                       each register's footer as it reports it
//!     POST   /api/footers/{register}/wish {text, based_on}   sync.desire
//!     POST   /api/footers/{register}/dismiss    sync.withdraw
//!     GET    /api/wishes                        sync.wishes
//!     GET    /api/overview                      sync.overview
//!     GET    /api/progress/{register}           sync.progress of one register
//!     GET    /api/holders/{product}             sync.row_progress ("who holds it?")
//!     GET    /api/explain/{register}/{product}  sync.explain
//!
//! Its page's elements, for a walk in a browser: `.catalog .product[data-product=NAME]`
//! (`.name`, `.price`, `.who`, `.delete`; `.holders[data-product]` below it),
//! `.add-product` (`.new-name`, `.new-price`, its button); `.registers
//! .register[data-register=NAME]`; `.footers .footer-row[data-register=NAME]`
//! with `data-state` (in_sync, pending, waiting, applied, refused,
//! superseded) and `data-tone` (ok, busy, fix): `.reported` (a `del` while a
//! wish is on its way or waits), `.wished`, `.standing`, `.wish-another`,
//! `.dismiss`, and its form `.footer-form[data-register=NAME]` (`.wish-text`,
//! `.send-wish`, `.cancel-wish`); the dashboard's `.msd-wishes`;
//! `.receipts-filed .receipt[data-register=NAME]` (`.line[data-product]`,
//! `.total`); the dashboard (`.msd-dashboard`, `.msd-banner[data-tone]`,
//! `.msd-replica[data-state]` with `.msd-replica-pick`, `.msd-silent` once a
//! register is not answering, `.msd-progress` once one is picked).

mod api;
mod cluster;
mod nats;
#[path = "../page.rs"]
mod page;
mod schema;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use axum::routing::{get, patch, post};
use axum::Router;
use magic_sync_gateway::credentials::Tokens;
use magic_sync_gateway::{Gateway, Settings};
use tokio_postgres::NoTls;

/// How the registers reach the head office.
#[derive(Clone, Copy, PartialEq)]
enum Carrier {
    /// The WebSocket gateway mounted in the head office (`/link`).
    Gateway,
    /// NATS JetStream.
    Nats,
}

struct Args {
    database: Option<String>,
    carrier: Carrier,
    /// The NATS server named (`--nats`); with none, its own.
    nats: Option<String>,
    bind: SocketAddr,
    data: PathBuf,
    assets: PathBuf,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        database: None,
        carrier: Carrier::Gateway,
        nats: None,
        bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
        data: PathBuf::from("head-office-data"),
        assets: page::default_assets(),
    };
    let mut all = std::env::args().skip(1);
    while let Some(arg) = all.next() {
        let mut value = || all.next().ok_or(format!("{arg} takes a value"));
        match arg.as_str() {
            "--database" => args.database = Some(value()?),
            "--bind" => {
                let v = value()?;
                args.bind = v
                    .parse()
                    .map_err(|_| format!("--bind {v:?}: an address and port, 0.0.0.0:8080"))?
            }
            "--data" => args.data = PathBuf::from(value()?),
            "--transport" => {
                args.carrier = match value()?.as_str() {
                    "ws" => Carrier::Gateway,
                    "nats" => Carrier::Nats,
                    other => {
                        return Err(format!(
                            "--transport {other:?}: ws (the gateway, unless told) or nats"
                        ))
                    }
                }
            }
            "--nats" => args.nats = Some(value()?),
            "--assets" => args.assets = PathBuf::from(value()?),
            _ => {
                return Err(format!(
                    "{arg}? usage: head-office [--database URL] [--bind ADDR] [--data DIR] [--assets DIR] \
                     [--transport ws|nats] [--nats URL]"
                ))
            }
        }
    }
    Ok(args)
}

async fn stopped() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM is heard");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Makes the head office's tables the first time, on the owner's
/// connection; `own` says the cluster is its own (it makes the gateway's
/// role there too).
async fn migrate(owner: &tokio_postgres::Client, own: bool) -> Result<(), String> {
    let made: bool = owner
        .query_one("SELECT to_regclass('shop.registers') IS NOT NULL", &[])
        .await
        .map_err(|e| e.to_string())?
        .get(0);
    if made {
        let latest: bool = owner
            .query_one(
                "SELECT to_regclass($1) IS NOT NULL",
                &[&schema::LATEST_TABLE],
            )
            .await
            .map_err(|e| e.to_string())?
            .get(0);
        return if latest {
            Ok(())
        } else {
            Err(format!(
                "this database holds the shop of an earlier build (it has no {}): \
                 start the head office on a fresh one (with its own PostgreSQL, remove \
                 head-office-data/ and the registers' register-*.db files)",
                schema::LATEST_TABLE
            ))
        };
    }
    let mut sql = schema::MIGRATION.to_owned();
    if own {
        sql.push_str(schema::GATEWAY_ROLE);
    }
    sql.push_str(schema::FIRST_PRODUCTS);
    owner
        .batch_execute(&format!("BEGIN; {sql} COMMIT;"))
        .await
        .map_err(|e| format!("making the head office's tables: {e}"))
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// How the registers reach the head office, as `GET /api/link` says it:
/// the gateway, or the NATS server (the one named, or its own; over a
/// database of yours, the one its relay publishes to).
async fn link(
    args: &Args,
    owner: &tokio_postgres::Client,
    own_nats: Option<&str>,
) -> Result<serde_json::Value, String> {
    if args.carrier == Carrier::Gateway {
        return Ok(serde_json::json!({ "transport": "ws" }));
    }
    let setting = |name: &'static str| async move {
        owner
            .query_one("SELECT current_setting($1, true)", &[&name])
            .await
            .map(|r| r.get::<_, Option<String>>(0))
            .map_err(|e| e.to_string())
    };
    let transport = setting("magic_sync.transport").await?;
    if transport.as_deref() != Some("nats") {
        return Err(format!(
            "--transport nats, but the database relays over {}: set magic_sync.transport = 'nats' \
             and magic_sync.nats_url in its postgresql.conf (docs/src/server.md, The transports)",
            transport
                .as_deref()
                .unwrap_or("nothing (is magic_sync preloaded?)")
        ));
    }
    let url = match (&args.nats, own_nats) {
        (Some(url), _) => url.clone(),
        (None, Some(url)) => url.to_owned(),
        (None, None) => setting("magic_sync.nats_url")
            .await?
            .unwrap_or_else(|| "nats://127.0.0.1:4222".to_owned()),
    };
    Ok(serde_json::json!({ "transport": "nats", "url": url }))
}

async fn serve(
    args: Args,
    own: Option<&cluster::Cluster>,
    own_nats: Option<&str>,
) -> Result<(), String> {
    page::check_built(&args.assets, "index.html")?;
    let (owner_url, gateway_url) = match (&args.database, own) {
        (Some(url), _) => (url.clone(), url.clone()),
        (None, Some(cluster)) => {
            let postgres = connect(&cluster.url("postgres", "postgres")).await?;
            let exists: bool = postgres
                .query_one(
                    "SELECT EXISTS (SELECT FROM pg_database WHERE datname = 'shop')",
                    &[],
                )
                .await
                .map_err(|e| e.to_string())?
                .get(0);
            if !exists {
                postgres
                    .batch_execute("CREATE DATABASE shop")
                    .await
                    .map_err(|e| e.to_string())?;
            }
            (
                cluster.url("postgres", "shop"),
                cluster.url("gateway", "shop"),
            )
        }
        (None, None) => unreachable!("a database, or the head office's own"),
    };
    let owner = connect(&owner_url).await?;
    migrate(&owner, own.is_some()).await?;
    let link = link(&args, &owner, own_nats).await?;

    // The gateway, unless the registers reach the head office over NATS.
    let gateway = match args.carrier {
        Carrier::Gateway => {
            let mut settings = Settings::new(gateway_url);
            settings.listen = args.bind;
            Some(Arc::new(
                Gateway::start(settings, Arc::new(Tokens::issued_only()))
                    .await
                    .map_err(|e| format!("the gateway: {e}"))?,
            ))
        }
        Carrier::Nats => None,
    };
    let app = Arc::new(api::App {
        db: owner,
        assets: args.assets.clone(),
        link,
    });
    let router = Router::new()
        .route("/api/products", get(api::products).post(api::add_product))
        .route(
            "/api/products/{id}",
            patch(api::change_product).delete(api::delete_product),
        )
        .route("/api/registers", get(api::registers).post(api::introduce))
        .route("/api/link", get(api::link))
        .route("/api/receipts", get(api::receipts))
        .route("/api/holders/{product}", get(api::holders))
        .route("/api/explain/{replica}/{product}", get(api::explain))
        .route("/api/overview", get(api::overview))
        .route("/api/progress/{replica}", get(api::progress))
        .route("/api/wishes", get(api::wishes))
        .route("/api/footers", get(api::footers))
        .route("/api/footers/{register}/wish", post(api::wish_footer))
        .route(
            "/api/footers/{register}/dismiss",
            post(api::dismiss_footer_wish),
        )
        .fallback(get(api::page))
        .with_state(app);
    let router = match &gateway {
        Some(gateway) => router.merge(gateway.router()),
        None => router,
    };
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.bind))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    println!("head office: http://{address}");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            stopped().await;
            if let Some(gateway) = gateway {
                gateway.stop().await;
            }
        })
        .await
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("head-office: {e}");
            return ExitCode::from(2);
        }
    };
    // Over NATS with none named and its own PostgreSQL: a nats-server of
    // its own, which that PostgreSQL relays to.
    let mut own_nats = None;
    if args.carrier == Carrier::Nats && args.nats.is_none() && args.database.is_none() {
        match nats::NatsServer::start(&args.data) {
            Ok(server) => own_nats = Some(server),
            Err(e) => {
                eprintln!("head-office: its NATS server: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let nats_url = args
        .nats
        .clone()
        .or_else(|| own_nats.as_ref().map(|n| n.url.clone()));
    let relaying: Vec<(&str, &str)> = match (&args.carrier, &nats_url) {
        (Carrier::Nats, Some(url)) => vec![
            ("magic_sync.transport", "nats"),
            ("magic_sync.nats_url", url.as_str()),
        ],
        _ => vec![("magic_sync.transport", "queue")],
    };
    let own = match &args.database {
        Some(_) => None,
        None => match cluster::Cluster::start(&args.data, &relaying) {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("head-office: its PostgreSQL: {e}");
                if let Some(mut server) = own_nats {
                    server.stop();
                }
                return ExitCode::FAILURE;
            }
        },
    };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let result = runtime.block_on(serve(args, own.as_ref(), nats_url.as_deref()));
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    if let Some(cluster) = own {
        cluster.stop();
    }
    if let Some(mut server) = own_nats {
        server.stop();
    }
    match result {
        Ok(()) => {
            eprintln!("head-office: stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("head-office: {e}");
            ExitCode::FAILURE
        }
    }
}
