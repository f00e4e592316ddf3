//! The listener: accepts client connections and runs a session for each, up to the connection
//! limit (beyond it, [`crate::limit::Refusals::refuse`]); it stops, closing its socket, when the drain starts.

use crate::admin;
use crate::config::Config;
use crate::context::Context;
use crate::handover;
use crate::lifecycle::Phase;
use crate::session;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

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

/// Takes over client connections that draining processes hand over on `listener` (see
/// [`crate::handover`]) until this process drains in turn, then closes it.
pub async fn take_over(listener: tokio::net::UnixListener, ctx: Arc<Context>) {
    let draining = ctx.lifecycle.reached(Phase::Draining);
    tokio::pin!(draining);
    // Ids of their own, far above the listener's, for the connection spans.
    let mut next_id = 1u64 << 48;
    loop {
        tokio::select! {
            biased;
            () = &mut draining => {
                drop(listener);
                return;
            }
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    next_id += 1;
                    tokio::spawn(take_one(next_id, sock, ctx.clone()));
                }
                Err(e) => {
                    warn!(error = %e, "hand-over socket: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// One message on the hand-over socket: a probe, answered while this process serves, or a
/// client connection, acknowledged once admitted and then served.
async fn take_one(id: u64, mut sock: tokio::net::UnixStream, ctx: Arc<Context>) {
    // A state carries at most a frame's first part besides a few small bodies.
    let max = ctx.cfg.max_frame_bytes.saturating_add(1 << 20);
    match handover::receive(&mut sock, max).await {
        Ok(handover::Received::Probe) => {
            if !ctx.lifecycle.is_draining() {
                let _ = handover::ack(&mut sock).await;
            }
        }
        Ok(handover::Received::Statements(statements)) => {
            if ctx.lifecycle.is_draining() {
                return;
            }
            let n = statements.len();
            for s in statements {
                ctx.cluster.client_prepared(s);
            }
            crate::metrics::Metrics::add(&ctx.metrics.handover_statements, n as u64);
            debug!(
                statements = n,
                "statements clients prepared, from the draining process"
            );
            let _ = handover::ack(&mut sock).await;
        }
        Ok(handover::Received::Connection(fd, state)) => {
            // Not admitted (draining, or at the limit): no acknowledgement, and the draining
            // process closes the connection.
            if ctx.lifecycle.is_draining() {
                return;
            }
            let Some(admitted) = ctx.lifecycle.admit() else {
                warn!("a connection handed over is beyond the connection limit; not taken");
                return;
            };
            let client = std::net::TcpStream::from(fd);
            let client = match client
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpStream::from_std(client))
            {
                Ok(c) => c,
                Err(e) => {
                    warn!(error = %e, "a socket handed over cannot be used; not taken");
                    return;
                }
            };
            if handover::ack(&mut sock).await.is_err() {
                return;
            }
            drop(sock);
            session::adopt(id, client, state, ctx).await;
            drop(admitted);
        }
        Err(e) => warn!(error = %e, "hand-over socket: unreadable message"),
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
    if let Some(path) = &ctx.cfg.handover_socket {
        tokio::spawn(take_over(handover::listen(path)?, ctx.clone()));
    }
    tokio::spawn(run(listener, ctx.clone()));
    Ok((addr, ctx))
}
