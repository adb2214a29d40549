//! What the head office's page asks for: the catalog (and its changes),
//! the registers (and a register introducing itself), the receipts filed,
//! and the engine's status reads for the dashboard.

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use axum::response::IntoResponse;

use crate::page::{self, body, failure, Failure};

pub struct App {
    /// The owner's connection: the head office's own tables, and the reads.
    pub db: tokio_postgres::Client,
    pub assets: PathBuf,
    /// How the registers reach the head office (`GET /api/link`).
    pub link: serde_json::Value,
}

type Shared = State<Arc<App>>;

fn database(e: tokio_postgres::Error) -> Failure {
    let why = e
        .as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_else(|| e.to_string());
    failure(StatusCode::BAD_GATEWAY, why)
}

/// One status read: its jsonb, as the engine answered it.
async fn read(app: &App, sql: &str, args: &[&(dyn ToSql + Sync)]) -> Response {
    match app.db.query_one(sql, args).await {
        Ok(row) => {
            let text: String = row.get(0);
            match serde_json::from_str(&text) {
                Ok(value) => page::json(&value),
                Err(e) => failure(StatusCode::BAD_GATEWAY, e).into_response(),
            }
        }
        Err(e) => database(e).into_response(),
    }
}

/// How a register reaches the head office: its gateway, or NATS.
pub async fn link(State(app): Shared) -> Response {
    page::json(&app.link)
}

pub async fn page(State(app): Shared, uri: Uri) -> Response {
    page::serve(&app.assets, uri.path(), "index.html")
}

pub async fn products(State(app): Shared) -> Result<Response, Failure> {
    let rows = app
        .db
        .query(
            "SELECT id, name, price_cents FROM shop.products ORDER BY name, id",
            &[],
        )
        .await
        .map_err(database)?;
    let products: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({ "id": r.get::<_, Uuid>(0), "name": r.get::<_, String>(1), "price_cents": r.get::<_, i64>(2) })
        })
        .collect();
    Ok(page::json(&json!(products)))
}

#[derive(Deserialize)]
struct NewProduct {
    name: String,
    price_cents: i64,
}

#[derive(Deserialize)]
struct ProductChange {
    name: Option<String>,
    price_cents: Option<i64>,
}

fn named(name: &str) -> Result<String, Failure> {
    let name = name.trim();
    if name.is_empty() {
        Err(failure(StatusCode::BAD_REQUEST, "a product needs a name"))
    } else {
        Ok(name.to_owned())
    }
}

fn priced(cents: i64) -> Result<i64, Failure> {
    if cents < 0 {
        Err(failure(StatusCode::BAD_REQUEST, "a price is not negative"))
    } else {
        Ok(cents)
    }
}

pub async fn add_product(State(app): Shared, text: String) -> Result<Response, Failure> {
    let new: NewProduct = body(&text)?;
    let (name, cents) = (named(&new.name)?, priced(new.price_cents)?);
    let id = Uuid::new_v4();
    app.db
        .execute(
            "INSERT INTO shop.products (id, name, price_cents) VALUES ($1, $2, $3)",
            &[&id, &name, &cents],
        )
        .await
        .map_err(database)?;
    Ok(page::json(&json!({ "id": id })))
}

pub async fn change_product(
    State(app): Shared,
    Path(id): Path<Uuid>,
    text: String,
) -> Result<Response, Failure> {
    let change: ProductChange = body(&text)?;
    let name = change.name.as_deref().map(named).transpose()?;
    let cents = change.price_cents.map(priced).transpose()?;
    let changed = app
        .db
        .execute(
            "UPDATE shop.products SET name = coalesce($2, name), \
             price_cents = coalesce($3, price_cents), updated_at = now() WHERE id = $1",
            &[&id, &name, &cents],
        )
        .await
        .map_err(database)?;
    if changed == 0 {
        return Err(failure(StatusCode::NOT_FOUND, "no such product"));
    }
    Ok(page::json(&json!({ "id": id })))
}

pub async fn delete_product(State(app): Shared, Path(id): Path<Uuid>) -> Result<Response, Failure> {
    app.db
        .execute("DELETE FROM shop.products WHERE id = $1", &[&id])
        .await
        .map_err(database)?;
    Ok(page::json(&json!({ "id": id })))
}

pub async fn registers(State(app): Shared) -> Result<Response, Failure> {
    let rows = app
        .db
        .query("SELECT id, name FROM shop.registers ORDER BY name, id", &[])
        .await
        .map_err(database)?;
    let registers: Vec<_> = rows
        .iter()
        .map(|r| json!({ "id": r.get::<_, Uuid>(0), "name": r.get::<_, String>(1) }))
        .collect();
    Ok(page::json(&json!(registers)))
}

#[derive(Deserialize)]
struct Introduction {
    id: Uuid,
    name: String,
}

/// A register introduces itself: written into the registers (the worker's
/// next pass provisions it), and given the credential it presents to the
/// gateway (none over NATS).
pub async fn introduce(State(app): Shared, text: String) -> Result<Response, Failure> {
    let register: Introduction = body(&text)?;
    let name = named(&register.name)?;
    app.db
        .execute(
            "INSERT INTO shop.registers (id, name) VALUES ($1, $2) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, active = true",
            &[&register.id, &name],
        )
        .await
        .map_err(database)?;
    // Over NATS there is no gateway to present a credential to.
    let token = if app.link["transport"] == "nats" {
        String::new()
    } else {
        magic_sync_gateway::credentials::issue(&app.db, register.id, &name)
            .await
            .map_err(database)?
            .1
    };
    Ok(page::json(
        &json!({ "id": register.id, "credential": token }),
    ))
}

