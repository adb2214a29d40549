//! Building the `Up` a replica sends (protocol §5.2, §6): where it stands
//! (the last message applied, as that message carried its numbers, and its
//! gap) and the rejections the server has not heard of.
//!
//! Still to come: the rows the replica writes (notes, upload numbers,
//! lanes), digests and the backlog.

use magic_sync_proto::limits::Limits;
use magic_sync_proto::wire::Up;
use magic_sync_proto::PROTOCOL;
use prost::Message;
use rusqlite::Connection;

use crate::sql::Transaction;
use crate::{reject, state, Error};

/// An `Up` to send, encoded. Hand `bytes` to the transport on `lane`, then
/// call `Replica::sent` with it once the transport took it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    pub bytes: Vec<u8>,
    pub lane: String,
    /// The state's news counter this Up answers to.
    pub(crate) news: i64,
    /// The rejections it carries.
    pub(crate) rejections: Vec<i64>,
}

impl Upload {
    /// The message, decoded again (for logs and tests).
    pub fn message(&self) -> Up {
        Up::decode(self.bytes.as_slice()).expect("an Up this library encoded decodes")
    }
}

/// The next Up, when there is something new to say.
pub(crate) fn next(
    conn: &Connection,
    limits: &Limits,
    lane: &str,
) -> Result<Option<Upload>, Error> {
    let state = state::read(conn)?;
    let waiting = if state.epoch.is_empty() {
        Vec::new()
    } else {
        reject::unreported(conn, &state.epoch)?
    };
    if state.news <= state.said && waiting.is_empty() {
        return Ok(None);
    }

    let mut up = Up {
        protocol: PROTOCOL,
        epoch: state.epoch.clone(),
        sequence: state.sequence,
        nonce: state.nonce,
        mac: state.mac.clone(),
        gap: state.gap,
        ..Up::default()
    };
    let mut carried = Vec::new();
    for (id, rejection) in &waiting {
        up.rejected.push(rejection.clone());
        if up.rejected.len() > limits.rows || up.encoded_len() > limits.bytes {
            up.rejected.pop();
            break;
        }
        carried.push(*id);
    }

    let mut news = state.news;
    if carried.len() < waiting.len() {
        // The server must hear every rejection of a message no later than
        // that the message was applied. These do not all fit: this Up
        // carries the oldest and says nothing of where the replica stands
        // (an empty epoch); a later one says it.
        up.epoch.clear();
        up.sequence = 0;
        up.nonce = 0;
        up.mac.clear();
        up.gap = 0;
        news = state.said;
    }
    Ok(Some(Upload {
        bytes: up.encode_to_vec(),
        lane: lane.to_owned(),
        news,
        rejections: carried,
    }))
}

/// The transport took this Up: what it said need not be said again.
pub(crate) fn sent(conn: &Connection, upload: &Upload) -> Result<(), Error> {
    let tx = Transaction::begin(conn)?;
    state::said(conn, upload.news)?;
    reject::reported(conn, &upload.rejections)?;
    tx.commit()?;
    Ok(())
}
