//! The webhooks' certificate and the TLS listener.
//!
//! Either the files of a `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`,
//! and `ca.crt` when the issuer adds it), reread when they change (a
//! renewed certificate is served without a restart), or a certificate the
//! operator makes at start: a CA of its own signs a certificate for the
//! names the API server reaches it by, and the CA goes into the webhook
//! configurations' `caBundle`.
//!
//! TLS is rustls with ring, the stack the Kubernetes client already uses.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How often the certificate files are checked for a change.
const RELOAD_EVERY: Duration = Duration::from_secs(10);
/// How long a client has for the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate served, and the CA that vouches for it.
#[derive(Clone)]
pub(crate) struct Certificates {
    key: Arc<RwLock<Arc<CertifiedKey>>>,
    /// PEM; changes are sent to whoever registers the configurations.
    ca_bundle: watch::Sender<Vec<u8>>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates").finish_non_exhaustive()
    }
}

impl Certificates {
    /// A CA and a certificate it signs for `names` (DNS names or IP
    /// addresses), made now and kept in memory only.
    ///
    /// # Errors
    /// A message when a name cannot be put in a certificate.
    pub(crate) fn self_signed(names: &[String]) -> Result<Self, String> {
        let problem = |e: rcgen::Error| format!("cannot make a certificate for {names:?}: {e}");
        let ca_key = rcgen::KeyPair::generate().map_err(problem)?;
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(problem)?;
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "kplug-operator webhook CA");
        ca.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(problem)?;
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().map_err(problem)?;
        let mut leaf = rcgen::CertificateParams::new(names.to_vec()).map_err(problem)?;
        leaf.distinguished_name.push(
            rcgen::DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = leaf.signed_by(&key, &issuer).map_err(problem)?;
        let certified = certified_key(
            vec![cert.der().clone()],
            PrivateKeyDer::try_from(key.serialize_der())
                .map_err(|e| format!("the key just made is unusable: {e}"))?,
        )?;
        Ok(Self::new(certified, ca_cert.pem().into_bytes()))
    }

    /// The certificate in `dir` (`tls.crt`, `tls.key`; `ca.crt` for the
    /// `caBundle`, else `tls.crt` itself), reread every 10 s by
    /// [`Self::reload_from`].
    ///
    /// # Errors
    /// A message naming the file and what is wrong with it.
    pub(crate) fn from_dir(dir: &Path) -> Result<Self, String> {
        let files = Files::read(dir)?;
        Ok(Self::new(files.certified_key()?, files.ca_bundle))
    }

    fn new(key: CertifiedKey, ca_bundle: Vec<u8>) -> Self {
        Self {
            key: Arc::new(RwLock::new(Arc::new(key))),
            ca_bundle: watch::Sender::new(ca_bundle),
        }
    }

    /// The CA bundle (PEM), now and as it changes.
    pub(crate) fn ca_bundle(&self) -> watch::Receiver<Vec<u8>> {
        self.ca_bundle.subscribe()
    }

    /// Rereads `dir` every 10 s until dropped; a changed certificate is
    /// served from the next handshake on. A broken one (half-written
    /// during a Secret update) is logged and the current one kept.
    pub(crate) async fn reload_from(self, dir: PathBuf) {
        let mut last = Files::read(&dir).ok().map(|f| f.raw);
        loop {
            tokio::time::sleep(RELOAD_EVERY).await;
            let files = match Files::read(&dir) {
                Ok(files) => files,
                Err(error) => {
                    tracing::warn!(%error, "webhook certificate not reloaded; serving the current one");
                    continue;
                }
            };
            if last.as_ref() == Some(&files.raw) {
                continue;
            }
            match files.certified_key() {
                Ok(key) => {
                    *self.key.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
                    self.ca_bundle.send_if_modified(|ca| {
                        let changed = *ca != files.ca_bundle;
                        ca.clone_from(&files.ca_bundle);
                        changed
                    });
                    tracing::info!(dir = %dir.display(), "webhook certificate reloaded");
                    last = Some(files.raw);
                }
                Err(error) => {
                    tracing::warn!(%error, "webhook certificate not reloaded; serving the current one");
                }
            }
        }
    }

    fn acceptor(&self) -> Result<TlsAcceptor, String> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Resolver(Arc::clone(&self.key))));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// ring, explicitly: the process may hold more than one provider.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certified_key(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<CertifiedKey, String> {
    let signing = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("the private key is not usable for TLS: {e}"))?;
    Ok(CertifiedKey::new(certs, signing))
}

