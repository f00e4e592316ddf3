//! TLS on both sides of autoprep and password authentication through it, against a real
//! Cassandra 5.0 with PasswordAuthenticator and required client encryption with client
//! certificates (the certificates generated for the run, see [`pki`]), and through the Python
//! driver with PlainTextAuthProvider over TLS.
//!
//! Its own harness (libtest-mimic) so that the node it starts ([`node`]) is stopped after the
//! last test; `cargo test -p autoprep-tests --test security [FILTER]` runs it alone.

mod logs;
mod node;
mod pki;

use anyhow::{anyhow, bail, ensure, Context, Result};
use autoprep::config::Config;
use autoprep::context::Context as ProxyContext;
use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::{Opcode, ProtocolVersion};
use autoprep_tests::{proxy_ctx, upstream, Client, Response, TlsClient};
use libtest_mimic::{Arguments, Failed, Trial};
use node::{node, PASSWORD, USER};
use pki::Pki;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

fn main() {
    logs::install();
    let args = Arguments::from_args();
    let skip_node = node::listen().is_none();
    let mut trials = vec![
        trial("startup_refuses_unusable_tls_files", false, unusable_files),
        trial(
            "client_tls_in_front_of_a_plain_upstream",
            false,
            client_tls_plain_upstream,
        ),
    ];
    for (name, f) in [
        (
            "upstream_tls_verifies_the_nodes_certificate",
            upstream_tls as fn() -> Result<()>,
        ),
        ("mutual_tls_on_both_sides", mutual_tls_both_sides),
        (
            "bad_client_certificates_are_refused_others_carry_on",
            bad_client_certificates,
        ),
        (
            "password_authentication_passes_through",
            password_authentication,
        ),
        ("wrong_password_gets_the_servers_own_error", wrong_password),
        ("python_driver_with_password_and_tls", python_driver),
    ] {
        trials.push(trial(name, skip_node, f));
    }
    let conclusion = libtest_mimic::run(&args, trials);
    node::stop_if_started();
    if skip_node {
        eprintln!("security tests: AUTOPREP_TEST_SECURE_NODE=0, the tests that need the node were skipped");
    }
    conclusion.exit();
}

fn trial(name: &'static str, ignored: bool, f: fn() -> Result<()>) -> Trial {
    Trial::test(name, move || {
        f().map_err(|e| Failed::from(format!("{e:#}")))
    })
    .with_ignored_flag(ignored)
}

// --- setup ------------------------------------------------------------------------------------

/// A PKI for the tests that do not need the node (in the system's temp directory).
fn local_pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("autoprep-security-{}", std::process::id()));
        Pki::generate(&dir, "127.0.0.1").expect("generate the test certificates")
    })
}

/// The proxy's configuration toward the secure node: TLS with the test CA and the proxy's
/// client certificate.
fn toward_node() -> Config {
    let n = node();
    let mut cfg = Config::for_upstream(&n.addr);
    cfg.upstream_tls = true;
    cfg.upstream_tls_ca = Some(n.pki.path(pki::CA));
    cfg.upstream_tls_cert = Some(n.pki.path(pki::PROXY_UPSTREAM_CERT));
    cfg.upstream_tls_key = Some(n.pki.path(pki::PROXY_UPSTREAM_KEY));
    cfg
}

/// TLS toward the clients, and client certificates required when `mutual`.
fn with_client_tls(mut cfg: Config, pki: &Pki, mutual: bool) -> Config {
    cfg.tls_cert = Some(pki.path(pki::PROXY_CERT));
    cfg.tls_key = Some(pki.path(pki::PROXY_KEY));
    if mutual {
        cfg.tls_client_ca = Some(pki.path(pki::CA));
    }
    cfg
}

fn start(cfg: Config) -> (String, Arc<ProxyContext>) {
    let (addr, ctx) = proxy_ctx(cfg);
    (addr.to_string(), ctx)
}

