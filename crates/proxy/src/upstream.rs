//! The connection toward the upstream node: TCP, then the TLS handshake when `--upstream-tls`
//! is on (CA, client certificate and server name read and checked at start; the CA and the
//! client certificate reloaded when their files change, see [`tls::Reloadable`]).

use crate::config::Config;
use crate::contact_points::{self, ContactPoints, Picked};
use crate::socket::{self, Socket};
use crate::tls::{self, TlsError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Why the proxy could not open a connection to the upstream node.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("upstream {addr} refused the connection: {source}")]
    Refused {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("upstream {addr}: no connection within {ms} ms")]
    TimedOut { addr: String, ms: u64 },
    /// The TLS handshake failed: the node's certificate is not trusted or not valid for the
    /// server name, the node refused the proxy's certificate, or the node does not speak TLS.
    #[error("TLS handshake with upstream {addr} failed: {source}")]
    Handshake {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("upstream {addr}: {reason}")]
    ServerName { addr: String, reason: String },
}

/// TLS toward the upstream node (`--upstream-tls` and the options that go with it). Clones
/// share the material, and see a reload.
#[derive(Clone)]
pub struct UpstreamTls {
    connector: Connector,
    /// `--upstream-tls-server-name`; unset, the host of the address connected to.
    server_name: Option<ServerName<'static>>,
}

impl fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// A `TlsConnector` made for each connection from the material in use then (see
/// [`tls::Reloadable`]).
#[derive(Clone)]
struct Connector(Arc<tls::Reloadable<UpstreamRecipe>>);

impl Connector {
    fn connect(
        &self,
        name: ServerName<'static>,
        sock: TcpStream,
    ) -> tokio_rustls::Connect<TcpStream> {
        TlsConnector::from(self.0.config()).connect(name, sock)
    }
}

/// The upstream TLS files (`--upstream-tls-ca`, `--upstream-tls-cert`, `--upstream-tls-key`),
/// the options checked already.
struct UpstreamRecipe {
    /// `None`: the system's roots.
    ca: Option<PathBuf>,
    /// Certificate and key presented to the node.
    identity: Option<(PathBuf, PathBuf)>,
    insecure_skip_verify: bool,
}

impl tls::Recipe for UpstreamRecipe {
    type Config = ClientConfig;

    fn files(&self) -> Vec<(&'static str, PathBuf)> {
        let mut v = Vec::new();
        if let Some(ca) = &self.ca {
            v.push(("--upstream-tls-ca", ca.clone()));
        }
        if let Some((cert, key)) = &self.identity {
            v.push(("--upstream-tls-cert", cert.clone()));
            v.push(("--upstream-tls-key", key.clone()));
        }
        v
    }

    fn build(&self, files: &tls::Files) -> Result<tls::Built<ClientConfig>, TlsError> {
        let provider = tls::provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|source| TlsError::Rejected {
                options: "TLS protocol versions",
                source,
            })?;
        let builder = if self.insecure_skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
        } else {
            let roots = match &self.ca {
                Some(_) => files.roots("--upstream-tls-ca")?,
                None => system_roots()?,
            };
            builder.with_root_certificates(roots)
        };
        let (config, presented) = match &self.identity {
            Some(_) => {
                let chain = files.certs("--upstream-tls-cert")?;
                let key = files.key("--upstream-tls-key")?;
                let presented = chain.first().cloned();
                let config = builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|source| TlsError::Rejected {
                        options: "--upstream-tls-cert / --upstream-tls-key",
                        source,
                    })?;
                (config, presented)
            }
            None => (builder.with_no_client_auth(), None),
        };
        Ok(tls::Built { config, presented })
    }
}

