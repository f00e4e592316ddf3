//! What changes without a restart: the TLS material of both sides when its files change
//! (polled every `tls_reload_interval_seconds`) and on SIGHUP, and on SIGHUP the options that
//! can change safely while connections are open, read again from the configuration file (and
//! the environment and flags the process started with, which still override it).
//!
//! | option | on SIGHUP |
//! |---|---|
//! | `admission_threshold` | from the next lookup (an atomic the cache reads) |
//! | `max_client_connections` | from the next connection (an atomic the listener reads); open connections are never closed for a lower limit |
//! | `exclude` | from the next statement (an `ArcSwap` the rewrite reads) |
//! | `log` | at once (the reload layer the binary installs); ends a temporary filter set through `PUT /log` |
//! | every other option | named in a warning while it differs from the value in use: it needs a restart |
//!
//! TLS files (certificates, keys, CAs) are read again on SIGHUP whether or not they changed;
//! the paths themselves need a restart.
//!
//! Design justification: each reloadable value lives where its reader already looks (the
//! cache, the lifecycle, the TLS configuration) as an atomic or an `ArcSwap`, so the data path
//! reads it without a lock, once per decision or per connection.

use crate::config::options::OPTIONS;
use crate::config::Config;
use crate::context::Context;
use crate::log_filter::LogFilter;
use crate::metrics::Metrics;
use crate::tls::{Reload, Reloaded};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{info, warn};

/// The options a SIGHUP applies.
pub const LIVE: &[&str] = &[
    "admission_threshold",
    "exclude",
    "max_client_connections",
    "log",
];

/// Reads the configuration again as the process was started: the same flags and environment,
/// the file read anew. `Err` holds every problem, one per line.
pub type LoadConfig = dyn Fn() -> Result<Config, Vec<String>> + Send + Sync;

/// Applies configuration and TLS changes to a running proxy.
pub struct Reloader {
    ctx: Arc<Context>,
    /// `None` when the process installed no reloadable log filter (then `log` needs a restart).
    log: Option<LogFilter>,
    tls: Vec<Arc<dyn Reload>>,
    load: Box<LoadConfig>,
    /// The configuration in force: what the process started with, with the reloaded live
    /// options. Also serializes reloads.
    in_force: Mutex<Config>,
}

/// What one configuration reload did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Options applied, each as `key: old -> new`.
    pub applied: Vec<String>,
    /// Options that differ from the value in use but need a restart, each as
    /// `key (in use: old, configured: new)`.
    pub need_restart: Vec<String>,
}

impl Reloader {
    /// A reloader for `ctx`'s TLS material and live options.
    pub fn new(
        ctx: Arc<Context>,
        log: Option<LogFilter>,
        load: impl Fn() -> Result<Config, Vec<String>> + Send + Sync + 'static,
    ) -> Reloader {
        let tls = ctx
            .client_tls
            .iter()
            .map(|t| t.reloadable())
            .chain(ctx.upstream_tls.iter().map(|t| t.reloadable()))
            .collect();
        Reloader {
            in_force: Mutex::new(ctx.cfg.clone()),
            ctx,
            log,
            tls,
            load: Box::new(load),
        }
    }

    /// Reads every side's TLS files and puts changed material in use (with `force`, rebuilds
    /// it even when the files are unchanged). Blocks on file reads.
    pub fn check_tls(&self, force: bool) {
        for material in &self.tls {
            let side = material.side().as_label();
            match material.reload(force) {
                Reloaded::Unchanged => {}
                Reloaded::Loaded { not_after } => {
                    Metrics::inc(&self.ctx.metrics.tls_reloads_ok);
                    info!(
                        side,
                        not_after, "TLS certificate reloaded: new connections use it"
                    );
                }
                Reloaded::Refused(e) => {
                    Metrics::inc(&self.ctx.metrics.tls_reloads_error);
                    warn!(
                        side,
                        error = %e,
                        "TLS files changed but cannot be used; the previous certificate stays in use"
                    );
                }
            }
        }
    }

