//! The in-process proxies' log, captured so that tests can check what autoprep says when it
//! closes a connection. Each line carries the connection's span (`conn{id=.. peer=..}`), so a
//! test finds its own connection's lines by the client's local address.

use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber (autoprep at debug) for the whole process.
pub fn install() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("info,autoprep=debug")
        .with_ansi(false)
        .with_writer(|| Capture)
        .try_init();
}

/// Every captured line that contains all of `needles`.
pub fn lines_with(needles: &[&str]) -> Vec<String> {
    let log = LOG.lock().unwrap_or_else(|p| p.into_inner());
    String::from_utf8_lossy(&log)
        .lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .map(str::to_owned)
        .collect()
}

/// Waits (at most 20 s: the line is written as the proxy closes the connection, which may be a
/// moment after the client saw it close) for a line that contains all of `needles`.
pub fn wait_for(needles: &[&str]) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(l) = lines_with(needles).into_iter().next() {
            return Ok(l);
        }
        if Instant::now() > deadline {
            return Err(format!("no log line with {needles:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