impl UpstreamTls {
    /// Reads and checks the configured files; `None` when the upstream speaks plain TCP.
    pub fn from_config(cfg: &Config) -> Result<Option<UpstreamTls>, TlsError> {
        if !cfg.upstream_tls {
            let set: Vec<&str> = [
                ("--upstream-tls-ca", cfg.upstream_tls_ca.is_some()),
                ("--upstream-tls-cert", cfg.upstream_tls_cert.is_some()),
                ("--upstream-tls-key", cfg.upstream_tls_key.is_some()),
                (
                    "--upstream-tls-server-name",
                    cfg.upstream_tls_server_name.is_some(),
                ),
                (
                    "--upstream-tls-insecure-skip-verify",
                    cfg.upstream_tls_insecure_skip_verify,
                ),
            ]
            .into_iter()
            .filter_map(|(name, on)| on.then_some(name))
            .collect();
            if !set.is_empty() {
                return Err(TlsError::Options(format!(
                    "{} set but --upstream-tls is off",
                    set.join(", ")
                )));
            }
            return Ok(None);
        }
        if cfg.upstream_tls_insecure_skip_verify && cfg.upstream_tls_ca.is_some() {
            return Err(TlsError::Options(
                "--upstream-tls-ca and --upstream-tls-insecure-skip-verify contradict each other"
                    .into(),
            ));
        }
        let identity = match (&cfg.upstream_tls_cert, &cfg.upstream_tls_key) {
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            (None, None) => None,
            (Some(_), None) => {
                return Err(TlsError::Options(
                    "--upstream-tls-cert is set without --upstream-tls-key".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(TlsError::Options(
                    "--upstream-tls-key is set without --upstream-tls-cert".into(),
                ))
            }
        };
        let recipe = UpstreamRecipe {
            ca: cfg.upstream_tls_ca.clone(),
            identity,
            insecure_skip_verify: cfg.upstream_tls_insecure_skip_verify,
        };
        let material = tls::Reloadable::load(tls::Side::Upstream, recipe)?;
        let server_name = match &cfg.upstream_tls_server_name {
            Some(n) => Some(ServerName::try_from(n.clone()).map_err(|e| {
                TlsError::Options(format!("--upstream-tls-server-name {n:?}: {e}"))
            })?),
            None => {
                // Checked now so that a bad --upstream fails at start, not per connection.
                for addr in crate::config::options::split_list(&cfg.upstream) {
                    server_name_of(&addr).map_err(|reason| {
                        TlsError::Options(format!(
                            "--upstream {addr}: {reason}; set --upstream-tls-server-name"
                        ))
                    })?;
                }
                None
            }
        };
        Ok(Some(UpstreamTls {
            connector: Connector(Arc::new(material)),
            server_name,
        }))
    }

    /// The material, for the reloader and the metrics.
    pub fn reloadable(&self) -> Arc<dyn tls::Reload> {
        self.connector.0.clone()
    }

    /// The name the certificate of the node at `addr` must be valid for.
    fn server_name_for(&self, addr: &str) -> Result<ServerName<'static>, String> {
        match &self.server_name {
            Some(n) => Ok(n.clone()),
            None => server_name_of(addr),
        }
    }
}

/// The host part of `host:port` (`[v6]:port` too) as a TLS server name.
fn server_name_of(addr: &str) -> Result<ServerName<'static>, String> {
    let host = match addr.rsplit_once(':') {
        Some((h, port)) if port.parse::<u16>().is_ok() => h,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .map_err(|e| format!("{host:?} is not a TLS server name: {e}"))
}

fn system_roots() -> Result<RootCertStore, TlsError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let errors: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
        return Err(TlsError::Options(format!(
            "--upstream-tls without --upstream-tls-ca: no CA certificates found on this system{}",
            if errors.is_empty() {
                String::new()
            } else {
                format!(" ({})", errors.join("; "))
            }
        )));
    }
    Ok(roots)
}

/// Opens a connection to an upstream node for a new client connection: the contact points
/// in the order `homing` gives (see [`crate::contact_points`]).
/// Each attempt has `timeout`; a failed one is counted in `failures`.
pub async fn connect(
    points: &ContactPoints,
    homing: &contact_points::Homing<'_>,
    tls: Option<&UpstreamTls>,
    timeout: Duration,
    failures: &AtomicU64,
) -> Result<(Socket, Picked), contact_points::ConnectError> {
    points
        .connect(failures, homing, |addr| async move {
            connect_to(&addr, tls, timeout).await
        })
        .await
}

