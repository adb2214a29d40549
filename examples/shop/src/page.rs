//! The page's files (built by Vite into examples/shop/web/dist), served as
//! they are, and the JSON both programs answer with.

use std::path::{Path, PathBuf};

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// Where the built page is unless told: the crate's web/dist.
pub fn default_assets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("web/dist")
}

/// Refuses to start without the page built, saying how to build it.
pub fn check_built(dir: &Path, page: &str) -> Result<(), String> {
    if dir.join(page).is_file() {
        Ok(())
    } else {
        Err(format!(
            "{} holds no {page}: build the pages first \
             (cd dashboard && npm ci && npm run build; cd examples/shop/web && npm ci && npm run build), \
             or say where they are with --assets DIR",
            dir.display()
        ))
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

/// A file of the page under `dir`, or the page itself (`page`).
pub fn serve(dir: &Path, uri_path: &str, page: &str) -> Response {
    let wanted = uri_path.trim_start_matches('/');
    let safe = !wanted.split('/').any(|part| part == "..");
    let path = if safe && !wanted.is_empty() && dir.join(wanted).is_file() {
        dir.join(wanted)
    } else {
        dir.join(page)
    };
    match std::fs::read(&path) {
        Ok(bytes) => ([(header::CONTENT_TYPE, content_type(&path))], bytes).into_response(),
        Err(e) => (StatusCode::NOT_FOUND, e.to_string()).into_response(),
    }
}

/// A JSON answer, never cached.
pub fn json(value: &serde_json::Value) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        value.to_string(),
    )
        .into_response()
}

/// A failure, as the page shows it: JSON with the reason.
pub struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (
            self.0,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::json!({ "error": self.1 }).to_string(),
        )
            .into_response()
    }
}

pub fn failure(status: StatusCode, why: impl std::fmt::Display) -> Failure {
    Failure(status, why.to_string())
}

/// A request's JSON body.
pub fn body<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, Failure> {
    serde_json::from_str(text).map_err(|e| failure(StatusCode::BAD_REQUEST, e))
}
