//! A register that runs until it is killed: the device program of the crash
//! loops (tests/tests/crash_loops.rs). It opens its replica on a SQLite file
//! and loops: a receipt written, what waits taken and applied, what it has
//! to say sent up, over the queue transport.
//!
//! `crash_register CONNINFO FILE REGISTER_ID [--until-idle]`: with
//! `--until-idle` it writes nothing and stops once a turn takes and sends
//! nothing.

use std::path::Path;

use magic_sync_replica::queue;
use magic_sync_tests::killed_register::{open, write_receipt};
use postgres::{Client, NoTls};
use uuid::Uuid;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, conninfo, file, id, rest @ ..] = args.as_slice() else {
        eprintln!("usage: crash_register CONNINFO FILE REGISTER_ID [--until-idle]");
        std::process::exit(2);
    };
    let until_idle = rest.iter().any(|a| a == "--until-idle");
    let me: Uuid = id.parse().expect("a register id");
    let mut pg = Client::connect(conninfo, NoTls).expect("connects to the server");
    let mut replica = open(Path::new(file), me);
    loop {
        if !until_idle {
            write_receipt(replica.connection(), me);
        }
        // A server that went away for a moment is tried again next turn.
        match queue::run_once(&mut pg, &mut replica) {
            Ok((received, sent)) if until_idle && received.is_empty() && sent.is_empty() => return,
            Ok(_) => {}
            // The server restarted (after a crash): this connection is
            // gone; whoever runs the register starts it again.
            Err(_) if pg.is_closed() => std::process::exit(1),
            Err(e) => eprintln!("crash_register: {e}"),
        }
    }
}
