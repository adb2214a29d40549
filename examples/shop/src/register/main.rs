//! A register of the shop:
//!
//!     register --name "Register 1" [--port 8081] [--bind 127.0.0.1]
//!              [--head-office http://127.0.0.1:8080] [--refuse PRODUCT]
//!              [--assets DIR]
//!
//! Keeps its SQLite file in the directory it is started from
//! (`register-PORT.db`): started there again, it is the same register. The
//! first time, it introduces itself to the head office (its name and the
//! id it made), which writes it into its registers and gives it the
//! credential it presents to the gateway. It runs the replica's device
//! loop over the head office's gateway in a thread, and serves its page:
//! the catalog it holds, a sale, the receipts not at the head office yet,
//! going offline and back online, breaking the network and restoring it,
//! its printer on or off, and its footer. Ctrl-C stops it losing nothing:
//! what it sold waits in its file. `--refuse PRODUCT` starts it with a bug
//! that refuses a product of that name (its file will not take the row);
//! started again without it, the bug is fixed.
//!
//! Its HTTP API (JSON; a failure is `{"error": why}`):
//!
//!     GET  /api/state     what its page shows: products (not retired),
//!                         receipts with their lines, not_at_head_office,
//!                         online, network, connection, printer, footer, wish
//!     POST /api/sell      {product_id, quantity?} or {lines: [{product_id, quantity}]}
//!     POST /api/offline   POST /api/online
//!     POST /api/network   {broken: bool}
//!     POST /api/printer   {on: bool}
//!     POST /api/footer    {text}: the register's own change of its footer
//!
//! Its page's elements, for a walk in a browser: `.connection[data-online]`
//! (`.go-offline`, `.go-online`); `.network[data-network=up|broken]`
//! (`.break-network`, `.restore-network`); `.not-at-head-office[data-count]`;
//! `.held-catalog .product[data-product=NAME]` (`.sell`: one of it);
//! `.sale` (`.sale-product`, a select; `.sale-quantity`, `.add-line`,
//! `.line[data-product]`, `.sale-total`, `.complete-sale`, `.clear-sale`);
//! `.printer[data-printer=on|off]` (`.printer-off`, `.printer-on`);
//! `.footer` (`.footer-text`, `.edit-footer`, `.footer-input`,
//! `.change-footer`, `.footer-wish[data-outcome]`); `.receipts
//! .receipt[data-receipt]` (`.line[data-product][data-retired]`, `.total`,
//! `.printed-footer`).

#[path = "../page.rs"]
mod page;
mod printer;
mod till;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use uuid::Uuid;

use axum::response::IntoResponse;
use page::{body, failure, Failure};
use till::Till;

struct Args {
    name: String,
    port: u16,
    bind: IpAddr,
    head_office: String,
    assets: PathBuf,
    /// A product this register's build refuses (a bug, on purpose).
    refuse: Option<String>,
}

const USAGE: &str = "usage: register --name NAME [--port 8081] [--bind 127.0.0.1] \
                     [--head-office http://127.0.0.1:8080] [--refuse PRODUCT] [--assets DIR]";

fn args() -> Result<Args, String> {
    let mut name = None;
    let mut args = Args {
        name: String::new(),
        port: 8081,
        bind: IpAddr::from([127, 0, 0, 1]),
        head_office: "http://127.0.0.1:8080".to_owned(),
        assets: page::default_assets(),
        refuse: None,
    };
    let mut all = std::env::args().skip(1);
    while let Some(arg) = all.next() {
        let mut value = || all.next().ok_or(format!("{arg} takes a value"));
        match arg.as_str() {
            "--name" => name = Some(value()?),
            "--port" => {
                let v = value()?;
                args.port = v.parse().map_err(|_| format!("--port {v:?}: a port"))?
            }
            "--bind" => {
                let v = value()?;
                args.bind = v
                    .parse()
                    .map_err(|_| format!("--bind {v:?}: an address, 0.0.0.0"))?
            }
            "--head-office" => args.head_office = value()?.trim_end_matches('/').to_owned(),
            "--assets" => args.assets = PathBuf::from(value()?),
            "--refuse" => args.refuse = Some(value()?),
            _ => return Err(format!("{arg}? {USAGE}")),
        }
    }
    args.name = name.ok_or(USAGE)?;
    Ok(args)
}

type Shared = State<Arc<Till>>;

