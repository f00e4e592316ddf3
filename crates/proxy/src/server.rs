//! The listener: accepts client connections and runs a session for each, up to the connection
//! limit (beyond it, [`crate::limit::Refusals::refuse`]); it stops, closing its socket, when the drain starts.

use crate::admin;
use crate::config::Config;
use crate::context::Context;
use crate::lifecycle::Phase;
use crate::session;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::{info, warn};

/// Accepts connections on `listener` until the drain starts (see [`crate::lifecycle`]), then
/// drops the listener so that new connections are refused.
pub async fn run(listener: TcpListener, ctx: Arc<Context>) {
    let draining = ctx.lifecycle.reached(Phase::Draining);
    tokio::pin!(draining);
    if let Ok(local) = listener.local_addr() {
        ctx.topology.bound(local);
    }
    ctx.listening.store(true, Ordering::Relaxed);
    tokio::spawn(crate::saving::sampler::run(
        ctx.rewriter.switchback.clone(),
        nodes_to_read(ctx.clone()),
    ));
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            // A connection that arrives with the signal is not accepted any more.
            biased;
            () = &mut draining => {
                ctx.listening.store(false, Ordering::Relaxed);
                drop(listener);
                info!("listener closed: no new client connections");
                return;
            }
            accepted = listener.accept() => match accepted {
                Ok((sock, peer)) => match ctx.lifecycle.admit() {
                    Some(admitted) => {
                        next_id += 1;
                        let ctx = ctx.clone();
                        let id = next_id;
                        tokio::spawn(async move {
                            session::run(id, sock, ctx).await;
                            drop(admitted);
                        });
                    }
                    None => {
                        let limit = ctx.lifecycle.limit();
                        ctx.refusals.refuse(sock, peer, limit, &ctx.metrics)
                    }
                },
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// The nodes whose CPU the estimate of server CPU saved reads: the cluster view's, or else the
/// contact points' (resolved once).
fn nodes_to_read(ctx: Arc<Context>) -> crate::saving::sampler::Nodes {
    let contact: Vec<SocketAddr> = ctx
        .upstreams
        .addrs()
        .filter_map(|a| std::net::ToSocketAddrs::to_socket_addrs(a).ok()?.next())
        .collect();
    Box::new(move || match ctx.cluster.current() {
        Some(view) if view.node_count() > 0 => view.addrs(),
        _ => contact.clone(),
    })
}

/// Binds `cfg.listen` and serves in the background on the current runtime; returns the bound
/// address. Starts the admin server too when `cfg.admin` is set (its address is then in
/// `ctx.admin_addr`). `ctx.lifecycle.start_drain()` stops it. Used by tests and benchmarks.
pub async fn spawn(cfg: Config) -> anyhow::Result<(SocketAddr, Arc<Context>)> {
    let listener = TcpListener::bind(&cfg.listen).await?;
    let addr = listener.local_addr()?;
    let ctx = Arc::new(Context::new(cfg)?);
    ctx.topology.bound(addr);
    // Bound is listening (the kernel queues connections), even before `run` first polls.
    ctx.listening.store(true, Ordering::Relaxed);
    if let Some(admin) = ctx.cfg.admin.clone() {
        admin::spawn(&admin, ctx.clone(), None)?;
    }
    tokio::spawn(run(listener, ctx.clone()));
    Ok((addr, ctx))
}
