//! The gateway as an axum router: `GET /link` upgrades to a WebSocket
//! that carries one link. A host mounts `Gateway::router()` in its own
//! server, or runs `serve` (what the binary does).

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::credentials::{self, Authenticate, Identity, Refusal};
use crate::database::{config_of, Listener, Pool};
use crate::session::{self, Shared, Slot};
use crate::{Error, Settings};

/// A gateway connected to its database, ready to carry links.
pub struct Gateway {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

impl Gateway {
    /// Connects to the database (as the gateway role), makes the
    /// credentials' table if it is missing, and starts listening for the
    /// queue's notifications.
    pub async fn start(settings: Settings, auth: Arc<dyn Authenticate>) -> Result<Gateway, Error> {
        let config = config_of(&settings.database)?;
        let pool = Pool::new(config.clone(), settings.connections);
        let client = pool.client().await?;
        credentials::migrate(&client).await.map_err(|e| {
            Error::setup(format!(
                "the credentials' table magic_sync_gateway.credentials is missing and could \
                 not be made (GRANT CREATE ON DATABASE to the gateway's role, or run \
                 `magic-sync-gateway migrate` as a role that may): {e}"
            ))
        })?;
        let (stop, stopping) = watch::channel(false);
        let shared = Arc::new(Shared {
            settings,
            pool,
            listener: Listener::start(config),
            auth,
            links: AtomicUsize::new(0),
            next_link: AtomicU64::new(1),
            stopping,
        });
        Ok(Gateway { shared, stop })
    }

    /// The routes: `GET /link`, the WebSocket of a link.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/link", get(upgrade))
            .with_state(self.shared.clone())
    }

    /// How many links it carries now.
    pub fn links(&self) -> usize {
        self.shared.links.load(Ordering::Acquire)
    }

    /// Ends every link between two frames (a fault `going-away`) and
    /// refuses new ones; answers once they ended, or after
    /// `Settings::stop_within`. Nothing is lost: a message not
    /// acknowledged stays in the queue, an Up not answered is sent again.
    pub async fn stop(&self) {
        let _ = self.stop.send(true);
        let until = Instant::now() + self.shared.settings.stop_within;
        while self.links() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Serves the gateway on `settings.listen` until `shutdown` completes,
/// then stops it as `Gateway::stop` says. `bound` hears the address it
/// listens on (the port chosen, for a port of 0).
pub async fn serve(
    settings: Settings,
    auth: Arc<dyn Authenticate>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    bound: impl FnOnce(std::net::SocketAddr),
) -> Result<(), Error> {
    let socket = TcpListener::bind(settings.listen)
        .await
        .map_err(|e| Error::setup(format!("listening on {}: {e}", settings.listen)))?;
    let address = socket
        .local_addr()
        .map_err(|e| Error::setup(format!("the address listened on: {e}")))?;
    let gateway = Arc::new(Gateway::start(settings, auth).await?);
    bound(address);
    let router = gateway.router();
    let stopping = gateway.clone();
    // Frames are small and answered at once: Nagle's algorithm would hold
    // one back until the last is acknowledged (40 ms with a delayed ACK).
    let socket = socket.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(socket, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stopping.stop().await;
        })
        .await
        .map_err(|e| Error::setup(format!("serving: {e}")))
}

/// What a link's socket reads or gathers to write at once.
const LINK_BUFFER: usize = 4 * 1024;

/// The tokens a request presents: `Authorization: Bearer TOKEN`, one
/// header or several, or several tokens in one, comma-separated.
fn presented(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|v| v.trim().strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

async fn identities(shared: &Shared, tokens: &[String]) -> Result<Vec<Identity>, Response> {
    if tokens.is_empty() {
        return Ok(Vec::new());
    }
    let away = |e: tokio_postgres::Error| {
        log::warn!("the credentials could not be read: {e}");
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway's database is away",
        )
            .into_response()
    };
    let client = shared.pool.client().await.map_err(away)?;
    let mut found = Vec::new();
    for token in tokens {
        match shared.auth.authenticate(token, &client).await {
            Ok(identity) => found.push(identity),
            Err(Refusal::NotTaken(why)) => {
                return Err((StatusCode::UNAUTHORIZED, why).into_response())
            }
            Err(Refusal::Database(e)) => return Err(away(e)),
        }
    }
    Ok(found)
}

async fn upgrade(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if *shared.stopping.borrow() {
        return (StatusCode::SERVICE_UNAVAILABLE, "the gateway is stopping").into_response();
    }
    let Some(slot) = Slot::take(&shared) else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway carries all the links it may",
        )
            .into_response();
    };
    let identities = match identities(&shared, &presented(&headers)).await {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let bytes = shared.settings.frame_bytes;
    // Buffers grow to what a link sends; the defaults (128 kB each, taken
    // up front) would be most of what an idle link costs.
    ws.read_buffer_size(LINK_BUFFER)
        .write_buffer_size(LINK_BUFFER)
        .max_message_size(bytes)
        .max_frame_size(bytes)
        .on_upgrade(move |socket| session::run(socket, slot, identities))
}
