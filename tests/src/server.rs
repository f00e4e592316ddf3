//! The real server the tests run against.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The address of the Cassandra node under test: `AUTOPREP_TEST_UPSTREAM` when set, otherwise
/// a local node started (or reused) by `scripts/cassandra.sh start`.
pub fn upstream() -> String {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        if let Ok(a) = std::env::var("AUTOPREP_TEST_UPSTREAM") {
            if !a.is_empty() {
                return a;
            }
        }
        let script = repo_root().join("scripts/cassandra.sh");
        let status = Command::new("bash")
            .arg(&script)
            .arg("start")
            .status()
            .expect("run scripts/cassandra.sh start");
        assert!(status.success(), "scripts/cassandra.sh start failed");
        let host = std::env::var("CASSANDRA_LISTEN").unwrap_or_else(|_| "127.0.0.1".into());
        let port = std::env::var("CASSANDRA_NATIVE_PORT").unwrap_or_else(|_| "9042".into());
        format!("{host}:{port}")
    })
    .clone()
}
