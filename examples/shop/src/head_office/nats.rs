//! `--transport nats` with no NATS server named: a nats-server of the head
//! office's own, with JetStream, under its data directory (`nats/`, kept
//! between runs, on the same port: the streams hold what is on its way to
//! the registers across a restart), listening on 127.0.0.1 only, and
//! stopped when the head office stops.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct NatsServer {
    child: Child,
    pub url: String,
}

impl NatsServer {
    /// Starts it (`nats-server` on the PATH, or Debian's /usr/sbin one),
    /// and waits until it takes connections.
    pub fn start(dir: &Path) -> Result<NatsServer, String> {
        let store = dir.join("nats");
        std::fs::create_dir_all(&store).map_err(|e| format!("{}: {e}", store.display()))?;
        let port = port_of(&store)?;
        let program = ["nats-server", "/usr/sbin/nats-server"]
            .into_iter()
            .find(|p| {
                Command::new(p)
                    .arg("--version")
                    .stdout(Stdio::null())
                    .status()
                    .is_ok()
            })
            .ok_or("no nats-server found: install it (Debian's nats-server package; scripts/setup.sh does), or name one with --nats URL")?;
        let log = std::fs::File::create(store.join("nats-server.log"))
            .map_err(|e| format!("{}: {e}", store.display()))?;
        let child = Command::new(program)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(&store)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let mut server = NatsServer {
            child,
            url: format!("nats://127.0.0.1:{port}"),
        };
        let until = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "nats-server ended ({status}) before it took connections on port {port}: see {}",
                    store.join("nats-server.log").display()
                ));
            }
            if Instant::now() > until {
                server.stop();
                return Err(format!(
                    "nats-server took no connection on port {port} in 20 s"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }

    /// Stops it as Ctrl-C would (JetStream keeps what it stored).
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The port it listens on: the one it had (kept in `port`), or a free one
/// the first time.
fn port_of(store: &Path) -> Result<u16, String> {
    let kept = store.join("port");
    if let Ok(text) = std::fs::read_to_string(&kept) {
        if let Ok(port) = text.trim().parse() {
            return Ok(port);
        }
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port for nats-server: {e}"))?;
    std::fs::write(&kept, port.to_string()).map_err(|e| format!("{}: {e}", kept.display()))?;
    Ok(port)
}
