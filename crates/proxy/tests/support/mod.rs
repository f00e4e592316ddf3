//! What the binary's own tests share: the `autoprep` binary started on ephemeral ports in front
//! of the test node, its log collected, signals sent to it.

use autoprep_tests::upstream;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_autoprep");

/// Bound on waiting for the binary to say where it listens.
const START_PATIENCE: Duration = Duration::from_secs(90);

/// A running `autoprep` process and what it logged.
pub struct Proxy {
    pub child: Child,
    pub addr: String,
    pub admin: SocketAddr,
    pub log: Arc<Mutex<Vec<String>>>,
    /// The thread that reads the log; it ends when the process closes its output.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Starts the binary on ephemeral ports in front of the test node, with `args` added
    /// (the test's own `AUTOPREP_*` environment is not passed on).
    // Not every test file starts it in front of the test node (tests/handover.rs does not).
    #[allow(dead_code)]
    pub fn start(args: &[&str]) -> Proxy {
        Proxy::start_on(&upstream(), args)
    }

    /// Starts the binary on ephemeral ports in front of the node at `node`, with `args`.
    pub fn start_on(node: &str, args: &[&str]) -> Proxy {
        let mut cmd = Command::new(BIN);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("AUTOPREP_") {
                cmd.env_remove(k);
            }
        }
        let mut child = cmd
            .env("NO_COLOR", "1")
            .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .args(["--upstream", node])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stdout.take().unwrap());
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                let _ = tx.send(line.clone());
                sink.lock().unwrap().push(line);
            }
        });
        let field = |line: &str, name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .map(str::to_owned)
        };
        let (mut addr, mut admin) = (None, None);
        while addr.is_none() || admin.is_none() {
            let line = rx
                .recv_timeout(START_PATIENCE)
                .expect("autoprep logs where it listens");
            if line.contains("autoprep listening") {
                addr = field(&line, "listen=");
            }
            if line.contains("admin server listening") {
                admin = field(&line, "admin=");
            }
        }
        Proxy {
            child,
            addr: addr.unwrap(),
            admin: admin.unwrap().parse().unwrap(),
            log,
            reader: Some(reader),
        }
    }

    /// Sends the signal `name` (`TERM`, `HUP`...).
    pub fn signal(&self, name: &str) {
        // The shell's builtin `kill`: no dependency on a kill binary being installed.
        let ok = Command::new("sh")
            .args(["-c", &format!("kill -{name} {}", self.child.id())])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name}");
    }

    /// Waits until every line the process wrote has been collected: call it once the process
    /// has exited, so the log read afterwards is complete.
    pub fn read_log_to_the_end(&mut self) {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }

    /// Everything it logged so far.
    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.read_log_to_the_end();
    }
}
