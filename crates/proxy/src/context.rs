//! What every session of the process shares: the configuration, the prepared-statement cache,
//! the encoder options and the metrics.

use crate::config::Config;
use crate::metrics::Metrics;
use autoprep_cache::{CacheConfig, PreparedCache};
use autoprep_protocol::types::encode::EncodeOptions;

/// Shared by all sessions (behind an `Arc`).
#[derive(Debug)]
pub struct Context {
    pub cfg: Config,
    pub cache: PreparedCache,
    pub encode: EncodeOptions,
    pub metrics: Metrics,
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
        let cache = PreparedCache::new(CacheConfig {
            max_entries: cfg.cache_entries,
            max_bytes: cfg.cache_bytes,
            admission_threshold: cfg.admission_threshold,
            ..CacheConfig::default()
        });
        Ok(Context {
            cache,
            encode: EncodeOptions { server_time_zone },
            metrics: Metrics::default(),
            cfg,
        })
    }
}
