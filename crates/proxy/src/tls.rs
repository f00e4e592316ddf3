//! TLS toward the clients: PEM certificates and keys read and checked at start, and the
//! server side of each client's handshake. The PEM loaders serve [`crate::upstream`] too.
//!
//! rustls with the `ring` provider; TLS 1.2 and 1.3.

use crate::config::Config;
use crate::socket::{self, Socket};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

/// How long a client gets to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS option that cannot be used, named by its flag.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file that cannot be read or holds nothing usable.
    #[error("{option} {}: {problem}", path.display())]
    File {
        option: &'static str,
        path: PathBuf,
        problem: String,
    },
    /// Options that do not go together.
    #[error("{0}")]
    Options(String),
    /// rustls refused the material (e.g. a key that does not match its certificate).
    #[error("{options}: {source}")]
    Rejected {
        options: &'static str,
        #[source]
        source: rustls::Error,
    },
}

/// The ring crypto provider every TLS configuration of the proxy uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn file_error(option: &'static str, path: &Path, problem: impl fmt::Display) -> TlsError {
    TlsError::File {
        option,
        path: path.to_owned(),
        problem: problem.to_string(),
    }
}

/// The PEM file's whole contents (so a missing file says so plainly).
fn read(option: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| file_error(option, path, format!("cannot read: {e}")))
}

/// Every `CERTIFICATE` in the PEM file `path` (given by `option`), in order; at least one.
pub fn load_certs(
    option: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(option, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(option, path, format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(file_error(option, path, "no PEM CERTIFICATE in the file"));
    }
    Ok(certs)
}

/// The first private key in the PEM file `path` (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(option: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(option, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => file_error(
            option,
            path,
            "no private key in the file (expected PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)",
        ),
        e => file_error(option, path, format!("not valid PEM: {e}")),
    })
}

/// The CA certificates of the PEM file `path` as a trust store.
pub fn load_roots(option: &'static str, path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for (i, cert) in load_certs(option, path)?.into_iter().enumerate() {
        roots.add(cert).map_err(|e| {
            file_error(
                option,
                path,
                format!("certificate {} is not a usable CA: {e}", i + 1),
            )
        })?;
    }
    Ok(roots)
}

/// The client-side TLS of the proxy (`--tls-cert`, `--tls-key`, `--tls-client-ca`).
#[derive(Clone)]
pub struct ClientTls {
    acceptor: TlsAcceptor,
    /// Client certificates are required and verified.
    pub mutual: bool,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("mutual", &self.mutual)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Reads and checks the configured files; `None` when clients speak plain TCP.
    pub fn from_config(cfg: &Config) -> Result<Option<ClientTls>, TlsError> {
        let (cert, key) = match (&cfg.tls_cert, &cfg.tls_key) {
            (None, None) => {
                if cfg.tls_client_ca.is_some() {
                    return Err(TlsError::Options(
                        "--tls-client-ca needs --tls-cert and --tls-key (client certificates are verified only over TLS)".into(),
                    ));
                }
                return Ok(None);
            }
            (Some(c), Some(k)) => (c, k),
            (Some(_), None) => {
                return Err(TlsError::Options(
                    "--tls-cert is set without --tls-key".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(TlsError::Options(
                    "--tls-key is set without --tls-cert".into(),
                ))
            }
        };
        let chain = load_certs("--tls-cert", cert)?;
        let key = load_key("--tls-key", key)?;
        let provider = provider();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|source| TlsError::Rejected {
                options: "TLS protocol versions",
                source,
            })?;
        let builder = match &cfg.tls_client_ca {
            Some(ca) => {
                let roots = load_roots("--tls-client-ca", ca)?;
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| file_error("--tls-client-ca", ca, e))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|source| TlsError::Rejected {
                options: "--tls-cert / --tls-key",
                source,
            })?;
        Ok(Some(ClientTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            mutual: cfg.tls_client_ca.is_some(),
        }))
    }

    /// Runs the server side of a client's handshake (at most [`HANDSHAKE_TIMEOUT`]).
    pub async fn accept(&self, sock: TcpStream) -> std::io::Result<Socket> {
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(sock)).await {
            Ok(Ok(tls)) => Ok(socket::tls(tls.into())),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no TLS handshake within {} s", HANDSHAKE_TIMEOUT.as_secs()),
            )),
        }
    }
}

/// The client's socket as the session uses it: the TLS handshake done when `tls` is set.
pub async fn accept(tls: Option<&ClientTls>, sock: TcpStream) -> std::io::Result<Socket> {
    match tls {
        Some(t) => t.accept(sock).await,
        None => Ok(socket::plain(sock)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, contents: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("autoprep-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, contents).unwrap();
        p
    }

    #[test]
    fn a_missing_file_is_named_with_its_option() {
        let e = load_certs("--tls-cert", Path::new("/nonexistent/cert.pem")).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("--tls-cert /nonexistent/cert.pem: cannot read"),
            "{msg}"
        );
    }

    #[test]
    fn a_file_without_certificates_is_refused() {
        let p = temp("empty.pem", b"just text\n");
        let msg = load_certs("--upstream-tls-ca", &p).unwrap_err().to_string();
        assert!(msg.contains("no PEM CERTIFICATE"), "{msg}");
        let msg = load_key("--tls-key", &p).unwrap_err().to_string();
        assert!(msg.contains("no private key"), "{msg}");
    }

    #[test]
    fn broken_pem_is_refused() {
        let p = temp(
            "broken.pem",
            b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        );
        let msg = load_certs("--tls-cert", &p).unwrap_err().to_string();
        assert!(msg.contains("not valid PEM"), "{msg}");
    }

    #[test]
    fn options_that_do_not_go_together() {
        let mut cfg = Config::for_upstream("127.0.0.1:9042");
        assert!(ClientTls::from_config(&cfg).unwrap().is_none());
        cfg.tls_client_ca = Some("ca.pem".into());
        let msg = ClientTls::from_config(&cfg).unwrap_err().to_string();
        assert!(msg.contains("--tls-client-ca needs --tls-cert"), "{msg}");
        cfg.tls_client_ca = None;
        cfg.tls_cert = Some("cert.pem".into());
        let msg = ClientTls::from_config(&cfg).unwrap_err().to_string();
        assert_eq!(msg, "--tls-cert is set without --tls-key");
    }
}
