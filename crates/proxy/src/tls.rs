//! TLS toward the clients, and what both sides share: PEM certificates and keys read and
//! checked at start, the server side of each client's handshake, and the reloading of each
//! side's material when its files change (a Kubernetes Secret updated through a symlink swap,
//! cert-manager, SPIFFE) or on SIGHUP ([`Reloadable`]). The upstream side's configuration is
//! built in [`crate::upstream`].
//!
//! rustls with the `ring` provider; TLS 1.2 and 1.3.
//!
//! Design justification: each side's rustls configuration sits in an `ArcSwap`, loaded once per
//! new connection (no lock; an open connection keeps the configuration it was made with), and
//! replaced whole by a reload. A reload reads every file of the side once, builds from those
//! bytes, and swaps only if rustls accepts the result, so a half-written or broken file never
//! replaces working material. Whether the files changed is decided by a hash of their contents
//! rather than their modification times: a Secret's symlink swap changes the resolved path and
//! not necessarily the time, and the files are a few kilobytes read every few seconds.

use crate::config::Config;
use crate::socket::{self, Socket};
use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
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
    parse_certs(option, path, &read(option, path)?)
}

/// Every `CERTIFICATE` in `pem`, the contents of `path`; at least one.
fn parse_certs(
    option: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(option, path, format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(file_error(option, path, "no PEM CERTIFICATE in the file"));
    }
    Ok(certs)
}

/// The first private key in the PEM file `path` (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(option: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    parse_key(option, path, &read(option, path)?)
}

/// The first private key in `pem`, the contents of `path`.
fn parse_key(
    option: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
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
    parse_roots(option, path, &read(option, path)?)
}

/// The CA certificates in `pem`, the contents of `path`, as a trust store.
fn parse_roots(option: &'static str, path: &Path, pem: &[u8]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for (i, cert) in parse_certs(option, path, pem)?.into_iter().enumerate() {
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

/// The end of a certificate's validity (its notAfter), in seconds since the Unix epoch; `None`
/// when the certificate cannot be parsed (rustls accepted it, so it is used all the same).
pub fn not_after(cert: &CertificateDer<'_>) -> Option<u64> {
    use x509_cert::der::Decode;
    let cert = x509_cert::Certificate::from_der(cert.as_ref()).ok()?;
    Some(
        cert.tbs_certificate
            .validity
            .not_after
            .to_unix_duration()
            .as_secs(),
    )
}

/// Which side of the proxy a TLS configuration serves: a label of metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Toward the clients (`--tls-cert`).
    Client,
    /// Toward the upstream node (`--upstream-tls`).
    Upstream,
}

impl Side {
    /// The metric label value.
    pub fn as_label(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Upstream => "upstream",
        }
    }
}