    /// Reads the configuration again and applies what can change while running; logs what was
    /// applied and names what needs a restart. Blocks on the file read.
    pub fn reload_config(&self) -> Result<Report, Vec<String>> {
        let mut in_force = self.in_force.lock().unwrap_or_else(|p| p.into_inner());
        let new = match (self.load)() {
            Ok(c) => c,
            Err(problems) => {
                warn!(
                    problems = %problems.join("; "),
                    "configuration not reloaded: it has problems; the configuration in use stays"
                );
                return Err(problems);
            }
        };
        let old_values = values(&in_force);
        let new_values = values(&new);
        let mut report = Report::default();
        // Put in force last, so that the lines about this reload are written under the filter
        // that was in force when it was asked for.
        let mut log_filter = None;
        for o in OPTIONS {
            let (old, now) = (old_values.get(o.key), new_values.get(o.key));
            if old == now {
                continue;
            }
            let (old, now) = (shown(old), shown(now));
            let live = LIVE.contains(&o.key) && (o.key != "log" || self.log.is_some());
            if !live {
                report
                    .need_restart
                    .push(format!("{} (in use: {old}, configured: {now})", o.key));
                continue;
            }
            match o.key {
                "admission_threshold" => {
                    self.ctx
                        .rewriter
                        .cache
                        .set_admission_threshold(new.admission_threshold);
                    in_force.admission_threshold = new.admission_threshold;
                }
                "exclude" => {
                    self.ctx.rewriter.set_exclude(new.exclude.clone());
                    in_force.exclude = new.exclude.clone();
                }
                "max_client_connections" => {
                    self.ctx.lifecycle.set_limit(new.max_client_connections);
                    in_force.max_client_connections = new.max_client_connections;
                }
                "log" => {
                    log_filter = Some(new.log.clone());
                    in_force.log = new.log.clone();
                }
                _ => continue,
            }
            report.applied.push(format!("{}: {old} -> {now}", o.key));
        }
        if report.applied.is_empty() {
            info!("configuration reloaded: no option that can change while running has changed");
        } else {
            info!(applied = %report.applied.join(", "), "configuration reloaded");
        }
        if !report.need_restart.is_empty() {
            warn!(
                options = %report.need_restart.join(", "),
                "configuration changed in options that need a restart; they keep their values until then"
            );
        }
        if let (Some(filter), Some(log)) = (log_filter, &self.log) {
            // Checked with the rest of the configuration: this does not fail in practice.
            if let Err(e) = log.set_configured(&filter) {
                warn!(error = %e, "log: not applied");
            }
        }
        Ok(report)
    }

    /// SIGHUP: the configuration, then the TLS files of both sides (read again even when
    /// unchanged). Blocks on file reads.
    pub fn hangup(&self) {
        info!("SIGHUP: reloading the configuration and the TLS files");
        let _ = self.reload_config();
        self.check_tls(true);
    }

