//! What changes without a restart, run for real: the `autoprep` binary in front of the real
//! server. A client certificate replaced through a Kubernetes-style symlink swap is served to
//! new TLS clients while an open connection carries on; a broken replacement is reported and
//! the previous certificate kept; the log filter is changed and reverts through the admin
//! port; SIGHUP applies a changed admission threshold and names an option that needs a
//! restart.
//!
//! No timing is asserted: every wait is for a condition, with a generous bound that only turns
//! a hang into a failure. How long a rotation took to be served is printed (`--nocapture`).

#![cfg(unix)]

use autoprep_protocol::envelope::ProtocolVersion;
use autoprep_tests::{upstream, Client, TlsClient};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod support;
use support::Proxy;

/// Bound on any wait for a condition (a hang becomes a failure, not a timed assertion).
const PATIENCE: Duration = Duration::from_secs(60);

impl Proxy {
    /// An admin request: (status code, body).
    fn http(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(self.admin).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let status = raw.split(' ').nth(1).unwrap().parse().unwrap();
        let body = raw.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
        (status, body)
    }

    /// The value of one series of `/metrics` (name and labels as written), if present.
    fn metric(&self, series: &str) -> Option<String> {
        let (status, text) = self.http("GET", "/metrics", "");
        assert_eq!(status, 200);
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .map(str::to_owned)
    }

    /// Log lines containing `needle`.
    fn logged(&self, needle: &str) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log.iter().filter(|l| l.contains(needle)).cloned().collect()
    }

    /// Log lines containing `needle`, once there is at least one. The log is read from the
    /// child's output by a thread of the test, so a line written before an answer or a metric
    /// may still be on its way when that answer arrives.
    fn logged_eventually(&self, needle: &str) -> Vec<String> {
        wait_for(&format!("a log line with {needle:?}"), || {
            !self.logged(needle).is_empty()
        });
        self.logged(needle)
    }
}

/// Waits until `cond` holds; returns how long that took.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

/// A fresh directory of its own under the system's temporary directory.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("autoprep-reload-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A CA of the test's own.
struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Authority {
    fn new(name: &str) -> Authority {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        Authority { cert, key }
    }

    fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A server certificate for 127.0.0.1 and localhost valid until 1 January of `year`:
    /// (cert, key) PEM.
    fn leaf(&self, year: i32) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "autoprep");
        params.not_after = rcgen::date_time_ymd(year, 1, 1);
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A directory laid out as the kubelet lays out a mounted Secret: `tls.crt` and `tls.key` are
/// symlinks to `..data/tls.crt` and `..data/tls.key`, `..data` is a symlink to a timestamped
/// directory, and an update writes a new directory and renames a new `..data` link over the
/// old one (one atomic swap for both files).
struct SecretVolume {
    dir: PathBuf,
    version: u32,
}

impl SecretVolume {
    fn new(name: &str, cert: &str, key: &str) -> SecretVolume {
        let dir = temp_dir(name);
        let mut v = SecretVolume { dir, version: 0 };
        v.update(cert, key);
        for f in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(Path::new("..data").join(f), v.dir.join(f)).unwrap();
        }
        v
    }

    /// Writes a new version and swaps `..data` to it.
    fn update(&mut self, cert: &str, key: &str) {
        self.version += 1;
        let name = format!(
            "..2026_01_01_00_00_{:02}.{}",
            self.version,
            std::process::id()
        );
        let data = self.dir.join(&name);
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("tls.crt"), cert).unwrap();
        std::fs::write(data.join("tls.key"), key).unwrap();
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&name, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
    }

    fn cert(&self) -> String {
        self.dir.join("tls.crt").to_str().unwrap().to_owned()
    }

    fn key(&self) -> String {
        self.dir.join("tls.key").to_str().unwrap().to_owned()
    }
}

/// A CQL connection over TLS trusting only `ca_pem`, ready for queries.
fn tls_client(addr: &str, ca_pem: &str) -> anyhow::Result<Client> {
    let tls = TlsClient::new(ca_pem, None, "localhost")?;
    let mut c = Client::connect_raw_tls(addr, ProtocolVersion::V4, &tls)?;
    let ready = c.startup(None, &[])?;
    anyhow::ensure!(
        ready.header().opcode == autoprep_protocol::envelope::Opcode::READY,
        "STARTUP answered with {:?}",
        ready.header().opcode
    );
    Ok(c)
}

/// The connection answers a query through the proxy.
fn works(c: &mut Client) -> bool {
    c.query("SELECT release_version FROM system.local")
        .and_then(|r| r.rows())
        .is_ok_and(|rows| rows.rows.len() == 1)
}

/// 1 January of `year`, 00:00 UTC, in seconds since the Unix epoch, as `/metrics` writes it.
fn new_year(year: i32) -> String {
    let days: u64 = (1970..year)
        .map(|y| {
            if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) {
                366
            } else {
                365
            }
        })
        .sum();
    (days * 86_400).to_string()
}