/// An application's TLS toward the proxy: trusts the test CA, checks the name `localhost`,
/// presents `identity` (a certificate / key pair of the PKI) if any.
fn app_tls(pki: &Pki, identity: Option<(&str, &str)>) -> TlsClient {
    let id = identity.map(|(c, k)| (pki.pem(c), pki.pem(k)));
    TlsClient::new(
        &pki.pem(pki::CA),
        id.as_ref().map(|(c, k)| (c.as_str(), k.as_str())),
        "localhost",
    )
    .expect("client TLS config")
}

/// A direct client's TLS toward the node (it requires a client certificate).
fn node_tls() -> TlsClient {
    let p = &node().pki;
    TlsClient::new(
        &p.pem(pki::CA),
        Some((&p.pem(pki::APP_CERT), &p.pem(pki::APP_KEY))),
        pki::NODE_NAME,
    )
    .expect("node TLS config")
}

fn rewritten(ctx: &ProxyContext) -> u64 {
    ctx.metrics.queries_rewritten.load(Ordering::Relaxed)
}

/// Runs `cql` (with literals) until the proxy has rewritten it (its PREPARE is answered in
/// the background), at most 50 times; every answer must be `expected`'s kind of success.
fn until_rewritten(c: &mut Client, ctx: &ProxyContext, cql: &str) -> Result<Response> {
    let before = rewritten(ctx);
    for _ in 0..50 {
        let r = c.query(cql)?.ok()?;
        if rewritten(ctx) > before {
            return Ok(r);
        }
    }
    bail!("{cql:?} was never rewritten (50 runs)")
}

/// The connection is closed without an answer (or with an error) at the first request.
fn refused(c: &mut Client) -> Result<()> {
    match c.startup(None, &[]) {
        Err(_) => Ok(()),
        Ok(e) => bail!(
            "STARTUP was answered (opcode {:?}) on a connection that should be closed",
            e.header().opcode
        ),
    }
}

fn peer(addr: SocketAddr) -> String {
    format!("peer={addr}")
}

fn login(c: &mut Client) -> Result<()> {
    let r = c.startup(None, &[])?;
    ensure!(
        r.header().opcode == Opcode::AUTHENTICATE,
        "expected AUTHENTICATE, got {:?}",
        r.header().opcode
    );
    match c.login(USER, PASSWORD)? {
        Response::Other(op, _) if op == Opcode::AUTH_SUCCESS.0 => Ok(()),
        other => bail!("login answered {other:?}"),
    }
}

const KEYSPACE_OPTIONS: &str =
    "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}";

// --- the tests --------------------------------------------------------------------------------

/// Files that cannot be used stop the proxy at start, with the option named.
fn unusable_files() -> Result<()> {
    let p = local_pki();
    let check = |cfg: Config, expected: &str| -> Result<()> {
        match ProxyContext::new(cfg) {
            Ok(_) => bail!("accepted; expected an error with {expected:?}"),
            Err(e) => {
                let msg = format!("{e:#}");
                ensure!(msg.contains(expected), "{msg:?} lacks {expected:?}");
                Ok(())
            }
        }
    };
    let base = || Config::for_upstream("127.0.0.1:9042");
    let mut cfg = with_client_tls(base(), p, false);
    cfg.tls_key = Some(p.path(pki::APP_KEY));
    check(cfg, "--tls-cert / --tls-key")?;
    let mut cfg = with_client_tls(base(), p, false);
    cfg.tls_key = Some(p.path(pki::CA));
    check(cfg, "no private key")?;
    let mut cfg = with_client_tls(base(), p, true);
    cfg.tls_client_ca = Some(p.path(pki::PROXY_KEY));
    check(cfg, "--tls-client-ca")?;
    let mut cfg = base();
    cfg.upstream_tls = true;
    cfg.upstream_tls_ca = Some(p.dir.join("missing.pem"));
    check(cfg, "--upstream-tls-ca")?;
    let mut cfg = base();
    cfg.upstream_tls = true;
    cfg.upstream_tls_ca = Some(p.path(pki::CA));
    cfg.upstream_tls_cert = Some(p.path(pki::PROXY_UPSTREAM_CERT));
    check(cfg, "--upstream-tls-cert is set without --upstream-tls-key")?;
    let mut cfg = base();
    cfg.upstream_tls_server_name = Some("db".into());
    check(cfg, "--upstream-tls is off")?;
    Ok(())
}

