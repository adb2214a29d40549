//! Seals and numbers: what makes a message the server's own.
//!
//! Every message is sealed for its replica: an HMAC-SHA256 of the replica,
//! the epoch, the message's sequence and its nonce, under the epoch's secret,
//! cut to 16 bytes. The replica gives the seal back when it says what it
//! applied, so the server can tell a message it sent from one it never did.

use hmac::{Hmac, Mac};
use rand::Rng;
use sha2::Sha256;
use uuid::Uuid;

use magic_sync_proto::LARGEST_NUMBER;

/// The length of a seal on the wire.
pub const SEAL_BYTES: usize = 16;
/// The length of an epoch's secret.
pub const SECRET_BYTES: usize = 32;

/// What a seal covers: one message to one replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sealed {
    pub replica: Uuid,
    pub epoch: Uuid,
    pub sequence: u64,
    pub nonce: u64,
}

/// The HMAC of a message's identity, before it is cut.
fn sealer(secret: &[u8], message: &Sealed) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    // A label first, so these bytes are never a seal of anything else.
    mac.update(b"magic_sync seal 1");
    mac.update(message.replica.as_bytes());
    mac.update(message.epoch.as_bytes());
    mac.update(&message.sequence.to_be_bytes());
    mac.update(&message.nonce.to_be_bytes());
    mac
}

/// The seal of a message under its epoch's secret.
pub fn seal(secret: &[u8], message: &Sealed) -> [u8; SEAL_BYTES] {
    let full = sealer(secret, message).finalize().into_bytes();
    let mut cut = [0u8; SEAL_BYTES];
    cut.copy_from_slice(&full[..SEAL_BYTES]);
    cut
}

/// Whether `mac` is the seal the server made for this message. Compared in
/// constant time: a replica that lies learns nothing from how long it took.
pub fn is_sealed(secret: &[u8], message: &Sealed, mac: &[u8]) -> bool {
    mac.len() == SEAL_BYTES && sealer(secret, message).verify_truncated_left(mac).is_ok()
}

/// A random nonce: 1 to 2^63 - 1.
pub fn draw_nonce() -> u64 {
    rand::rng().random_range(1..=LARGEST_NUMBER)
}

/// A new epoch's secret.
pub fn draw_secret() -> [u8; SECRET_BYTES] {
    let mut secret = [0u8; SECRET_BYTES];
    rand::rng().fill(&mut secret);
    secret
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> Sealed {
        Sealed {
            replica: Uuid::from_u128(1),
            epoch: Uuid::from_u128(2),
            sequence: 7,
            nonce: 99,
        }
    }

    #[test]
    fn a_seal_checks_under_its_secret_only() {
        let secret = draw_secret();
        let mac = seal(&secret, &message());
        assert!(is_sealed(&secret, &message(), &mac));
        assert!(!is_sealed(&draw_secret(), &message(), &mac));
    }

    #[test]
    fn a_seal_covers_replica_epoch_sequence_and_nonce() {
        let secret = draw_secret();
        let mac = seal(&secret, &message());
        for other in [
            Sealed {
                replica: Uuid::from_u128(9),
                ..message()
            },
            Sealed {
                epoch: Uuid::from_u128(9),
                ..message()
            },
            Sealed {
                sequence: 8,
                ..message()
            },
            Sealed {
                nonce: 98,
                ..message()
            },
        ] {
            assert!(!is_sealed(&secret, &other, &mac), "{other:?}");
        }
    }

    #[test]
    fn a_seal_of_another_length_never_checks() {
        let secret = draw_secret();
        let mac = seal(&secret, &message());
        assert!(!is_sealed(&secret, &message(), &mac[..15]));
        assert!(!is_sealed(&secret, &message(), &[]));
    }

    #[test]
    fn nonces_are_within_range() {
        for _ in 0..1000 {
            let n = draw_nonce();
            assert!((1..=LARGEST_NUMBER).contains(&n));
        }
    }
}