/// The keyspace of the SIGHUP test's statements.
const KEYSPACE: &str = "lifecycle_reload";

const EXPIRY: &str = "autoprep_tls_certificate_expiry_seconds{side=\"client\"}";
const RELOADS_OK: &str = "autoprep_tls_reloads_total{result=\"ok\"}";
const RELOADS_ERROR: &str = "autoprep_tls_reloads_total{result=\"error\"}";

#[test]
fn a_rotated_certificate_is_served_to_new_clients_while_open_ones_carry_on() {
    let (old_ca, new_ca) = (Authority::new("old CA"), Authority::new("new CA"));
    let (cert, key) = old_ca.leaf(2031);
    let mut secret = SecretVolume::new("rotation", &cert, &key);
    let p = Proxy::start(&[
        "--tls-cert",
        &secret.cert(),
        "--tls-key",
        &secret.key(),
        "--tls-reload-interval-seconds",
        "1",
    ]);
    let mut open = tls_client(&p.addr, &old_ca.pem()).unwrap();
    assert!(works(&mut open));
    assert_eq!(p.metric(EXPIRY), Some(new_year(2031)));
    assert!(
        tls_client(&p.addr, &new_ca.pem()).is_err(),
        "a client trusting only the new CA is refused before the rotation"
    );

    // The Secret is updated: a certificate from another CA, another key.
    let (cert, key) = new_ca.leaf(2032);
    secret.update(&cert, &key);
    let took = wait_for("the new certificate to be served", || {
        tls_client(&p.addr, &new_ca.pem()).is_ok_and(|mut c| works(&mut c))
    });
    println!("rotated certificate served to new clients after {took:?} (check every 1 s)");
    assert!(
        tls_client(&p.addr, &old_ca.pem()).is_err(),
        "new clients get the new certificate only"
    );
    // The connection opened before the rotation carries on with its session.
    assert!(works(&mut open));
    assert!(works(&mut open));
    assert_eq!(p.metric(EXPIRY), Some(new_year(2032)));
    assert_eq!(p.metric(RELOADS_OK).as_deref(), Some("1"));
    assert_eq!(p.metric(RELOADS_ERROR).as_deref(), Some("0"));
    let reloaded = p.logged_eventually("TLS certificate reloaded");
    assert_eq!(reloaded.len(), 1, "{}", p.log_text());
    assert!(reloaded[0].contains("side=\"client\"") || reloaded[0].contains("side=client"));
}

#[test]
fn a_broken_replacement_is_reported_and_the_old_certificate_kept() {
    let ca = Authority::new("test CA");
    let (cert, key) = ca.leaf(2031);
    let mut secret = SecretVolume::new("broken", &cert, &key);
    let p = Proxy::start(&[
        "--tls-cert",
        &secret.cert(),
        "--tls-key",
        &secret.key(),
        "--tls-reload-interval-seconds",
        "1",
    ]);
    let mut open = tls_client(&p.addr, &ca.pem()).unwrap();
    assert!(works(&mut open));

    // A new certificate with the key of another one: rustls refuses the pair.
    let (new_cert, _) = ca.leaf(2032);
    let (_, other_key) = ca.leaf(2033);
    secret.update(&new_cert, &other_key);
    wait_for("the broken replacement to be reported", || {
        p.metric(RELOADS_ERROR).as_deref() == Some("1")
    });
    let warned = p.logged_eventually("cannot be used");
    assert_eq!(warned.len(), 1, "{}", p.log_text());
    assert!(warned[0].contains("WARN"), "{}", warned[0]);
    assert!(
        warned[0].contains("--tls-cert / --tls-key"),
        "{}",
        warned[0]
    );

    // The previous certificate is still served, to old and new connections alike.
    assert!(works(&mut open));
    let mut new = tls_client(&p.addr, &ca.pem()).unwrap();
    assert!(works(&mut new));
    assert_eq!(p.metric(EXPIRY), Some(new_year(2031)));
    // Reported once, not at every check.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(p.metric(RELOADS_ERROR).as_deref(), Some("1"));

    // Garbage instead of a certificate: the same.
    secret.update("not a certificate\n", &key);
    wait_for("the garbage to be reported", || {
        p.metric(RELOADS_ERROR).as_deref() == Some("2")
    });
    p.logged_eventually("no PEM CERTIFICATE");
    assert!(works(&mut new));

    // A good pair again: in use.
    let (good_cert, good_key) = ca.leaf(2035);
    secret.update(&good_cert, &good_key);
    wait_for("the good replacement to be used", || {
        p.metric(EXPIRY) == Some(new_year(2035))
    });
    assert!(works(&mut tls_client(&p.addr, &ca.pem()).unwrap()));
}