/// Connects to `addr` and, with `tls`, runs the TLS handshake; both within `timeout`.
pub async fn connect_to(
    addr: &str,
    tls: Option<&UpstreamTls>,
    timeout: Duration,
) -> Result<Socket, ConnectError> {
    let attempt =
        async {
            let sock = TcpStream::connect(addr)
                .await
                .map_err(|source| ConnectError::Refused {
                    addr: addr.to_owned(),
                    source,
                })?;
            let _ = sock.set_nodelay(true);
            let Some(tls) = tls else {
                return Ok(socket::plain(sock));
            };
            let name = tls
                .server_name_for(addr)
                .map_err(|reason| ConnectError::ServerName {
                    addr: addr.to_owned(),
                    reason,
                })?;
            let stream = tls.connector.connect(name, sock).await.map_err(|source| {
                ConnectError::Handshake {
                    addr: addr.to_owned(),
                    source,
                }
            })?;
            Ok(socket::tls(stream.into()))
        };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(ConnectError::TimedOut {
            addr: addr.to_owned(),
            ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }),
    }
}

/// `--upstream-tls-insecure-skip-verify`: any certificate is accepted; the handshake
/// signatures are still checked (the connection is encrypted, but to anyone).
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_from_addresses() {
        assert_eq!(
            server_name_of("db.example:9042").unwrap(),
            ServerName::try_from("db.example").unwrap()
        );
        assert!(matches!(
            server_name_of("127.0.0.1:9042").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name_of("[::1]:9042").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(server_name_of("bad name!:9042").is_err());
    }

    #[test]
    fn tls_options_without_upstream_tls_are_refused() {
        let mut cfg = Config::for_upstream("127.0.0.1:9042");
        assert!(UpstreamTls::from_config(&cfg).unwrap().is_none());
        cfg.upstream_tls_ca = Some("ca.pem".into());
        cfg.upstream_tls_server_name = Some("db".into());
        let msg = UpstreamTls::from_config(&cfg).unwrap_err().to_string();
        assert_eq!(
            msg,
            "--upstream-tls-ca, --upstream-tls-server-name set but --upstream-tls is off"
        );
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let mut cfg = Config::for_upstream("127.0.0.1:9042");
        cfg.upstream_tls = true;
        cfg.upstream_tls_ca = Some("/nonexistent/ca.pem".into());
        let msg = UpstreamTls::from_config(&cfg).unwrap_err().to_string();
        assert!(
            msg.starts_with("--upstream-tls-ca /nonexistent/ca.pem: cannot read"),
            "{msg}"
        );
    }

    #[test]
    fn the_client_certificate_and_the_ca_are_reloaded() {
        let dir =
            std::env::temp_dir().join(format!("autoprep-upstream-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, year: i32| {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(vec!["node".to_owned()]).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params.not_after = rcgen::date_time_ymd(year, 1, 1);
            let cert = params.self_signed(&key).unwrap();
            std::fs::write(dir.join(format!("{name}.crt")), cert.pem()).unwrap();
            std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
        };
        write("ca", 2040);
        write("client", 2031);
        let mut cfg = Config::for_upstream("127.0.0.1:9042");
        cfg.upstream_tls = true;
        cfg.upstream_tls_ca = Some(dir.join("ca.crt"));
        cfg.upstream_tls_cert = Some(dir.join("client.crt"));
        cfg.upstream_tls_key = Some(dir.join("client.key"));
        let tls = UpstreamTls::from_config(&cfg).unwrap().unwrap();
        let material = tls.reloadable();
        assert_eq!(material.side(), tls::Side::Upstream);
        let before = material.not_after().unwrap();
        assert!(matches!(material.reload(false), tls::Reloaded::Unchanged));
        write("client", 2032);
        assert!(matches!(
            material.reload(false),
            tls::Reloaded::Loaded { .. }
        ));
        assert!(material.not_after().unwrap() > before);
        // A CA file that is not a certificate: refused, the material in use stays.
        std::fs::write(dir.join("ca.crt"), "not PEM").unwrap();
        let tls::Reloaded::Refused(e) = material.reload(false) else {
            panic!("a broken CA is refused");
        };
        assert!(e.to_string().starts_with("--upstream-tls-ca"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_address() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let e = connect_to(&addr, None, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(matches!(e, ConnectError::Refused { .. }), "{e}");
        assert!(e.to_string().contains(&addr));
    }
}
