//! magic-sync-dashboard: the dashboard's page, and the status reads' JSON
//! it shows, for any database with the magic_sync extension. It connects as
//! the extension's reader role (one given `sync.allow_reading()`, which may
//! read the status and nothing else), and refuses a role that may do more
//! unless told otherwise. It binds 127.0.0.1 unless told otherwise, and
//! anywhere else asks for a token.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls};

/// What the program was asked to do.
#[derive(Clone, Debug)]
pub struct Config {
    pub database: String,
    pub listen: SocketAddr,
    pub token: Option<String>,
    pub assets: PathBuf,
    pub refresh: Duration,
    pub silent_after: Duration,
    /// Whether a role that may do more than read the status is taken.
    pub any_role: bool,
}

/// The page's files, read once at start.
struct Assets(HashMap<String, (&'static str, Vec<u8>)>);

impl Assets {
    fn read(dir: &Path) -> Result<Assets, String> {
        let mut files = HashMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let entries = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let name = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                files.insert(name, (content_type(&path), bytes));
            }
        }
        if !files.contains_key("index.html") {
            return Err(format!(
                "{} holds no index.html: build the page first (cd dashboard && npm ci && npm run build), \
                 or say where it is with --assets DIR",
                dir.display()
            ));
        }
        Ok(Assets(files))
    }
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}

/// The connection to the database, made again when it is lost.
struct Reader {
    url: String,
    client: Mutex<Option<Arc<Client>>>,
}

impl Reader {
    async fn client(&self) -> Result<Arc<Client>, String> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let c = Arc::new(connect(&self.url).await?);
        *slot = Some(c.clone());
        Ok(c)
    }
}

/// Connects, and makes the session read only: the reads write nothing, so
/// nothing this program sends can.
async fn connect(url: &str) -> Result<Client, String> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("cannot connect to the database: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
        .batch_execute(
            "SET default_transaction_read_only = on; SET statement_timeout = '20s'; \
             SET application_name = 'magic-sync-dashboard'",
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(client)
}

/// What the role connected may do beyond reading the status, if anything:
/// a superuser, or EXECUTE on a function of the engine's other than the
/// reads (and the trigger functions every role has), or any right on the
/// engine's tables.
pub async fn wider_than_reading(client: &Client) -> Result<Option<String>, String> {
    let row = client
        .query_one(
            "SELECT current_user::text,
                    (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
                    has_function_privilege('sync.overview(jsonb, integer)', 'EXECUTE'),
                    (SELECT string_agg(DISTINCT n.nspname || '.' || p.proname, ', ')
                       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                      WHERE n.nspname IN ('sync', 'sync_internal')
                        AND p.proname NOT IN ('overview', 'listing', 'health', 'progress',
                                              'row_progress', 'explain', 'metrics', 'wishes',
                                              'note_row', 'note_group', 'refuse_truncate')
                        AND has_function_privilege(p.oid, 'EXECUTE')),
                    (SELECT string_agg(n.nspname || '.' || c.relname, ', ')
                       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname IN ('sync', 'sync_internal') AND c.relkind IN ('r', 'v', 'p')
                        AND has_table_privilege(c.oid, 'SELECT, INSERT, UPDATE, DELETE'))",
            &[],
        )
        .await
        .map_err(|e| format!("cannot ask what the role may do (is the extension there?): {e}"))?;
    let role: String = row.get(0);
    let superuser: bool = row.get(1);
    let reads: bool = row.get(2);
    let functions: Option<String> = row.get(3);
    let tables: Option<String> = row.get(4);
    if !reads {
        return Err(format!(
            "the role {role} may not read the status: as the extension's owner, run \
             SELECT sync.allow_reading('{role}')"
        ));
    }
    Ok(if superuser {
        Some(format!("{role} is a superuser"))
    } else if let Some(f) = functions {
        Some(format!("{role} may call {f}"))
    } else {
        tables.map(|t| format!("{role} may read or write {t}"))
    })
}

struct App {
    config: Config,
    reader: Reader,
    assets: Assets,
}

/// A read's failure, as the page shows it: JSON with the reason.
struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.1 }).to_string();
        (self.0, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

fn json(text: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        text,
    )
        .into_response()
}

/// One read: its jsonb as text, untouched. A refusal of the engine's (a
/// state, a table or a key it does not know) is the caller's.
async fn read(app: &App, sql: &str, args: &[&(dyn ToSql + Sync)]) -> Result<Response, Failure> {
    let client = app
        .reader
        .client()
        .await
        .map_err(|e| Failure(StatusCode::BAD_GATEWAY, e))?;
    match client.query_one(sql, args).await {
        Ok(row) => Ok(json(row.get::<_, String>(0))),
        Err(e) => {
            let caller = e
                .code()
                .is_some_and(|c| c.code() == "22023" || c.code() == "22P02" || c.code() == "42P01");
            let why = e
                .as_db_error()
                .map(|d| d.message().to_owned())
                .unwrap_or_else(|| e.to_string());
            Err(Failure(
                if caller {
                    StatusCode::BAD_REQUEST
                } else {
                    StatusCode::BAD_GATEWAY
                },
                why,
            ))
        }
    }
}

