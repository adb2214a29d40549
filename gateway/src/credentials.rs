//! Who a device is: only ever what the credential it presents says, never
//! what a frame or a message claims. A credential allows one replica.
//!
//! Two kinds come with the gateway, and a host may bring its own login
//! instead (implement [`Authenticate`]):
//!
//! - tokens the host issues (`magic-sync-gateway issue`), kept as their
//!   SHA-256 in the gateway's own table `magic_sync_gateway.credentials`
//!   (never the token itself), revocable: revoking one (setting
//!   `revoked_at`, or deleting the row) notifies the gateway, which ends
//!   the links it opened;
//! - signed tokens `msgs.<replica>.<expires>.<mac>`: HMAC-SHA256 of
//!   `<replica>.<expires>` with a key the gateway is given, good until
//!   `expires` (seconds since 1970); checked without the database, and
//!   revoked only by expiring or by a new key.

use std::future::Future;
use std::pin::Pin;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};
use tokio_postgres::Client;
use uuid::Uuid;

/// What a credential allows: one replica. `credential` is what revokes
/// it, when it can be revoked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub replica: Uuid,
    pub credential: Option<Uuid>,
}

/// Why a credential was not taken.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The device's: unknown, revoked, expired or forged.
    #[error("the credential is not taken: {0}")]
    NotTaken(&'static str),
    /// The gateway's database: the device connects again later.
    #[error("the credentials could not be read: {0}")]
    Database(#[from] tokio_postgres::Error),
}

pub type Checked<'a> = Pin<Box<dyn Future<Output = Result<Identity, Refusal>> + Send + 'a>>;

/// Turns what a device presents into who it is. The host's own login can
/// take the place of the gateway's tokens.
pub trait Authenticate: Send + Sync + 'static {
    fn authenticate<'a>(&'a self, token: &'a str, db: &'a Client) -> Checked<'a>;
}

/// The gateway's table of issued tokens, made at start when missing. A
/// revocation notifies `magic_sync_gateway_revoked` with the credential's
/// id, from a trigger, however it is written.
pub const MIGRATION: &str = "
    CREATE SCHEMA IF NOT EXISTS magic_sync_gateway;
    CREATE TABLE IF NOT EXISTS magic_sync_gateway.credentials (
        id           uuid PRIMARY KEY,
        replica      uuid NOT NULL,
        token_sha256 bytea NOT NULL UNIQUE,
        note         text NOT NULL DEFAULT '',
        issued_at    timestamptz NOT NULL DEFAULT now(),
        revoked_at   timestamptz);
    CREATE INDEX IF NOT EXISTS credentials_replica ON magic_sync_gateway.credentials (replica);
    CREATE OR REPLACE FUNCTION magic_sync_gateway.tell_revoked() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' OR NEW.revoked_at IS NOT NULL THEN
            PERFORM pg_notify('magic_sync_gateway_revoked', OLD.id::text);
        END IF;
        RETURN NULL;
    END
    $$;
    CREATE OR REPLACE TRIGGER tell_revoked
        AFTER UPDATE OF revoked_at OR DELETE ON magic_sync_gateway.credentials
        FOR EACH ROW EXECUTE FUNCTION magic_sync_gateway.tell_revoked();
";

/// The channel a revocation is told on.
pub const REVOKED_CHANNEL: &str = "magic_sync_gateway_revoked";

/// Makes the gateway's table when it is not there yet.
pub async fn migrate(db: &Client) -> Result<(), tokio_postgres::Error> {
    let present: bool = db
        .query_one(
            "SELECT to_regclass('magic_sync_gateway.credentials') IS NOT NULL",
            &[],
        )
        .await?
        .get(0);
    if !present {
        db.batch_execute(MIGRATION).await?;
    }
    Ok(())
}