/// The files of one side's TLS material as read for one (re)load: a build reads the bytes
/// from here, never the files again, so what was checked is what is used.
#[derive(Debug)]
pub struct Files {
    files: Vec<(&'static str, PathBuf, Vec<u8>)>,
}

impl Files {
    /// Reads every file of `list` (option, path).
    fn read(list: &[(&'static str, PathBuf)]) -> Result<Files, TlsError> {
        let files = list
            .iter()
            .map(|(option, path)| Ok((*option, path.clone(), read(option, path)?)))
            .collect::<Result<_, TlsError>>()?;
        Ok(Files { files })
    }

    /// The path and contents of the file given by `option`.
    fn get(&self, option: &'static str) -> Result<(&Path, &[u8]), TlsError> {
        self.files
            .iter()
            .find(|(o, _, _)| *o == option)
            .map(|(_, p, b)| (p.as_path(), b.as_slice()))
            .ok_or_else(|| TlsError::Options(format!("{option}: not read")))
    }

    /// Every certificate of the file given by `option`.
    pub fn certs(&self, option: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let (path, pem) = self.get(option)?;
        parse_certs(option, path, pem)
    }

    /// The private key of the file given by `option`.
    pub fn key(&self, option: &'static str) -> Result<PrivateKeyDer<'static>, TlsError> {
        let (path, pem) = self.get(option)?;
        parse_key(option, path, pem)
    }

    /// The CA certificates of the file given by `option`.
    pub fn roots(&self, option: &'static str) -> Result<RootCertStore, TlsError> {
        let (path, pem) = self.get(option)?;
        parse_roots(option, path, pem)
    }

    /// A hash of every path and its contents: equal when nothing changed.
    fn fingerprint(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (option, path, bytes) in &self.files {
            (option, path, bytes).hash(&mut h);
        }
        h.finish()
    }
}

/// How one side's rustls configuration is made from its files.
pub trait Recipe: Send + Sync + 'static {
    /// `rustls::ServerConfig` or `rustls::ClientConfig`.
    type Config: Send + Sync + 'static;
    /// The files it is made from, by option (`--tls-cert`, ...).
    fn files(&self) -> Vec<(&'static str, PathBuf)>;
    /// Builds the configuration from the files' contents; with it, the certificate the proxy
    /// presents (the first of its chain), if it presents one.
    fn build(&self, files: &Files) -> Result<Built<Self::Config>, TlsError>;
}

/// What a [`Recipe`] makes.
pub struct Built<C> {
    pub config: C,
    /// The certificate presented, for its expiry.
    pub presented: Option<CertificateDer<'static>>,
}

/// The material in use: the configuration new connections take, and its certificate's end.
struct Material<C> {
    config: Arc<C>,
    not_after: Option<u64>,
}

/// The outcome of a reload.
#[derive(Debug)]
pub enum Reloaded {
    /// The files are as they were last read: nothing done.
    Unchanged,
    /// New material is in use from the next connection on.
    Loaded { not_after: Option<u64> },
    /// The files changed but cannot be used: the previous material stays in use.
    Refused(TlsError),
}

/// One side's TLS material, replaced when its files change. Cheap to read (one `ArcSwap` load
/// per connection); reloads are serialized.
pub struct Reloadable<R: Recipe> {
    side: Side,
    recipe: R,
    current: ArcSwap<Material<R::Config>>,
    /// The fingerprint of the files (or of the error reading them) last tried, loaded or
    /// refused: a broken file is reported once, not at every poll.
    tried: Mutex<u64>,
}

impl<R: Recipe> fmt::Debug for Reloadable<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reloadable")
            .field("side", &self.side)
            .field("not_after", &self.not_after())
            .finish_non_exhaustive()
    }
}

impl<R: Recipe> Reloadable<R> {
    /// Reads the files and builds the first configuration; any problem is an error (at start,
    /// a configuration that cannot be used stops the proxy).
    pub fn load(side: Side, recipe: R) -> Result<Reloadable<R>, TlsError> {
        let files = Files::read(&recipe.files())?;
        let built = recipe.build(&files)?;
        let material = material(built);
        warn_if_expired(side, material.not_after);
        Ok(Reloadable {
            side,
            recipe,
            current: ArcSwap::from_pointee(material),
            tried: Mutex::new(files.fingerprint()),
        })
    }

