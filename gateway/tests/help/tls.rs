//! A proxy that terminates TLS in front of the gateway, as nginx or Caddy
//! would (docs/src/gateway.md, "TLS: behind a proxy"): it takes `wss://`
//! from devices on a certificate made for the test, signed by an
//! authority made for the test, and carries the bytes within to the
//! gateway's plain port, upgrade and all.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::sync::oneshot;

/// An authority made for the test: its certificate is what a device is
/// given to trust (`--ca`, `WsSettings::ca_file`).
pub struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Authority {
    pub fn new(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Authority { issuer }
    }

    /// Writes its certificate, PEM, to `file`.
    pub fn write_to(&self, file: &Path) {
        std::fs::write(file, self.issuer.pem()).unwrap();
    }

    /// A server's certificate for `localhost` and 127.0.0.1, signed by
    /// this authority, with its key.
    fn server_certificate(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "the gateway's proxy");
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        let chain = vec![certificate.der().clone(), self.issuer.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (chain, key)
    }
}

/// The proxy, on a free loopback port, until dropped.
pub struct TlsProxy {
    pub address: SocketAddr,
    /// Connections whose TLS handshake succeeded, carried to the gateway.
    carried: Arc<AtomicUsize>,
    /// Handshakes that failed (a device that did not trust the
    /// certificate ends its handshake).
    failed: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TlsProxy {
    /// Terminates TLS on a certificate `authority` signed and carries each
    /// connection to `gateway`.
    pub fn to(gateway: SocketAddr, authority: &Authority) -> TlsProxy {
        let (chain, key) = authority.server_certificate();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let (carried, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (stop, stopped) = oneshot::channel();
        let (carrying, failing) = (carried.clone(), failed.clone());
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                tokio::pin!(stopped);
                loop {
                    let device = tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => match accepted {
                            Ok((device, _)) => device,
                            Err(_) => continue,
                        },
                    };
                    let (acceptor, carrying, failing) =
                        (acceptor.clone(), carrying.clone(), failing.clone());
                    tokio::spawn(async move {
                        let mut device = match acceptor.accept(device).await {
                            Ok(device) => device,
                            Err(_) => {
                                failing.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                        };
                        let Ok(mut upstream) = tokio::net::TcpStream::connect(gateway).await else {
                            return;
                        };
                        carrying.fetch_add(1, Ordering::SeqCst);
                        let _ = tokio::io::copy_bidirectional(&mut device, &mut upstream).await;
                    });
                }
            });
            // Dropping the runtime ends the connections it carries.
            drop(runtime);
        });
        TlsProxy {
            address,
            carried,
            failed,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The link's URL through the proxy, by the name its certificate
    /// names.
    pub fn url(&self) -> String {
        format!("wss://localhost:{}/link", self.address.port())
    }

    /// Connections carried through to the gateway.
    pub fn carried(&self) -> usize {
        self.carried.load(Ordering::SeqCst)
    }

    /// Handshakes that failed.
    pub fn failed_handshakes(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A file in `dir` holding `authority`'s certificate.
pub fn ca_file(dir: &Path, authority: &Authority, name: &str) -> PathBuf {
    let file = dir.join(name);
    authority.write_to(&file);
    file
}
