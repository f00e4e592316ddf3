//! The `autoprep` binary: parses the configuration, sets up logging, starts the admin server
//! (when `--admin` is set) and runs the listener until SIGINT or SIGTERM.

use anyhow::Context;
use autoprep::config::Config;
use clap::Parser;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;

fn main() -> anyhow::Result<()> {
    let cfg = Config::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_new(&cfg.log).context("invalid --log filter")?)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the runtime")?;
    // Configuration errors (contact points, advertise address) before anything is bound.
    let ctx = Arc::new(autoprep::context::Context::new(cfg)?);
    rt.block_on(async move {
        let cfg = &ctx.cfg;
        let listener = tokio::net::TcpListener::bind(&cfg.listen)
            .await
            .with_context(|| format!("bind {}", cfg.listen))?;
        ctx.topology.bound(listener.local_addr()?);
        let advertised = ctx.topology.advertised().map(|a| a.addr.to_string());
        tracing::info!(
            listen = %listener.local_addr()?,
            upstream = %cfg.upstream,
            advertised = advertised.as_deref().unwrap_or("-"),
            rewrite = cfg.rewrite,
            "autoprep listening"
        );
        if let Some(admin) = ctx.cfg.admin.clone() {
            // Its own thread and runtime: it answers even when this runtime is saturated.
            autoprep::admin::spawn(&admin, ctx.clone())?;
        }
        autoprep::server::run(listener, ctx, shutdown_signal()).await;
        Ok(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
