//! A pretend server's messages to one replica, numbered as a real server
//! numbers them (sequence, a fresh nonce, the previous message's sequence
//! and nonce), for tests in which the test plays the server's part over a
//! transport: the shop's products as the registers of filing_shop.rs hold
//! them.
#![allow(dead_code)]

use magic_sync_proto::wire::{to_replica::Body, Down, DownTable, EndSnapshot, Filed, ToReplica};
use magic_sync_proto::PROTOCOL;
use prost::Message;
use uuid::Uuid;

pub struct Chain {
    epoch: String,
    sequence: u64,
    nonce: u64,
    snapshot: String,
}

/// A product as the server sends it: (id, name, price in cents).
pub type Product = (Uuid, &'static str, i64);

impl Chain {
    pub fn new() -> Chain {
        Chain {
            epoch: Uuid::new_v4().to_string(),
            sequence: 100,
            nonce: 0,
            snapshot: String::new(),
        }
    }

    /// The numbers of the next message: (sequence, nonce, previous,
    /// previous nonce, mac); the chain moves on to it.
    fn step(&mut self, begins: bool) -> (u64, u64, u64, u64, Vec<u8>) {
        let sequence = self.sequence + 1;
        let nonce = 7_000 + sequence * 13;
        let (previous, previous_nonce) = if begins {
            (0, 0)
        } else {
            (self.sequence, self.nonce)
        };
        let mut mac = sequence.to_be_bytes().to_vec();
        mac.extend_from_slice(&nonce.to_be_bytes());
        self.sequence = sequence;
        self.nonce = nonce;
        (sequence, nonce, previous, previous_nonce, mac)
    }

    fn down_of(&mut self, begins: bool, tables: Vec<DownTable>) -> Vec<u8> {
        let (sequence, nonce, previous, previous_nonce, mac) = self.step(begins);
        encode(
            PROTOCOL,
            Body::Down(Down {
                sequence,
                nonce,
                previous,
                previous_nonce,
                epoch: self.epoch.clone(),
                snapshot_id: self.snapshot.clone(),
                mac,
                tables,
            }),
        )
    }

    /// A Down that begins a snapshot.
    pub fn begin(&mut self, products: &[Product]) -> Vec<u8> {
        self.snapshot = Uuid::new_v4().to_string();
        self.down_of(true, vec![products_part(products)])
    }

    /// A Down that follows the last message.
    pub fn down(&mut self, products: &[Product]) -> Vec<u8> {
        self.down_of(false, vec![products_part(products)])
    }

    /// The EndSnapshot of the snapshot in progress, of the products.
    pub fn end(&mut self) -> Vec<u8> {
        self.end_speaking(PROTOCOL)
    }

    /// The EndSnapshot, in a protocol of the sender's choosing.
    pub fn end_speaking(&mut self, protocol: u32) -> Vec<u8> {
        let (sequence, nonce, previous, previous_nonce, mac) = self.step(false);
        let end = EndSnapshot {
            sequence,
            nonce,
            previous,
            previous_nonce,
            epoch: self.epoch.clone(),
            snapshot_id: std::mem::take(&mut self.snapshot),
            mac,
            tables: vec!["products".to_owned()],
        };
        encode(protocol, Body::EndSnapshot(end))
    }
}

/// The server's answer to uploads.
pub fn filed(uploads: Vec<u64>) -> Vec<u8> {
    encode(PROTOCOL, Body::Filed(Filed { uploads }))
}

fn encode(protocol: u32, body: Body) -> Vec<u8> {
    ToReplica {
        protocol,
        body: Some(body),
    }
    .encode_to_vec()
}

fn products_part(products: &[Product]) -> DownTable {
    let mut part = DownTable {
        table: "products".to_owned(),
        ..DownTable::default()
    };
    for (id, name, price) in products {
        let key = id.hyphenated().to_string();
        let row = serde_json::json!({
            "id": key,
            "name": name,
            "price_cents": price.to_string(),
            "updated_at": "2026-10-01T08:00:00.000000Z",
        });
        part.keys.push(key);
        part.upserts.push(serde_json::to_vec(&row).unwrap());
    }
    part
}