/// TLS clients in front of a plain upstream (the shared node): v4 and v5 with LZ4 over TLS,
/// rewriting on; a client that does not speak TLS is closed with a log line, the others carry
/// on.
fn client_tls_plain_upstream() -> Result<()> {
    let p = local_pki();
    let (addr, ctx) = start(with_client_tls(Config::for_upstream(&upstream()), p, false));
    let tls = app_tls(p, None);
    let mut v4 = Client::connect_raw_tls(&addr, ProtocolVersion::V4, &tls)?;
    ensure!(v4.startup(None, &[])?.header().opcode == Opcode::READY);
    let q = "SELECT key, cluster_name FROM system.local WHERE key = 'local'";
    let rows = until_rewritten(&mut v4, &ctx, q)?.rows()?;
    ensure!(rows.rows.len() == 1);
    let mut v5 = Client::connect_raw_tls(&addr, ProtocolVersion::V5, &tls)?;
    ensure!(v5.startup(Some(Compression::Lz4), &[])?.header().opcode == Opcode::READY);
    let big = format!(
        "SELECT key FROM system.local WHERE key = 'local' /* {} */",
        "x".repeat(200_000)
    );
    ensure!(
        v5.query(&big)?.rows()?.rows.len() == 1,
        "a 200 kB statement over TLS and v5 segments"
    );
    ensure!(v5.query(q)?.rows()?.rows.len() == 1);

    let mut plain = Client::connect_raw(&addr, ProtocolVersion::V4)?;
    let local = plain.local_addr()?;
    refused(&mut plain)?;
    logs::wait_for(&[
        &peer(local),
        "client TLS handshake failed; connection closed",
    ])
    .map_err(|e| anyhow!(e))?;
    ensure!(
        v4.query(q)?.rows()?.rows.len() == 1,
        "the TLS client carries on"
    );
    Ok(())
}

/// The proxy verifies the node's certificate against `--upstream-tls-ca` and the server name
/// (by default the address's host, here an IP address), presents its client certificate, and
/// closes the client's connection with a log line when any of that fails.
fn upstream_tls() -> Result<()> {
    let n = node();
    // The node serves TLS only: a working session proves the upstream is TLS, and the node
    // reports it for the connection of this driver name.
    let (addr, _ctx) = start(toward_node());
    let mut c = Client::connect_raw(&addr, ProtocolVersion::V4)?;
    let driver = "autoprep security upstream_tls";
    ensure!(c.startup(None, &[("DRIVER_NAME", driver)])?.header().opcode == Opcode::AUTHENTICATE);
    ensure!(
        matches!(c.login(USER, PASSWORD)?, Response::Other(op, _) if op == Opcode::AUTH_SUCCESS.0)
    );
    let rows = c
        .query("SELECT driver_name, ssl_enabled, ssl_protocol FROM system_views.clients")?
        .rows()?;
    let ours: Vec<_> = rows
        .rows
        .iter()
        .filter(|r| r[0].as_deref() == Some(driver.as_bytes()))
        .collect();
    ensure!(!ours.is_empty(), "the node does not list our connection");
    for r in ours {
        ensure!(
            r[1].as_deref() == Some(&[1u8][..]),
            "ssl_enabled is not true: {r:?}"
        );
    }

    // The admin server's readiness probe speaks TLS to a TLS upstream.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tls_ctx = ProxyContext::new(toward_node())?;
    rt.block_on(autoprep::admin::probe(
        &n.addr,
        tls_ctx.upstream_tls.as_ref(),
    ))
    .map_err(|e| anyhow!("the /ready probe over TLS failed: {e}"))?;
    ensure!(
        rt.block_on(autoprep::admin::probe(&n.addr, None)).is_err(),
        "a plain probe of a TLS-only node succeeded"
    );

    let mut by_name = toward_node();
    by_name.upstream_tls_server_name = Some(pki::NODE_NAME.into());
    let (addr, _) = start(by_name);
    login(&mut Client::connect_raw(&addr, ProtocolVersion::V4)?)?;

    let failing = |cfg: Config, needles: &[&str]| -> Result<()> {
        let (addr, _) = start(cfg);
        let mut c = Client::connect_raw(&addr, ProtocolVersion::V4)?;
        let local = c.local_addr()?;
        refused(&mut c)?;
        let p = peer(local);
        let mut all = vec![p.as_str()];
        all.extend_from_slice(needles);
        let line = logs::wait_for(&all)
            .map_err(|e| anyhow!("{e}; this connection logged: {:?}", logs::lines_with(&[&p])))?;
        eprintln!("    logged: {}", line.trim());
        Ok(())
    };
    let mut wrong_ca = toward_node();
    wrong_ca.upstream_tls_ca = Some(n.pki.path(pki::ROGUE_CA));
    failing(
        wrong_ca,
        &[
            "TLS handshake with upstream",
            "UnknownIssuer",
            "closing the client connection",
        ],
    )?;
    let mut wrong_name = toward_node();
    wrong_name.upstream_tls_server_name = Some("wrong.test".into());
    failing(
        wrong_name,
        &[
            "TLS handshake with upstream",
            "not valid for name \"wrong.test\"",
            "closing the client connection",
        ],
    )?;
    // The node requires a client certificate; TLS 1.3 reports the refusal after the
    // handshake, at the first read.
    let mut no_cert = toward_node();
    no_cert.upstream_tls_cert = None;
    no_cert.upstream_tls_key = None;
    failing(no_cert, &["upstream", "closing the client connection"])?;
    Ok(())
}

