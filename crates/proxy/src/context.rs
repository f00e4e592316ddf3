//! What every session of the process shares: the configuration, the upstream contact points,
//! the topology shown to drivers, the prepared-statement cache, the encoder options, the
//! metrics and per-shape statistics, the lifecycle (connection admission and drain), the
//! health flags the admin server reports, and the TLS configurations of both sides.

use crate::cluster::ClusterView;
use crate::config::Config;
use crate::contact_points::ContactPoints;
use crate::flavor::Flavors;
use crate::lifecycle::Lifecycle;
use crate::limit::Refusals;
use crate::metrics::Metrics;
use crate::shapes::Shapes;
use crate::tls::ClientTls;
use crate::topology::Topology;
use crate::upstream::UpstreamTls;
use autoprep_cache::{CacheConfig, PreparedCache};
use autoprep_protocol::types::encode::EncodeOptions;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::OnceLock;

/// Shared by all sessions (behind an `Arc`).
#[derive(Debug)]
pub struct Context {
    pub cfg: Config,
    /// The upstream contact points (`--upstream`).
    pub upstreams: ContactPoints,
    /// What drivers are told about the cluster (`--advertise-address`).
    pub topology: Topology,
    pub cache: PreparedCache,
    /// The cluster as routing sees it (`--routing`).
    pub cluster: ClusterView,
    pub encode: EncodeOptions,
    /// Which server each contact point is (ScyllaDB or Cassandra), learned from SUPPORTED.
    pub flavors: Flavors,
    pub metrics: Metrics,
    /// Statistics of the most executed statement shapes (`/shapes`).
    pub shapes: Shapes,
    /// Every how many executions of a shape one is a control one (`--control-fraction`; see
    /// [`crate::control`]).
    pub control_period: Option<u64>,
    /// The statements clients prepared with literals inline (`--prepare-literals`).
    pub literals: crate::literal_prepare::LiteralStatements,
    /// Set while the data listener accepts connections (`/ready` needs it).
    pub listening: AtomicBool,
    /// Connection admission and the drain phase (`/ready` answers 503 once draining).
    pub lifecycle: Lifecycle,
    /// Connections refused beyond the limit.
    pub refusals: Refusals,
    /// `exclude`, swapped whole on SIGHUP (see [`crate::reload`]).
    exclude: arc_swap::ArcSwap<Vec<String>>,
    /// Where the admin server listens, once it does.
    pub admin_addr: OnceLock<SocketAddr>,
    /// TLS toward the clients (`--tls-cert`), if on.
    pub client_tls: Option<ClientTls>,
    /// TLS toward the upstream node (`--upstream-tls`), if on.
    pub upstream_tls: Option<UpstreamTls>,
}

impl Context {
    /// Builds the shared state from a validated configuration.
    pub fn new(cfg: Config) -> anyhow::Result<Context> {
        let server_time_zone = match &cfg.server_time_zone {
            Some(z) => Some(z.parse().map_err(|_| {
                anyhow::anyhow!(
                    "--server-time-zone: expected Z, UTC or an offset like +02:00, got {z:?}"
                )
            })?),
            None => None,
        };
        let upstreams = ContactPoints::parse(&cfg.upstream)?;
        let topology = Topology::new(&cfg.listen, cfg.advertise_address.as_deref())?;
        let client_tls = ClientTls::from_config(&cfg)?;
        let upstream_tls = UpstreamTls::from_config(&cfg)?;
        if cfg.upstream_tls_insecure_skip_verify {
            tracing::warn!("--upstream-tls-insecure-skip-verify: the upstream node's certificate is NOT verified; anyone on the path can read and change the traffic (development only)");
        }
        let cache = PreparedCache::new(CacheConfig {
            max_entries: cfg.cache_entries,
            max_bytes: cfg.cache_bytes,
            admission_threshold: cfg.admission_threshold,
            ..CacheConfig::default()
        });
        Ok(Context {
            flavors: Flavors::new(upstreams.len()),
            upstreams,
            topology,
            cache,
            cluster: ClusterView::new(cfg.routing && cfg.rewrite, cfg.routing_local_dc.clone()),
            encode: EncodeOptions { server_time_zone },
            metrics: Metrics::default(),
            shapes: Shapes::default(),
            literals: crate::literal_prepare::LiteralStatements::new(cfg.literal_statements_bytes),
            control_period: crate::control::period(cfg.control_fraction),
            listening: AtomicBool::new(false),
            lifecycle: Lifecycle::new(cfg.max_client_connections),
            refusals: Refusals::default(),
            exclude: arc_swap::ArcSwap::from_pointee(cfg.exclude.clone()),
            admin_addr: OnceLock::new(),
            client_tls,
            upstream_tls,
            cfg,
        })
    }
}

impl Context {
    /// Whether a statement of normalized text `shape` is never rewritten (`exclude`).
    pub fn is_excluded(&self, shape: &str) -> bool {
        let patterns = self.exclude.load();
        patterns.iter().any(|e| shape.contains(e.as_str()))
    }

    /// Puts a new `exclude` list in force (SIGHUP).
    pub fn set_exclude(&self, patterns: Vec<String>) {
        self.exclude.store(std::sync::Arc::new(patterns));
    }
}