    /// Serves reloads until the process exits: SIGHUP from `hangups`, and a check of the TLS
    /// files every `every` (none: only on SIGHUP). The file reads run on tokio's blocking
    /// threads, off the data path's.
    pub async fn run(self: Arc<Self>, mut hangups: Hangups, every: Option<Duration>) {
        let mut tick = every.map(|d| {
            let mut i = tokio::time::interval_at(tokio::time::Instant::now() + d, d);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        loop {
            let poll = async {
                match &mut tick {
                    Some(t) => {
                        t.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let this = self.clone();
            let work: Box<dyn FnOnce() + Send> = tokio::select! {
                () = hangups.recv() => Box::new(move || this.hangup()),
                () = poll => Box::new(move || this.check_tls(false)),
            };
            if let Err(e) = tokio::task::spawn_blocking(work).await {
                warn!(error = %e, "reload failed");
            }
        }
    }
}

/// Every option of `cfg` by key, as TOML values (unset options absent).
fn values(cfg: &Config) -> toml::Table {
    toml::Table::try_from(cfg).unwrap_or_default()
}

/// A value for the log: as TOML writes it, or `unset`.
fn shown(v: Option<&toml::Value>) -> String {
    v.map_or_else(|| "unset".to_owned(), ToString::to_string)
}

/// SIGHUP, as a stream of "reload" requests. Installing it means SIGHUP no longer terminates
/// the process (its default action).
pub struct Hangups {
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

impl Hangups {
    /// Installs the handler. Call inside a tokio runtime, as early as possible.
    pub fn install() -> std::io::Result<Hangups> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Hangups {
                hup: signal(SignalKind::hangup())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Hangups {})
    }

    /// Completes at the next SIGHUP (never where there is none).
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        {
            if self.hup.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        #[cfg(not(unix))]
        std::future::pending::<()>().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reloader(cfg: Config, next: Arc<Mutex<Config>>) -> (Reloader, Arc<Context>) {
        let ctx = Arc::new(Context::new(cfg).unwrap());
        let r = Reloader::new(ctx.clone(), None, move || Ok(next.lock().unwrap().clone()));
        (r, ctx)
    }

    #[test]
    fn live_options_are_applied_and_the_others_named() {
        let start = Config::for_upstream("127.0.0.1:9042");
        let next = Arc::new(Mutex::new(start.clone()));
        let (r, ctx) = reloader(start.clone(), next.clone());
        assert_eq!(r.reload_config().unwrap(), Report::default());

        {
            let mut n = next.lock().unwrap();
            n.admission_threshold = 7;
            n.max_client_connections = 5;
            n.cache_entries = 3;
            n.admin = Some("127.0.0.1:9100".into());
            n.log = "debug".into();
            n.exclude = vec!["secret_table".into()];
        }
        assert!(!ctx
            .rewriter
            .is_excluded("SELECT v FROM secret_table WHERE k = ?"));
        let report = r.reload_config().unwrap();
        let mut applied = report.applied.clone();
        applied.sort();
        assert_eq!(
            applied,
            [
                "admission_threshold: 2 -> 7",
                "exclude: [] -> [\"secret_table\"]",
                "max_client_connections: 1024 -> 5"
            ]
        );
        assert!(ctx
            .rewriter
            .is_excluded("SELECT v FROM secret_table WHERE k = ?"));
        assert_eq!(
            report.need_restart,
            [
                "admin (in use: unset, configured: \"127.0.0.1:9100\")",
                // Without a reloadable log filter (no binary's subscriber), log needs a restart.
                "log (in use: \"info\", configured: \"debug\")",
                "cache_entries (in use: 10000, configured: 3)",
            ]
        );
        assert_eq!(ctx.rewriter.cache.admission_threshold(), 7);
        assert_eq!(ctx.lifecycle.limit(), 5);

        // Named again while they differ; applied options are not applied twice.
        let again = r.reload_config().unwrap();
        assert!(again.applied.is_empty());
        assert_eq!(again.need_restart.len(), 3);
    }

    #[test]
    fn a_configuration_with_problems_changes_nothing() {
        let start = Config::for_upstream("127.0.0.1:9042");
        let ctx = Arc::new(Context::new(start).unwrap());
        let r = Reloader::new(ctx.clone(), None, || {
            Err(vec!["admission_threshold: must be at least 1, got 0".into()])
        });
        assert_eq!(r.reload_config().unwrap_err().len(), 1);
        assert_eq!(ctx.rewriter.cache.admission_threshold(), 2);
    }

    #[test]
    fn the_log_option_is_live_with_a_log_filter() {
        let start = Config::for_upstream("127.0.0.1:9042");
        let ctx = Arc::new(Context::new(start.clone()).unwrap());
        let log = LogFilter::new("info", |_| Ok(()));
        let r = Reloader::new(ctx, Some(log.clone()), move || {
            Ok(Config {
                log: "warn,autoprep=debug".into(),
                ..start.clone()
            })
        });
        let report = r.reload_config().unwrap();
        assert_eq!(report.applied, ["log: \"info\" -> \"warn,autoprep=debug\""]);
        assert_eq!(log.status().current, "warn,autoprep=debug");
    }
}