/// Client certificates verified by the proxy, the proxy's own verified by the node; password
/// login, schema, rewritten statements, v5 with LZ4.
fn mutual_tls_both_sides() -> Result<()> {
    let n = node();
    let (addr, ctx) = start(with_client_tls(toward_node(), &n.pki, true));
    let tls = app_tls(&n.pki, Some((pki::APP_CERT, pki::APP_KEY)));
    let mut c = Client::connect_raw_tls(&addr, ProtocolVersion::V4, &tls)?;
    login(&mut c)?;
    c.query(&format!(
        "CREATE KEYSPACE IF NOT EXISTS tls_mtls {KEYSPACE_OPTIONS}"
    ))?
    .ok()?;
    c.query("CREATE TABLE IF NOT EXISTS tls_mtls.kv (k int PRIMARY KEY, v text)")?
        .ok()?;
    c.query("USE tls_mtls")?.ok()?;
    until_rewritten(&mut c, &ctx, "INSERT INTO kv (k, v) VALUES (1, 'one')")?;
    let rows = c.query("SELECT v FROM kv WHERE k = 1")?.rows()?;
    ensure!(rows.rows == vec![vec![Some(b"one".to_vec())]], "{rows:?}");

    let mut v5 = Client::connect_raw_tls(&addr, ProtocolVersion::V5, &tls)?;
    ensure!(v5.startup(Some(Compression::Lz4), &[])?.header().opcode == Opcode::AUTHENTICATE);
    ensure!(
        matches!(v5.login(USER, PASSWORD)?, Response::Other(op, _) if op == Opcode::AUTH_SUCCESS.0)
    );
    v5.query("USE tls_mtls")?.ok()?;
    until_rewritten(&mut v5, &ctx, "INSERT INTO kv (k, v) VALUES (2, 'two')")?;
    let rows = v5.query("SELECT k FROM kv")?.rows()?;
    ensure!(rows.rows.len() == 2, "{rows:?}");
    ensure!(ctx.metrics.prepares_failed.load(Ordering::Relaxed) == 0);
    Ok(())
}

