//! The benchmarks' shop with its relay worker running: a throwaway cluster
//! preloading the extension, its worker relaying the database `shop` over
//! the queue or over a throwaway nats-server, the broadcast shop
//! (`BROADCAST_SHOP`) with its products, and the registers the benchmark
//! adds. No `CALL` anywhere: the worker relays and publishes.

use postgres::Client;
use uuid::Uuid;

use crate::add_products;
use crate::nats::{self, NatsServer};
use crate::registers::Link;
use crate::{Cluster, BROADCAST_SHOP};

/// The transport the worker publishes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Queue,
    Nats,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Queue => "queue",
            Transport::Nats => "nats",
        }
    }

    /// `queue`, `nats`.
    pub fn parse(name: &str) -> Option<Transport> {
        match name.trim() {
            "queue" => Some(Transport::Queue),
            "nats" => Some(Transport::Nats),
            _ => None,
        }
    }
}

pub struct WorkerShop {
    pub pg: Client,
    // Dropped in this order: the server, then NATS.
    pub cluster: Cluster,
    nats: Option<NatsServer>,
    transport: Transport,
}

impl WorkerShop {
    /// The shop with `products` products ('Product 1' ... priced 1 ...),
    /// its worker on `transport`, with these settings too.
    pub fn start(transport: Transport, products: usize, more: &[&str]) -> WorkerShop {
        let nats = (transport == Transport::Nats).then(nats::start);
        let url = nats
            .as_ref()
            .map(|n| format!("magic_sync.nats_url={}", n.url()));
        let mut settings = vec![
            "shared_preload_libraries=magic_sync",
            "magic_sync.database=shop",
            "magic_sync.idle=1",
            "max_connections=250",
        ];
        if let Some(url) = &url {
            settings.extend(["magic_sync.transport=nats", url.as_str()]);
        }
        settings.extend_from_slice(more);
        let cluster = Cluster::start_with(&settings);
        let mut pg = cluster.database_with_extension("shop");
        pg.batch_execute(BROADCAST_SHOP).unwrap();
        add_products(&mut pg, products);
        WorkerShop {
            pg,
            cluster,
            nats,
            transport,
        }
    }

    /// Adds `count` live registers; answers their ids.
    pub fn add_registers(&mut self, count: usize) -> Vec<Uuid> {
        let ids: Vec<Uuid> = (0..count).map(|_| Uuid::new_v4()).collect();
        self.pg
            .execute(
                "INSERT INTO shop.registers (id) SELECT unnest($1::uuid[])",
                &[&ids],
            )
            .unwrap();
        ids
    }

    /// How its registers reach it.
    pub fn link(&self) -> Link {
        match &self.nats {
            Some(nats) => Link::Nats(nats.url()),
            None => Link::Queue(self.cluster.url("shop")),
        }
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The relay worker's process id.
    pub fn worker_pid(&mut self) -> i32 {
        self.pg
            .query_one(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'",
                &[],
            )
            .unwrap()
            .get(0)
    }

    /// The passes relayed so far, whoever ran them.
    pub fn passes(&mut self) -> i64 {
        self.pg
            .query_opt("SELECT passes FROM sync.relay_state", &[])
            .unwrap()
            .map_or(0, |row| row.get(0))
    }

    /// The passes that failed so far and were tried again, as the
    /// worker's log says (a serialization failure, say).
    pub fn failed_passes(&self) -> usize {
        self.cluster.log().matches("a pass failed").count()
    }

    /// The ids of the products, in their order of creation.
    pub fn product_ids(&mut self) -> Vec<Uuid> {
        self.pg
            .query("SELECT id FROM shop.products ORDER BY price_cents", &[])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    }
}

/// A process's private resident memory now, in MiB (`RssAnon` in
/// /proc/PID/status: shared buffers are not in it).
pub fn private_mib(pid: i32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
}