#[test]
fn the_log_filter_is_changed_and_reverted_through_the_admin_port() {
    let p = Proxy::start(&["--log", "info"]);
    let (status, body) = p.http("GET", "/log", "");
    assert_eq!(status, 200);
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(st["current"], "info");
    assert_eq!(st["configured"], "info");
    assert!(st["reverts_in_seconds"].is_null());

    // At info, a new connection logs nothing at debug.
    assert!(works(&mut Client::connect(&p.addr).unwrap()));
    assert!(p.logged("connected upstream").is_empty());

    // A filter that does not parse changes nothing.
    let (status, body) = p.http("PUT", "/log", "autoprep=loud");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not a log filter"), "{body}");

    // Debug for autoprep, for 3 seconds.
    let (status, body) = p.http("PUT", "/log?for=3", "info,autoprep=debug");
    assert_eq!(status, 200, "{body}");
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(st["current"], "info,autoprep=debug");
    assert_eq!(st["configured"], "info");
    assert!(st["reverts_in_seconds"].as_u64().is_some_and(|s| s <= 3));
    p.logged_eventually("log filter changed through the admin server");
    assert!(works(&mut Client::connect(&p.addr).unwrap()));
    wait_for("a debug line", || {
        !p.logged("connected upstream").is_empty()
    });

    // It reverts by itself.
    wait_for("the filter to revert", || {
        let (_, body) = p.http("GET", "/log", "");
        body.contains("\"current\":\"info\"")
    });
    p.logged_eventually("log filter back to the configured one");
    let before = p.logged("connected upstream").len();
    assert!(works(&mut Client::connect(&p.addr).unwrap()));
    // The connection's own log lines are written before its first answer: nothing new.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(p.logged("connected upstream").len(), before);

    // Without a time limit it stays until DELETE.
    let (status, _) = p.http("PUT", "/log", "debug");
    assert_eq!(status, 200);
    let (_, body) = p.http("GET", "/log", "");
    assert!(body.contains("\"current\":\"debug\""), "{body}");
    let (status, body) = p.http("DELETE", "/log", "");
    assert_eq!(status, 200);
    assert!(body.contains("\"current\":\"info\""), "{body}");
}

#[test]
fn sighup_applies_a_changed_admission_threshold_and_names_an_option_that_needs_a_restart() {
    let dir = temp_dir("sighup");
    let file = dir.join("autoprep.toml");
    std::fs::write(&file, "admission_threshold = 1000\ncache_entries = 500\n").unwrap();
    let mut direct = Client::connect(&upstream()).unwrap();
    for q in [
        &format!("CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
        &format!("CREATE TABLE IF NOT EXISTS {KEYSPACE}.kv (k int PRIMARY KEY, v text)"),
    ] {
        direct.query(q).unwrap().ok().unwrap();
    }
    let p = Proxy::start(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(&p.addr).unwrap();
    let statement = |i: u32| format!("SELECT v FROM {KEYSPACE}.kv WHERE k = {i}");
    // Below the threshold: never prepared.
    for i in 0..3 {
        c.query(&statement(i)).unwrap().rows().unwrap();
    }
    const PREPARED: &str = "autoprep_prepares_total{result=\"ok\"}";
    assert_eq!(p.metric(PREPARED).as_deref(), Some("0"));

    std::fs::write(&file, "admission_threshold = 2\ncache_entries = 600\n").unwrap();
    p.signal("HUP");
    let applied = p.logged_eventually("configuration reloaded");
    assert!(
        applied[0].contains("admission_threshold: 1000 -> 2"),
        "{}",
        applied[0]
    );
    let restart = p.logged_eventually("need a restart");
    assert_eq!(restart.len(), 1, "{}", p.log_text());
    assert!(restart[0].contains("WARN"), "{}", restart[0]);
    assert!(
        restart[0].contains("cache_entries (in use: 500, configured: 600)"),
        "{}",
        restart[0]
    );

    // The shape was seen three times already: the next sighting prepares it, and the one
    // after runs as an EXECUTE.
    for i in 3..5 {
        c.query(&statement(i)).unwrap().rows().unwrap();
    }
    wait_for("the shape to be prepared", || {
        p.metric(PREPARED).as_deref() == Some("1")
    });
    wait_for("a rewritten query", || {
        c.query(&statement(5)).unwrap().rows().unwrap();
        p.metric("autoprep_queries_total{outcome=\"rewritten\",reason=\"\"}")
            .is_some_and(|n| n != "0")
    });

    // The process is still serving (SIGHUP did not terminate it), and a configuration with a
    // problem changes nothing.
    std::fs::write(&file, "admission_threshold = 0\n").unwrap();
    p.signal("HUP");
    assert!(
        p.logged_eventually("configuration not reloaded")[0]
            .contains("admission_threshold: must be at least 1"),
        "{}",
        p.log_text()
    );
    assert!(works(&mut Client::connect(&p.addr).unwrap()));
    let _ = std::fs::remove_dir_all(dir);
}
