//! What every session of the process shares: the configuration, the upstream contact points,
//! the topology shown to drivers, the rewrite's parts (the prepared-statement cache, the
//! encoder options, per-shape statistics: see [`Rewriter`]), the metrics, the lifecycle
//! (connection admission and drain), the health flags the admin server reports, and the TLS
//! configurations of both sides. Only the session, the server, the admin server and the reload
//! read it whole; every other part receives the pieces it uses.

use crate::cluster::ClusterView;
use crate::config::Config;
use crate::contact_points::ContactPoints;
use crate::lifecycle::Lifecycle;
use crate::limit::Refusals;
use crate::metrics::Metrics;
use crate::rewrite::Rewriter;
use crate::tls::ClientTls;
use crate::topology::Topology;
use crate::upstream::UpstreamTls;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

/// Shared by all sessions (behind an `Arc`).
#[derive(Debug)]
pub struct Context {
    pub cfg: Config,
    /// The upstream contact points (`--upstream`).
    pub upstreams: ContactPoints,
    /// What drivers are told about the cluster (`--advertise-address`).
    pub topology: Arc<Topology>,
    /// The cluster as routing sees it (`--routing`).
    pub cluster: Arc<ClusterView>,
    pub metrics: Arc<Metrics>,
    /// The rewrite's parts: the shape cache, the encoder, the shape statistics...
    pub rewriter: Arc<Rewriter>,
    /// Set while the data listener accepts connections (`/ready` needs it).
    pub listening: AtomicBool,
    /// Connection admission and the drain phase (`/ready` answers 503 once draining).
    pub lifecycle: Lifecycle,
    /// The write sides of client sockets handed over at a drain, kept open and untouched
    /// until the process exits (see [`crate::handover::Kept`]).
    pub kept: crate::handover::Kept,
    /// Connections refused beyond the limit.
    pub refusals: Refusals,
    /// Where the admin server listens, once it does.
    pub admin_addr: OnceLock<SocketAddr>,
    /// TLS toward the clients (`--tls-cert`), if on.
    pub client_tls: Option<ClientTls>,
    /// TLS toward the upstream node (`--upstream-tls`), if on.
    pub upstream_tls: Option<UpstreamTls>,
    /// OpenTelemetry request spans (`--tracing-endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT`),
    /// off unless one is set.
    pub tracing: Arc<crate::otel::Tracing>,
}

impl Context {
    /// Builds the shared state from a validated configuration.
    pub fn new(cfg: Config) -> anyhow::Result<Context> {
        let upstreams = ContactPoints::parse(&cfg.upstream)?;
        let topology = Arc::new(Topology::new(
            &cfg.listen,
            cfg.advertise_address.as_deref(),
        )?);
        let client_tls = ClientTls::from_config(&cfg)?;
        let upstream_tls = UpstreamTls::from_config(&cfg)?;
        if cfg.upstream_tls_insecure_skip_verify {
            tracing::warn!("--upstream-tls-insecure-skip-verify: the upstream node's certificate is NOT verified; anyone on the path can read and change the traffic (development only)");
        }
        let metrics = Arc::new(Metrics::default());
        let cluster = Arc::new(ClusterView::new(
            cfg.routing && cfg.rewrite,
            cfg.routing_local_dc.clone(),
        ));
        let rewriter = Arc::new(Rewriter::new(
            &cfg,
            upstreams.len(),
            metrics.clone(),
            cluster.clone(),
        )?);
        let tracing = match crate::otel::Settings::resolve(&cfg.tracing(), |k| {
            std::env::var(k).ok()
        })
        .map_err(anyhow::Error::msg)?
        {
            Some(s) => {
                tracing::info!(endpoint = %s.endpoint, protocol = ?s.protocol, ratio = s.sampler.ratio, "exporting request spans");
                crate::otel::Tracing::start(&s)?
            }
            None => crate::otel::Tracing::off(),
        };
        Ok(Context {
            upstreams,
            topology,
            cluster,
            metrics,
            rewriter,
            listening: AtomicBool::new(false),
            lifecycle: Lifecycle::new(cfg.max_client_connections),
            kept: crate::handover::Kept::default(),
            refusals: Refusals::default(),
            admin_addr: OnceLock::new(),
            client_tls,
            upstream_tls,
            tracing: Arc::new(tracing),
            cfg,
        })
    }
}
