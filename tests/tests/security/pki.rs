//! The certificates of the security tests, generated for each run (rcgen, ECDSA P-256) and
//! written as PEM files into one directory: a test CA that signs the node's, the proxy's and
//! the clients' certificates, and a rogue CA that signs nothing anybody trusts.

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// The DNS name in the node's certificate (besides its IP address).
pub const NODE_NAME: &str = "cassandra-secure.test";

/// The files, by role.
pub const CA: &str = "ca.pem";
pub const ROGUE_CA: &str = "rogue-ca.pem";
/// The node's key and certificate in one file (Cassandra's PEM keystore).
pub const NODE_KEYSTORE: &str = "node-keystore.pem";
/// The proxy toward its clients (localhost, 127.0.0.1).
pub const PROXY_CERT: &str = "proxy.pem";
pub const PROXY_KEY: &str = "proxy-key.pem";
/// The proxy's client certificate toward the node.
pub const PROXY_UPSTREAM_CERT: &str = "proxy-upstream.pem";
pub const PROXY_UPSTREAM_KEY: &str = "proxy-upstream-key.pem";
/// An application's client certificate (signed by the test CA).
pub const APP_CERT: &str = "app.pem";
pub const APP_KEY: &str = "app-key.pem";
/// A client certificate signed by the rogue CA.
pub const ROGUE_CERT: &str = "rogue.pem";
pub const ROGUE_KEY: &str = "rogue-key.pem";

const ALL: &[&str] = &[
    CA,
    ROGUE_CA,
    NODE_KEYSTORE,
    PROXY_CERT,
    PROXY_KEY,
    PROXY_UPSTREAM_CERT,
    PROXY_UPSTREAM_KEY,
    APP_CERT,
    APP_KEY,
    ROGUE_CERT,
    ROGUE_KEY,
];

/// A directory of PEM files written by [`Pki::generate`].
#[derive(Debug, Clone)]
pub struct Pki {
    pub dir: PathBuf,
}

struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn authority(name: &str) -> Result<Authority> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key)?;
    Ok(Authority { cert, key })
}

/// A leaf certificate for `names` (DNS names or IP addresses) signed by `ca`: (cert, key) PEM.
fn leaf(
    ca: &Authority,
    common_name: &str,
    names: &[&str],
    usages: Vec<ExtendedKeyUsagePurpose>,
) -> Result<(String, String)> {
    let key = KeyPair::generate()?;
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = usages;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = params.signed_by(&key, &ca.cert, &ca.key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

impl Pki {
    /// Generates every certificate into `dir` (replacing what is there); the node's
    /// certificate is valid for `node_ip` and [`NODE_NAME`].
    pub fn generate(dir: &Path, node_ip: &str) -> Result<Pki> {
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        let ca = authority("autoprep test CA")?;
        let rogue = authority("autoprep rogue CA")?;
        let write = |name: &str, pem: &str| -> Result<()> {
            let p = dir.join(name);
            std::fs::write(&p, pem).with_context(|| format!("write {}", p.display()))
        };
        write(CA, &ca.cert.pem())?;
        write(ROGUE_CA, &rogue.cert.pem())?;
        // The node's certificate is also a client certificate: scripts/cassandra.sh's probe
        // presents it when the node requires client certificates.
        let (cert, key) = leaf(
            &ca,
            "cassandra node",
            &[node_ip, NODE_NAME],
            vec![ServerAuth, ClientAuth],
        )?;
        write(NODE_KEYSTORE, &format!("{key}{cert}"))?;
        let (cert, key) = leaf(
            &ca,
            "autoprep",
            &["localhost", "127.0.0.1"],
            vec![ServerAuth],
        )?;
        write(PROXY_CERT, &cert)?;
        write(PROXY_KEY, &key)?;
        let (cert, key) = leaf(&ca, "autoprep upstream client", &[], vec![ClientAuth])?;
        write(PROXY_UPSTREAM_CERT, &cert)?;
        write(PROXY_UPSTREAM_KEY, &key)?;
        let (cert, key) = leaf(&ca, "application", &[], vec![ClientAuth])?;
        write(APP_CERT, &cert)?;
        write(APP_KEY, &key)?;
        let (cert, key) = leaf(&rogue, "rogue application", &[], vec![ClientAuth])?;
        write(ROGUE_CERT, &cert)?;
        write(ROGUE_KEY, &key)?;
        Ok(Pki {
            dir: dir.to_owned(),
        })
    }

    /// The PKI already in `dir`, if every file is there.
    pub fn existing(dir: &Path) -> Option<Pki> {
        ALL.iter().all(|f| dir.join(f).is_file()).then(|| Pki {
            dir: dir.to_owned(),
        })
    }

    /// The path of one of the files.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The contents of one of the files.
    pub fn pem(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name))
            .unwrap_or_else(|e| panic!("read {}: {e}", self.path(name).display()))
    }
}