/// The receipts filed, newest first, each with its lines (a line's
/// product named as the catalog names it now, or null once deleted; a
/// receipt whose lines are not filed yet has none).
pub async fn receipts(State(app): Shared) -> Result<Response, Failure> {
    let rows = app
        .db
        .query(
            "SELECT r.id, r.register_id, g.name, r.total_cents, r.sold_at::text, \
                    coalesce((SELECT jsonb_agg(jsonb_build_object( \
                        'product_id', l.product_id, 'product', p.name, \
                        'quantity', l.quantity, 'price_cents', l.price_cents) \
                        ORDER BY p.name, l.id) \
                      FROM shop.receipt_lines l LEFT JOIN shop.products p ON p.id = l.product_id \
                      WHERE l.receipt_id = r.id), '[]')::text \
             FROM shop.receipts r JOIN shop.registers g ON g.id = r.register_id \
             ORDER BY r.sold_at DESC, r.id LIMIT 200",
            &[],
        )
        .await
        .map_err(database)?;
    let mut receipts = Vec::with_capacity(rows.len());
    for r in &rows {
        let lines: serde_json::Value = serde_json::from_str(&r.get::<_, String>(5))
            .map_err(|e| failure(StatusCode::BAD_GATEWAY, e))?;
        receipts.push(json!({
            "id": r.get::<_, Uuid>(0),
            "register_id": r.get::<_, Uuid>(1),
            "register": r.get::<_, String>(2),
            "total_cents": r.get::<_, i64>(3),
            "sold_at": r.get::<_, String>(4),
            "lines": lines,
        }));
    }
    Ok(page::json(&json!(receipts)))
}

pub async fn overview(State(app): Shared) -> Response {
    read(&app, "SELECT sync.overview(NULL, 20)::text", &[]).await
}

pub async fn progress(State(app): Shared, Path(replica): Path<Uuid>) -> Response {
    let scope = json!({ "replicas": [replica] }).to_string();
    read(
        &app,
        "SELECT sync.progress($1::text::jsonb)::text",
        &[&scope],
    )
    .await
}

/// Where one product is on each register: "who holds it?".
pub async fn holders(State(app): Shared, Path(product): Path<Uuid>) -> Response {
    let key = product.to_string();
    read(
        &app,
        "SELECT sync.row_progress(NULL, 'products', $1)::text",
        &[&key],
    )
    .await
}

/// Why a product is, or is not, on one register.
pub async fn explain(State(app): Shared, Path((replica, product)): Path<(Uuid, Uuid)>) -> Response {
    let key = product.to_string();
    read(
        &app,
        "SELECT sync.explain($1, 'products', $2)::text",
        &[&replica, &key],
    )
    .await
}

pub async fn wishes(State(app): Shared) -> Response {
    let none: Option<String> = None;
    read(&app, "SELECT sync.wishes(NULL, $1, 0, 100)::text", &[&none]).await
}

/// Each register's footer as it last reported it (none before its first
/// upload is filed), its version written as the protocol compares them
/// (RFC 3339 in UTC, six fractional digits and Z): a wish is based on it.
pub async fn footers(State(app): Shared) -> Result<Response, Failure> {
    let rows = app
        .db
        .query(
            "SELECT g.id, g.name, f.text, \
                    to_char(f.changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
             FROM shop.registers g LEFT JOIN shop.footers f ON f.register_id = g.id \
             WHERE g.active ORDER BY g.name, g.id",
            &[],
        )
        .await
        .map_err(database)?;
    let footers: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "register_id": r.get::<_, Uuid>(0),
                "register": r.get::<_, String>(1),
                "text": r.get::<_, Option<String>>(2),
                "changed_at": r.get::<_, Option<String>>(3),
            })
        })
        .collect();
    Ok(page::json(&json!(footers)))
}

#[derive(Deserialize)]
struct FooterWish {
    text: String,
    /// The version of the footer the page showed when the form was opened:
    /// the register carries the wish out only while it is still that one.
    based_on: String,
}

/// Wishes a register another footer (sync.desire), based on the footer
/// the page showed.
pub async fn wish_footer(
    State(app): Shared,
    Path(register): Path<Uuid>,
    text: String,
) -> Result<Response, Failure> {
    let wish: FooterWish = body(&text)?;
    let wanted = json!({ "register_id": register, "text": wish.text, "changed_at": wish.based_on })
        .to_string();
    let id: Uuid = app
        .db
        .query_one(
            "SELECT sync.desire('footers', $1::text::jsonb, 'wished from the head office''s page')",
            &[&wanted],
        )
        .await
        .map_err(database)?
        .get(0);
    Ok(page::json(&json!({ "wish": id })))
}

/// Lets go of a register's footer wish (sync.withdraw): its footer stands.
pub async fn dismiss_footer_wish(
    State(app): Shared,
    Path(register): Path<Uuid>,
) -> Result<Response, Failure> {
    let key = register.to_string();
    let withdrawn: bool = app
        .db
        .query_one("SELECT sync.withdraw('footers', $1)", &[&key])
        .await
        .map_err(database)?
        .get(0);
    Ok(page::json(&json!({ "withdrawn": withdrawn })))
}