/// With `--tls-client-ca`, a client with a certificate of another CA, or with none, is closed
/// with a log line; connections already open and new good ones carry on.
fn bad_client_certificates() -> Result<()> {
    let n = node();
    let (addr, _ctx) = start(with_client_tls(toward_node(), &n.pki, true));
    let good = app_tls(&n.pki, Some((pki::APP_CERT, pki::APP_KEY)));
    let mut a = Client::connect_raw_tls(&addr, ProtocolVersion::V4, &good)?;
    login(&mut a)?;
    let q = "SELECT key FROM system.local WHERE key = 'local'";
    ensure!(a.query(q)?.rows()?.rows.len() == 1);

    for (what, tls, cause) in [
        (
            "a certificate of another CA",
            app_tls(&n.pki, Some((pki::ROGUE_CERT, pki::ROGUE_KEY))),
            "UnknownIssuer",
        ),
        ("no certificate", app_tls(&n.pki, None), "no certificate"),
    ] {
        // TLS 1.3: the client finishes its side of the handshake; the proxy's refusal comes
        // at the first read.
        match Client::connect_raw_tls(&addr, ProtocolVersion::V4, &tls) {
            Ok(mut c) => {
                let local = c.local_addr()?;
                refused(&mut c).with_context(|| what.to_string())?;
                let line = logs::wait_for(&[&peer(local), "client TLS handshake failed"])
                    .map_err(|e| anyhow!("{what}: {e}"))?;
                ensure!(
                    line.to_lowercase().contains(&cause.to_lowercase()),
                    "{what}: {line}"
                );
            }
            Err(e) => eprintln!("    {what}: refused during the handshake: {e:#}"),
        }
    }
    ensure!(
        a.query(q)?.rows()?.rows.len() == 1,
        "the open connection carries on"
    );
    let mut b = Client::connect_raw_tls(&addr, ProtocolVersion::V4, &good)?;
    login(&mut b)?;
    ensure!(
        b.query(q)?.rows()?.rows.len() == 1,
        "a new good client connects"
    );
    Ok(())
}

/// The SASL exchange passes through untouched; before it completes, requests get the server's
/// own answer and the proxy prepares nothing; after it, the proxy's PREPAREs ride the client's
/// authenticated connection (autoprep has no credentials of its own).
fn password_authentication() -> Result<()> {
    let n = node();
    let (addr, ctx) = start(toward_node());
    let q = "SELECT key FROM system.local WHERE key = 'local'";

    // Before login: the proxy answers exactly as the node does, and prepares nothing.
    let mut direct = Client::connect_raw_tls(&n.addr, ProtocolVersion::V4, &node_tls())?;
    let mut through = Client::connect_raw(&addr, ProtocolVersion::V4)?;
    let a = direct.startup(None, &[])?;
    let b = through.startup(None, &[])?;
    ensure!(a.header().opcode == Opcode::AUTHENTICATE);
    ensure!(a.body() == b.body(), "AUTHENTICATE differs: {a:?} / {b:?}");
    for _ in 0..3 {
        let a = direct.query(q)?;
        let b = through.query(q)?;
        ensure!(matches!(a, Response::Error { .. }), "{a:?}");
        ensure!(a == b, "before login: direct {a:?}, through autoprep {b:?}");
    }
    let stats = ctx.rewriter.cache.stats();
    ensure!(
        stats.prepares_started == 0 && stats.entries == 0,
        "prepared on an unauthenticated connection: {stats:?}"
    );

    ensure!(
        matches!(through.login(USER, PASSWORD)?, Response::Other(op, _) if op == Opcode::AUTH_SUCCESS.0)
    );
    ensure!(until_rewritten(&mut through, &ctx, q)?.rows()?.rows.len() == 1);
    through
        .query(&format!(
            "CREATE KEYSPACE IF NOT EXISTS tls_auth {KEYSPACE_OPTIONS}"
        ))?
        .ok()?;
    through
        .query("CREATE TABLE IF NOT EXISTS tls_auth.events (id int PRIMARY KEY, note text)")?
        .ok()?;
    let before = rewritten(&ctx);
    for i in 0..20 {
        through
            .query(&format!(
                "INSERT INTO tls_auth.events (id, note) VALUES ({i}, 'n{i}')"
            ))?
            .ok()?;
    }
    ensure!(rewritten(&ctx) > before, "no INSERT was rewritten");
    let rows = through.query("SELECT id FROM tls_auth.events")?.rows()?;
    ensure!(rows.rows.len() == 20, "{} rows", rows.rows.len());
    let stats = ctx.rewriter.cache.stats();
    ensure!(stats.entries >= 2, "{stats:?}");
    ensure!(ctx.metrics.prepares_ok.load(Ordering::Relaxed) >= 2);
    ensure!(
        ctx.metrics.prepares_failed.load(Ordering::Relaxed) == 0,
        "a PREPARE of the proxy failed"
    );
    Ok(())
}

