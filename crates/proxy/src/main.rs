//! The `autoprep` binary: loads the configuration (exit 64 on any problem, every problem
//! named), sets up logging (its filter reloadable, see [`autoprep::log_filter`]), starts the
//! admin server (when `admin` is set), the listener and the reloader (SIGHUP and changed TLS
//! files, see [`autoprep::reload`]), and on SIGTERM / SIGINT drains (see
//! [`autoprep::lifecycle`]) and exits 0; a second signal exits at once with 1.

use anyhow::Context as _;
use autoprep::config::{self, LoadError, Loaded, EX_USAGE};
use autoprep::lifecycle::{self, Outcome, Signals};
use autoprep::log_filter::{self, LogFilter};
use autoprep::reload::{Hangups, Reloader};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

fn main() -> ExitCode {
    // Kept for a configuration reload (SIGHUP), which reads the file again under the same
    // flags and environment.
    let args: Vec<OsString> = std::env::args_os().collect();
    let vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let loaded = match config::load(args.clone(), vars.clone()) {
        Ok(l) => l,
        Err(LoadError::Cli(e)) => {
            // --help and --version print to standard output and succeed.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EX_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
        Err(e @ LoadError::Invalid(_)) => {
            eprintln!("{e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    if loaded.print_config {
        print!("{}", loaded.to_toml());
        return ExitCode::SUCCESS;
    }
    let reread = move || match config::load(args.clone(), vars.clone()) {
        Ok(l) => Ok(l.config),
        Err(LoadError::Invalid(problems)) => Err(problems),
        Err(LoadError::Cli(e)) => Err(vec![e.to_string()]),
    };
    match run(loaded, reread) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("autoprep: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The allocator on Linux with glibc: jemalloc, with a background thread that returns pages
/// left free for a second (`dirty_decay_ms:1000,muzzy_decay_ms:0`, compiled in through
/// `.cargo/config.toml`; `_RJEM_MALLOC_CONF` overrides them at run time). glibc's malloc keeps
/// what a burst of connections freed: after 2,000 connections closed the process stayed 47 MiB
/// above its start with glibc (its mmap threshold fixed at 128 KiB, one arena or several) and
/// 38 to 48 MiB with mimalloc, against 4.6 to 10.5 MiB with this (README "Footprint"), at the
/// same instructions per request. glibc's `malloc_trim` would return it but needs `unsafe`,
/// which the workspace forbids. Other targets (the musl image) keep their libc's allocator:
/// jemalloc has no background thread there.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// One thread: a current-thread runtime (every wake-up stays on the thread); otherwise the
/// work-stealing runtime with `threads` workers. 0 means one per CPU the process may use (its
/// affinity and cgroup quota counted), so a sidecar limited to one CPU gets the single thread.
fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    if threads == 1 {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
}

fn run(
    loaded: Loaded,
    reread: impl Fn() -> Result<config::Config, Vec<String>> + Send + Sync + 'static,
) -> anyhow::Result<ExitCode> {
    let cfg = loaded.config;
    // The filter was checked with the rest of the configuration. It sits in a reload layer so
    // that `PUT /log` and a reloaded `log` option can replace it.
    let (filter, handle) = tracing_subscriber::reload::Layer::new(
        log_filter::env_filter(&cfg.log).context("log filter")?,
    );
    // Text, or one JSON object per line (`log_format`; see `autoprep::log_json`).
    let json = (cfg.log_format == "json").then(|| {
        autoprep::log_json::JsonLayer::new(|| {
            Box::new(std::io::stdout().lock()) as Box<dyn std::io::Write>
        })
    });
    let text = json
        .is_none()
        .then(|| tracing_subscriber::fmt::layer().with_ansi(std::io::stdout().is_terminal()));
    tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .init();
    let log = LogFilter::new(&cfg.log, move |f| {
        handle.reload(f).map_err(|e| e.to_string())
    });
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let rt = runtime(cfg.worker_threads).context("start the runtime")?;
    let outcome = rt.block_on(async move {
        // First, so that a signal during start-up already drains (or reloads) rather than kills.
        let mut signals = Signals::install().context("install signal handlers")?;
        let hangups = Hangups::install().context("install the SIGHUP handler")?;
        let listener = tokio::net::TcpListener::bind(&cfg.listen)
            .await
            .with_context(|| format!("listen: bind {}", cfg.listen))?;
        tracing::info!(
            listen = %listener.local_addr()?,
            upstream = %cfg.upstream,
            rewrite = cfg.rewrite,
            max_client_connections = cfg.max_client_connections,
            "autoprep listening"
        );
        let grace = Duration::from_secs(cfg.drain_grace_seconds);
        let tls_every = Duration::from_secs(cfg.tls_reload_interval_seconds);
        let ctx = Arc::new(autoprep::context::Context::new(cfg)?);
        ctx.topology.bound(listener.local_addr()?);
        if let Some(a) = ctx.topology.advertised() {
            tracing::info!(advertised = %a.addr, "drivers see the cluster as this one node");
        }
        if let Some(admin) = ctx.cfg.admin.clone() {
            // Its own thread and runtime: it answers even when this runtime is saturated.
            autoprep::admin::spawn(&admin, ctx.clone(), Some(log.clone()))?;
        }
        let reloader = Arc::new(Reloader::new(ctx.clone(), Some(log), reread));
        tokio::spawn(reloader.run(hangups, (!tls_every.is_zero()).then_some(tls_every)));
        if let Some(path) = &ctx.cfg.handover_socket {
            // Bound before the client listener serves: a draining process may look for it.
            let taker = autoprep::handover::listen(path)
                .with_context(|| format!("handover_socket: bind {}", path.display()))?;
            tokio::spawn(autoprep::server::take_over(taker, ctx.clone()));
        }
        tokio::spawn(autoprep::server::run(listener, ctx.clone()));
        signals.recv().await;
        let handover = ctx.cfg.handover_socket.clone();
        // Before the connections, the new process learns the statements their clients
        // prepared here (see `cluster::ClientStatement`).
        let announce = async {
            if let Some(path) = handover.as_deref() {
                let statements = ctx.cluster.client_statements();
                if let Err(e) = autoprep::handover::send_statements(path, &statements).await {
                    tracing::warn!(error = %e, "the new process did not take the clients' statements; their requests go home there until prepared again");
                }
            }
        };
        let outcome = lifecycle::drain(
            &ctx.lifecycle,
            grace,
            handover.as_deref(),
            announce,
            signals.recv(),
        )
        .await;
        let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        tracing::info!(
            handed_over = count(&ctx.metrics.drain_handed_over),
            closed = count(&ctx.metrics.drain_closed),
            "drain over"
        );
        // Spans still queued go out before the process ends (on the exporter's thread).
        let traced = ctx.clone();
        let _ =
            tokio::task::spawn_blocking(move || traced.tracing.flush(Duration::from_secs(5))).await;
        anyhow::Ok(outcome)
    })?;
    Ok(match outcome {
        Outcome::Drained | Outcome::TimedOut { .. } => {
            tracing::info!("autoprep stopped");
            ExitCode::SUCCESS
        }
        Outcome::Forced => {
            tracing::warn!("second signal: exiting without waiting for client connections");
            // Exit now: dropping the runtime would wait for the sessions' tasks.
            std::process::exit(1);
        }
    })
}