/// The files of a `kubernetes.io/tls` Secret, as mounted.
struct Files {
    raw: (Vec<u8>, Vec<u8>),
    ca_bundle: Vec<u8>,
}

impl Files {
    fn read(dir: &Path) -> Result<Self, String> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|e| {
                format!(
                    "--webhook-cert-dir: cannot read {}: {e}; mount a kubernetes.io/tls Secret there (tls.crt, tls.key)",
                    path.display()
                )
            })
        };
        let cert = read("tls.crt")?;
        let key = read("tls.key")?;
        let ca_bundle = match std::fs::read(dir.join("ca.crt")) {
            Ok(ca) if !ca.is_empty() => ca,
            _ => cert.clone(),
        };
        Ok(Self {
            raw: (cert, key),
            ca_bundle,
        })
    }

    fn certified_key(&self) -> Result<CertifiedKey, String> {
        let certs = CertificateDer::pem_slice_iter(&self.raw.0)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("--webhook-cert-dir: tls.crt is not PEM: {e}"))?;
        if certs.is_empty() {
            return Err("--webhook-cert-dir: tls.crt holds no certificate".into());
        }
        let key = PrivateKeyDer::from_pem_slice(&self.raw.1)
            .map_err(|e| format!("--webhook-cert-dir: tls.key holds no usable private key: {e}"))?;
        certified_key(certs, key)
    }
}

#[derive(Debug)]
struct Resolver(Arc<RwLock<Arc<CertifiedKey>>>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.0.read().unwrap_or_else(|e| e.into_inner()),
        ))
    }
}

/// Connections that completed the TLS handshake, for `axum::serve`. The
/// handshakes run in tasks of their own: a client that never finishes one
/// does not hold up the others.
pub(crate) struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Accepts on `listener` with `certificates`.
    ///
    /// # Errors
    /// A message when TLS cannot be set up.
    pub(crate) fn new(listener: TcpListener, certificates: &Certificates) -> Result<Self, String> {
        let acceptor = certificates.acceptor()?;
        let local = listener
            .local_addr()
            .map_err(|e| format!("--webhook-addr: {e}"))?;
        let (tx, accepted) = mpsc::channel(64);
        let accepting = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors, typically: wait a little.
                        tracing::warn!(%error, "webhook: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "webhook: TLS handshake failed");
                        }
                        Err(_) => tracing::debug!(%peer, "webhook: TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self {
            accepted,
            local,
            accepting,
        })
    }
}

impl TlsListener {
    /// The address bound.
    pub(crate) fn local(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accepting task only ends when aborted, with the listener.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use rustls::client::danger::ServerCertVerifier;

    use super::*;

    #[test]
    fn a_self_signed_certificate_is_served_and_its_ca_is_the_bundle() {
        let c =
            Certificates::self_signed(&["127.0.0.1".into(), "kplug.example.svc".into()]).unwrap();
        let ca = c.ca_bundle().borrow().clone();
        let ca = CertificateDer::from_pem_slice(&ca).unwrap();
        let key = c.key.read().unwrap().clone();
        // The served certificate is signed by the CA in the bundle.
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        .build()
        .unwrap();
        for name in ["127.0.0.1", "kplug.example.svc"] {
            verifier
                .verify_server_cert(
                    &key.cert[0],
                    &[],
                    &rustls::pki_types::ServerName::try_from(name).unwrap(),
                    &[],
                    rustls::pki_types::UnixTime::now(),
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn files_are_read_as_a_tls_secret_mounts_them() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            Certificates::from_dir(dir.path())
                .unwrap_err()
                .contains("tls.crt")
        );
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a.example".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.path().join("tls.crt"), cert.pem()).unwrap();
        std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
        assert!(
            Certificates::from_dir(dir.path())
                .unwrap_err()
                .contains("tls.key")
        );
        std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();
        let c = Certificates::from_dir(dir.path()).unwrap();
        // Without ca.crt, the certificate is its own CA.
        assert_eq!(*c.ca_bundle().borrow(), cert.pem().into_bytes());
        std::fs::write(dir.path().join("ca.crt"), "CA").unwrap();
        assert_eq!(
            *Certificates::from_dir(dir.path())
                .unwrap()
                .ca_bundle()
                .borrow(),
            b"CA"
        );
    }
}