async fn state(State(till): Shared) -> Response {
    let till = till.clone();
    match tokio::task::spawn_blocking(move || till.shown()).await {
        Ok(Ok(value)) => page::json(&value),
        Ok(Err(e)) => failure(StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        Err(e) => failure(StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
    }
}

/// A sale: one product (`product_id`, and `quantity`, one unless said),
/// or its `lines`, each a product and how many.
#[derive(Deserialize)]
struct Sale {
    product_id: Option<Uuid>,
    quantity: Option<i64>,
    #[serde(default)]
    lines: Vec<Line>,
}

#[derive(Deserialize)]
struct Line {
    product_id: Uuid,
    quantity: i64,
}

async fn sell(State(till): Shared, text: String) -> Result<Response, Failure> {
    let sale: Sale = body(&text)?;
    let mut lines: Vec<(Uuid, i64)> = sale
        .lines
        .iter()
        .map(|l| (l.product_id, l.quantity))
        .collect();
    if let Some(product) = sale.product_id {
        lines.push((product, sale.quantity.unwrap_or(1)));
    }
    let till = till.clone();
    match tokio::task::spawn_blocking(move || till.sell(&lines)).await {
        Ok(Ok(receipt)) => Ok(page::json(&serde_json::json!({ "receipt": receipt }))),
        Ok(Err(e)) => Err(failure(StatusCode::BAD_REQUEST, e)),
        Err(e) => Err(failure(StatusCode::INTERNAL_SERVER_ERROR, e)),
    }
}

#[derive(Deserialize)]
struct Footer {
    text: String,
}

async fn footer(State(till): Shared, text: String) -> Result<Response, Failure> {
    let footer: Footer = body(&text)?;
    let till = till.clone();
    let wanted = footer.text.clone();
    match tokio::task::spawn_blocking(move || till.change_footer(&wanted)).await {
        Ok(Ok(())) => Ok(page::json(
            &serde_json::json!({ "footer": footer.text.trim() }),
        )),
        Ok(Err(e)) => Err(failure(StatusCode::BAD_REQUEST, e)),
        Err(e) => Err(failure(StatusCode::INTERNAL_SERVER_ERROR, e)),
    }
}

#[derive(Deserialize)]
struct PrinterSwitch {
    on: bool,
}

async fn printer(State(till): Shared, text: String) -> Result<Response, Failure> {
    let switch: PrinterSwitch = body(&text)?;
    till.switch_printer(switch.on);
    Ok(page::json(&serde_json::json!({ "printer": switch.on })))
}

#[derive(Deserialize)]
struct NetworkSwitch {
    broken: bool,
}

async fn network(State(till): Shared, text: String) -> Result<Response, Failure> {
    let switch: NetworkSwitch = body(&text)?;
    let till = till.clone();
    let _ = tokio::task::spawn_blocking(move || till.break_network(switch.broken)).await;
    Ok(page::json(
        &serde_json::json!({ "network": !switch.broken }),
    ))
}

async fn offline(State(till): Shared) -> Response {
    let till = till.clone();
    let _ = tokio::task::spawn_blocking(move || till.go_offline()).await;
    page::json(&serde_json::json!({ "online": false }))
}

async fn online(State(till): Shared) -> Response {
    let till = till.clone();
    let _ = tokio::task::spawn_blocking(move || till.go_online()).await;
    page::json(&serde_json::json!({ "online": true }))
}

async fn the_page(State(till): Shared, uri: Uri) -> Response {
    page::serve(till.assets(), uri.path(), "register.html")
}

async fn stopped() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM is heard");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn serve(args: Args) -> Result<(), String> {
    page::check_built(&args.assets, "register.html")?;
    let file = PathBuf::from(format!("register-{}.db", args.port));
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.bind, args.port))
        .await
        .map_err(|e| format!("cannot listen on {}:{}: {e}", args.bind, args.port))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let (name, head_office, assets, refuse) =
        (args.name, args.head_office, args.assets, args.refuse);
    let till = tokio::task::spawn_blocking(move || {
        Till::open(&file, &name, &head_office, assets, refuse.as_deref())
    })
    .await
    .map_err(|e| e.to_string())??;
    let till = Arc::new(till);
    till.go_online();
    let router = Router::new()
        .route("/api/state", get(state))
        .route("/api/sell", post(sell))
        .route("/api/offline", post(offline))
        .route("/api/online", post(online))
        .route("/api/footer", post(footer))
        .route("/api/printer", post(printer))
        .route("/api/network", post(network))
        .fallback(get(the_page))
        .with_state(till.clone());
    println!("{}: http://{address}", till.name());
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(stopped())
        .await
        .map_err(|e| e.to_string());
    tokio::task::spawn_blocking(move || till.go_offline())
        .await
        .map_err(|e| e.to_string())?;
    served
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("register: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    match runtime.block_on(serve(args)) {
        Ok(()) => {
            eprintln!("register: stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("register: {e}");
            ExitCode::FAILURE
        }
    }
}