fn authorized(app: &App, headers: &HeaderMap) -> Result<(), Failure> {
    let Some(token) = &app.config.token else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    // Compared in full whatever differs first: no timing tells the token.
    let same = given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |d, (a, b)| d | (a ^ b))
            == 0;
    if same {
        Ok(())
    } else {
        Err(Failure(
            StatusCode::UNAUTHORIZED,
            "a token is needed: open the address the server printed (it ends in #token=...)".into(),
        ))
    }
}

type Shared = State<Arc<App>>;

#[derive(Deserialize)]
struct Page {
    state: Option<String>,
    #[serde(default)]
    offset: i32,
}

async fn settings(State(app): Shared, headers: HeaderMap) -> Result<Response, Failure> {
    authorized(&app, &headers)?;
    Ok(json(
        serde_json::json!({
            "refresh_ms": app.config.refresh.as_millis() as u64,
            "silent_after_ms": app.config.silent_after.as_millis() as u64,
        })
        .to_string(),
    ))
}

async fn overview(State(app): Shared, headers: HeaderMap) -> Result<Response, Failure> {
    authorized(&app, &headers)?;
    read(&app, "SELECT sync.overview(NULL, 20)::text", &[]).await
}

async fn listing(
    State(app): Shared,
    headers: HeaderMap,
    Query(page): Query<Page>,
) -> Result<Response, Failure> {
    authorized(&app, &headers)?;
    read(
        &app,
        "SELECT sync.listing(NULL, $1, $2, 20)::text",
        &[&page.state, &page.offset],
    )
    .await
}

async fn health(State(app): Shared, headers: HeaderMap) -> Result<Response, Failure> {
    authorized(&app, &headers)?;
    read(&app, "SELECT sync.health(NULL, 20)::text", &[]).await
}

async fn progress(
    State(app): Shared,
    headers: HeaderMap,
    UrlPath(replica): UrlPath<uuid::Uuid>,
) -> Result<Response, Failure> {
    authorized(&app, &headers)?;
    let scope = serde_json::json!({ "replicas": [replica] }).to_string();
    read(
        &app,
        "SELECT sync.progress($1::text::jsonb)::text",
        &[&scope],
    )
    .await
}

async fn wishes(
    State(app): Shared,
    headers: HeaderMap,
    Query(page): Query<Page>,
) -> Result<Response, Failure> {
    authorized(&app, &headers)?;
    read(
        &app,
        "SELECT sync.wishes(NULL, $1, $2, 20)::text",
        &[&page.state, &page.offset],
    )
    .await
}

async fn row(
    State(app): Shared,
    headers: HeaderMap,
    UrlPath((table, key)): UrlPath<(String, String)>,
) -> Result<Response, Failure> {
    authorized(&app, &headers)?;
    read(
        &app,
        "SELECT sync.row_progress(NULL, $1, $2)::text",
        &[&table, &key],
    )
    .await
}

async fn explain(
    State(app): Shared,
    headers: HeaderMap,
    UrlPath((replica, table, key)): UrlPath<(uuid::Uuid, String, String)>,
) -> Result<Response, Failure> {
    authorized(&app, &headers)?;
    read(
        &app,
        "SELECT sync.explain($1, $2, $3)::text",
        &[&replica, &table, &key],
    )
    .await
}

/// The page's files; anything else is the page itself.
async fn page(State(app): Shared, uri: axum::http::Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let (kind, bytes) = app
        .assets
        .0
        .get(path)
        .or_else(|| app.assets.0.get("index.html"))
        .unwrap();
    ([(header::CONTENT_TYPE, *kind)], bytes.clone()).into_response()
}

/// Checks the role, reads the page's files, and serves until stopped:
/// answers the address it listens on once it does, through `bound`.
pub async fn serve(
    config: Config,
    bound: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    if !config.listen.ip().is_loopback() && config.token.is_none() {
        return Err(format!(
            "{} is reached from other machines: give a token (--token, or MAGIC_SYNC_DASHBOARD_TOKEN)",
            config.listen
        ));
    }
    let assets = Assets::read(&config.assets)?;
    let client = connect(&config.database).await?;
    if let Some(wider) = wider_than_reading(&client).await? {
        if !config.any_role {
            return Err(format!(
                "{wider}: connect as a role that may only read the status (CREATE ROLE dashboard LOGIN; \
                 SELECT sync.allow_reading('dashboard')), or pass --any-role"
            ));
        }
    }
    let app = Arc::new(App {
        reader: Reader {
            url: config.database.clone(),
            client: Mutex::new(Some(Arc::new(client))),
        },
        config: config.clone(),
        assets,
    });
    let router = Router::new()
        .route("/api/settings", get(settings))
        .route("/api/overview", get(overview))
        .route("/api/listing", get(listing))
        .route("/api/health", get(health))
        .route("/api/progress/{replica}", get(progress))
        .route("/api/wishes", get(wishes))
        .route("/api/row/{table}/{key}", get(row))
        .route("/api/explain/{replica}/{table}/{key}", get(explain))
        .fallback(get(page))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    bound(listener.local_addr().map_err(|e| e.to_string())?);
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| e.to_string())
}