/// What a token is kept as.
fn digest(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Issues a token for `replica`: answers its id (what revokes it) and the
/// token, which is shown once and kept only as its digest.
pub async fn issue(
    db: &Client,
    replica: Uuid,
    note: &str,
) -> Result<(Uuid, String), tokio_postgres::Error> {
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    let token = format!("msgw.{}", URL_SAFE_NO_PAD.encode(secret));
    let id = Uuid::new_v4();
    db.execute(
        "INSERT INTO magic_sync_gateway.credentials (id, replica, token_sha256, note) \
         VALUES ($1, $2, $3, $4)",
        &[&id, &replica, &digest(&token), &note],
    )
    .await?;
    Ok((id, token))
}

/// Revokes a credential (or every one of a replica): answers how many.
pub async fn revoke(db: &Client, id_or_replica: Uuid) -> Result<u64, tokio_postgres::Error> {
    db.execute(
        "UPDATE magic_sync_gateway.credentials SET revoked_at = now() \
         WHERE (id = $1 OR replica = $1) AND revoked_at IS NULL",
        &[&id_or_replica],
    )
    .await
}

/// The gateway's own credentials: issued tokens, and signed ones when it
/// is given a key.
pub struct Tokens {
    signing_key: Option<Vec<u8>>,
}

impl Tokens {
    pub fn issued_only() -> Tokens {
        Tokens { signing_key: None }
    }

    pub fn with_signing_key(key: Vec<u8>) -> Tokens {
        Tokens {
            signing_key: Some(key),
        }
    }

    async fn issued(&self, token: &str, db: &Client) -> Result<Identity, Refusal> {
        let found = db
            .query_opt(
                "SELECT id, replica FROM magic_sync_gateway.credentials \
                 WHERE token_sha256 = $1 AND revoked_at IS NULL",
                &[&digest(token)],
            )
            .await?;
        let row = found.ok_or(Refusal::NotTaken("no such token, or revoked"))?;
        Ok(Identity {
            credential: Some(row.get(0)),
            replica: row.get(1),
        })
    }
}

impl Authenticate for Tokens {
    fn authenticate<'a>(&'a self, token: &'a str, db: &'a Client) -> Checked<'a> {
        Box::pin(async move {
            if token.starts_with("msgs.") {
                let key = self
                    .signing_key
                    .as_deref()
                    .ok_or(Refusal::NotTaken("this gateway takes no signed tokens"))?;
                return check_signed(key, token, now());
            }
            self.issued(token, db).await
        })
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

type HmacSha256 = Hmac<Sha256>;

fn mac_of(key: &[u8], signed: &str) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(signed.as_bytes());
    mac
}

/// A signed token for `replica`, good until `expires`.
pub fn sign(key: &[u8], replica: Uuid, expires: u64) -> String {
    let signed = format!("{}.{expires}", replica.hyphenated());
    let tag = mac_of(key, &signed).finalize().into_bytes();
    format!("msgs.{signed}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// Checks a signed token at `now`.
pub fn check_signed(key: &[u8], token: &str, now: u64) -> Result<Identity, Refusal> {
    let forged = Refusal::NotTaken("a signed token that does not check");
    let rest = token
        .strip_prefix("msgs.")
        .ok_or(Refusal::NotTaken("not signed"))?;
    let (signed, tag) = rest
        .rsplit_once('.')
        .ok_or(Refusal::NotTaken("not signed"))?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| Refusal::NotTaken("not signed"))?;
    // Compared in constant time, by the MAC's own check.
    mac_of(key, signed).verify_slice(&tag).map_err(|_| forged)?;
    let (replica, expires) = signed
        .split_once('.')
        .ok_or(Refusal::NotTaken("not signed"))?;
    let expires: u64 = expires
        .parse()
        .map_err(|_| Refusal::NotTaken("not signed"))?;
    if expires <= now {
        return Err(Refusal::NotTaken("expired"));
    }
    let replica = Uuid::parse_str(replica).map_err(|_| Refusal::NotTaken("not signed"))?;
    Ok(Identity {
        replica,
        credential: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_token_checks_until_it_expires_and_not_with_another_key() {
        let replica = Uuid::new_v4();
        let token = sign(b"key", replica, 1_000);
        assert_eq!(check_signed(b"key", &token, 999).unwrap().replica, replica);
        assert!(check_signed(b"key", &token, 1_000).is_err());
        assert!(check_signed(b"other", &token, 999).is_err());
    }

    #[test]
    fn a_signed_token_naming_another_replica_does_not_check() {
        let (mine, theirs) = (Uuid::new_v4(), Uuid::new_v4());
        let token = sign(b"key", mine, 1_000);
        let forged = token.replace(&mine.to_string(), &theirs.to_string());
        assert!(check_signed(b"key", &forged, 1).is_err());
    }
}