    /// The configuration for a new connection.
    pub fn config(&self) -> Arc<R::Config> {
        self.current.load().config.clone()
    }
}

fn material<C>(built: Built<C>) -> Material<C> {
    Material {
        config: Arc::new(built.config),
        not_after: built.presented.as_ref().and_then(not_after),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn warn_if_expired(side: Side, not_after: Option<u64>) {
    if let Some(end) = not_after {
        if end <= unix_now() {
            tracing::warn!(
                side = side.as_label(),
                not_after = end,
                "the TLS certificate in use has expired"
            );
        }
    }
}

/// One side's reloadable TLS material, whatever its configuration type: what the reloader
/// and the metrics see.
pub trait Reload: Send + Sync + fmt::Debug {
    /// Which side it serves.
    fn side(&self) -> Side;
    /// Reads the files again and, if they changed since they were last tried (or `force`),
    /// builds new material and puts it in use. Blocks on file reads: call it off the data
    /// path's threads.
    fn reload(&self, force: bool) -> Reloaded;
    /// The end of validity of the certificate in use (seconds since the Unix epoch), if the
    /// proxy presents one on this side.
    fn not_after(&self) -> Option<u64>;
}

impl<R: Recipe> Reload for Reloadable<R> {
    fn side(&self) -> Side {
        self.side
    }

    fn reload(&self, force: bool) -> Reloaded {
        let mut tried = self.tried.lock().unwrap_or_else(|p| p.into_inner());
        let read = Files::read(&self.recipe.files());
        let fingerprint = match &read {
            Ok(files) => files.fingerprint(),
            Err(e) => {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                e.to_string().hash(&mut h);
                h.finish()
            }
        };
        if !force && fingerprint == *tried {
            return Reloaded::Unchanged;
        }
        *tried = fingerprint;
        match read.and_then(|files| self.recipe.build(&files)) {
            Ok(built) => {
                let material = material(built);
                let not_after = material.not_after;
                warn_if_expired(self.side, not_after);
                self.current.store(Arc::new(material));
                Reloaded::Loaded { not_after }
            }
            Err(e) => Reloaded::Refused(e),
        }
    }

    fn not_after(&self) -> Option<u64> {
        self.current.load().not_after
    }
}

/// The client-side TLS files (`--tls-cert`, `--tls-key`, `--tls-client-ca`).
struct ClientRecipe {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

impl Recipe for ClientRecipe {
    type Config = ServerConfig;

    fn files(&self) -> Vec<(&'static str, PathBuf)> {
        let mut v = vec![
            ("--tls-cert", self.cert.clone()),
            ("--tls-key", self.key.clone()),
        ];
        if let Some(ca) = &self.client_ca {
            v.push(("--tls-client-ca", ca.clone()));
        }
        v
    }

    fn build(&self, files: &Files) -> Result<Built<ServerConfig>, TlsError> {
        let chain = files.certs("--tls-cert")?;
        let key = files.key("--tls-key")?;
        let provider = provider();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|source| TlsError::Rejected {
                options: "TLS protocol versions",
                source,
            })?;
        let builder = match &self.client_ca {
            Some(ca) => {
                let roots = files.roots("--tls-client-ca")?;
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| file_error("--tls-client-ca", ca, e))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let presented = chain.first().cloned();
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|source| TlsError::Rejected {
                options: "--tls-cert / --tls-key",
                source,
            })?;
        Ok(Built { config, presented })
    }
}

/// The client-side TLS of the proxy (`--tls-cert`, `--tls-key`, `--tls-client-ca`). Clones
/// share the material, and see a reload.
#[derive(Clone)]
pub struct ClientTls {
    material: Arc<Reloadable<ClientRecipe>>,
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
        let recipe = ClientRecipe {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: cfg.tls_client_ca.clone(),
        };
        Ok(Some(ClientTls {
            material: Arc::new(Reloadable::load(Side::Client, recipe)?),
            mutual: cfg.tls_client_ca.is_some(),
        }))
    }

    /// The material, for the reloader and the metrics.
    pub fn reloadable(&self) -> Arc<dyn Reload> {
        self.material.clone()
    }

    /// Runs the server side of a client's handshake (at most [`HANDSHAKE_TIMEOUT`]) with the
    /// material in use now.
    pub async fn accept(&self, sock: TcpStream) -> std::io::Result<Socket> {
        let acceptor = TlsAcceptor::from(self.material.config());
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(sock)).await {
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

    /// A self-signed certificate for localhost valid until 1 January of `year`: (cert, key) PEM.
    fn self_signed(year: i32) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(year, 1, 1);
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// 1 January of `year`, 00:00 UTC, in seconds since the Unix epoch.
    fn new_year(year: i32) -> u64 {
        let days = (1970..year)
            .map(|y| {
                if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) {
                    366
                } else {
                    365
                }
            })
            .sum::<u64>();
        days * 86_400
    }

    #[test]
    fn the_end_of_validity_is_read() {
        let (cert, _) = self_signed(2031);
        let der = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
        assert_eq!(not_after(&der), Some(new_year(2031)));
        assert_eq!(not_after(&CertificateDer::from(vec![1, 2, 3])), None);
    }

    #[test]
    fn changed_files_are_reloaded_and_broken_ones_refused_once() {
        let (cert, key) = self_signed(2031);
        let cert_path = temp("reload-cert.pem", cert.as_bytes());
        let key_path = temp("reload-key.pem", key.as_bytes());
        let mut cfg = Config::for_upstream("127.0.0.1:9042");
        cfg.tls_cert = Some(cert_path.clone());
        cfg.tls_key = Some(key_path.clone());
        let tls = ClientTls::from_config(&cfg).unwrap().unwrap();
        let material = tls.reloadable();
        assert_eq!(material.side(), Side::Client);
        assert_eq!(material.not_after(), Some(new_year(2031)));
        let first = tls.material.config();
        assert!(matches!(material.reload(false), Reloaded::Unchanged));

        // A new certificate and key: in use from the next connection on.
        let (cert, key) = self_signed(2032);
        std::fs::write(&cert_path, &cert).unwrap();
        std::fs::write(&key_path, &key).unwrap();
        assert!(matches!(
            material.reload(false),
            Reloaded::Loaded { not_after: Some(t) } if t == new_year(2032)
        ));
        assert!(!Arc::ptr_eq(&first, &tls.material.config()));
        assert_eq!(material.not_after(), Some(new_year(2032)));

        // A key that does not match the certificate: refused, once; the old material stays.
        let (_, other_key) = self_signed(2033);
        std::fs::write(&key_path, &other_key).unwrap();
        let Reloaded::Refused(e) = material.reload(false) else {
            panic!("a mismatched key is refused");
        };
        assert!(e.to_string().contains("--tls-cert / --tls-key"), "{e}");
        assert!(matches!(material.reload(false), Reloaded::Unchanged));
        assert_eq!(material.not_after(), Some(new_year(2032)));
        // SIGHUP tries again even so.
        assert!(matches!(material.reload(true), Reloaded::Refused(_)));

        // A missing file is a refusal too, reported once.
        std::fs::remove_file(&key_path).unwrap();
        assert!(matches!(material.reload(false), Reloaded::Refused(_)));
        assert!(matches!(material.reload(false), Reloaded::Unchanged));
        std::fs::write(&key_path, &key).unwrap();
        assert!(matches!(material.reload(false), Reloaded::Loaded { .. }));
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