/// A wrong password gets exactly the node's AuthenticationException (code and message), and
/// the proxy serves the next client normally.
fn wrong_password() -> Result<()> {
    let n = node();
    let (addr, _ctx) = start(toward_node());
    let mut direct = Client::connect_raw_tls(&n.addr, ProtocolVersion::V4, &node_tls())?;
    let mut through = Client::connect_raw(&addr, ProtocolVersion::V4)?;
    direct.startup(None, &[])?;
    through.startup(None, &[])?;
    let a = direct.login(USER, "not the password")?;
    let b = through.login(USER, "not the password")?;
    let Response::Error { code, message } = &a else {
        bail!("the node accepted a wrong password: {a:?}");
    };
    ensure!(*code == 0x0100, "not an authentication error: {a:?}");
    ensure!(a == b, "direct {a:?}, through autoprep {b:?}");
    eprintln!("    both: 0x{code:04x} {message}");
    let mut next = Client::connect_raw(&addr, ProtocolVersion::V4)?;
    login(&mut next)?;
    Ok(())
}

/// The Python driver with PlainTextAuthProvider and an SSL context that verifies the proxy's
/// certificate; the proxy speaks mutual TLS to the node.
fn python_driver() -> Result<()> {
    let n = node();
    let (addr, ctx) = start(with_client_tls(toward_node(), &n.pki, false));
    let (host, port) = addr.rsplit_once(':').context("proxy address")?;
    let venv = std::process::Command::new("bash")
        .arg(autoprep_tests::repo_root().join("scripts/venv.sh"))
        .output()
        .context("run scripts/venv.sh")?;
    ensure!(
        venv.status.success(),
        "scripts/venv.sh failed:\n{}",
        String::from_utf8_lossy(&venv.stderr)
    );
    let python =
        std::path::PathBuf::from(String::from_utf8(venv.stdout)?.trim()).join("bin/python");
    let out = std::process::Command::new(python)
        .args(["-c", PYTHON_CLIENT, host, port])
        .arg(n.pki.path(pki::CA))
        .output()
        .context("run the Python driver")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success(),
        "the Python client failed:\n{stdout}\n{stderr}"
    );
    ensure!(stdout.contains("rows 10"), "{stdout}");
    ensure!(
        stdout.contains("wrong password: AuthenticationFailed"),
        "{stdout}"
    );
    ensure!(
        stdout.contains("Provided username cassandra and/or password are incorrect"),
        "{stdout}"
    );
    ensure!(rewritten(&ctx) > 0, "nothing was rewritten");
    Ok(())
}

const PYTHON_CLIENT: &str = r#"
import ssl, sys
from cassandra import AuthenticationFailed
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, NoHostAvailable, EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)

def cluster(password):
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]), request_timeout=30)
    return Cluster([host], port=port, ssl_context=ctx, ssl_options={"server_hostname": "localhost"},
                   auth_provider=PlainTextAuthProvider("cassandra", password),
                   execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                   connect_timeout=10, control_connection_timeout=10)

c = cluster("cassandra")
s = c.connect()
s.execute("CREATE KEYSPACE IF NOT EXISTS tls_python WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE IF NOT EXISTS tls_python.kv (k int PRIMARY KEY, v text)")
for i in range(10):
    s.execute(f"INSERT INTO tls_python.kv (k, v) VALUES ({i}, 'v{i}')")
print("rows", len(list(s.execute("SELECT k FROM tls_python.kv"))))
c.shutdown()

bad = cluster("wrong")
try:
    bad.connect()
    print("wrong password: connected?!")
except NoHostAvailable as e:
    for err in e.errors.values():
        print("wrong password:", type(err).__name__, err)
finally:
    bad.shutdown()
"#;
