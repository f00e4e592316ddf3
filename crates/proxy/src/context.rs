//! What every session of the process shares: the configuration, the upstream contact points,
//! the topology shown to drivers, the prepared-statement cache, the encoder options, the
//! metrics and per-shape statistics, and the health flags the admin server reports.

use crate::config::Config;
use crate::contact_points::ContactPoints;
use crate::metrics::Metrics;
use crate::shapes::Shapes;
use crate::topology::Topology;
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
    pub encode: EncodeOptions,
    pub metrics: Metrics,
    /// Statistics of the most executed statement shapes (`/shapes`).
    pub shapes: Shapes,
    /// Set while the data listener accepts connections (`/ready` needs it).
    pub listening: AtomicBool,
    /// Set when the proxy starts draining (SIGTERM): `/ready` answers 503 from then on.
    pub draining: AtomicBool,
    /// Where the admin server listens, once it does.
    pub admin_addr: OnceLock<SocketAddr>,
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
        let cache = PreparedCache::new(CacheConfig {
            max_entries: cfg.cache_entries,
            max_bytes: cfg.cache_bytes,
            admission_threshold: cfg.admission_threshold,
            ..CacheConfig::default()
        });
        Ok(Context {
            upstreams,
            topology,
            cache,
            encode: EncodeOptions { server_time_zone },
            metrics: Metrics::default(),
            shapes: Shapes::default(),
            listening: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            admin_addr: OnceLock::new(),
            cfg,
        })
    }
}
