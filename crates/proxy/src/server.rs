//! The listener: accepts client connections and runs a session for each.

use crate::admin;
use crate::config::Config;
use crate::context::Context;
use crate::session;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::{info, warn};

/// Accepts connections on `listener` until `shutdown` completes.
pub async fn run(listener: TcpListener, ctx: Arc<Context>, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    if let Ok(local) = listener.local_addr() {
        ctx.topology.bound(local);
    }
    ctx.listening.store(true, Ordering::Relaxed);
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    next_id += 1;
                    tokio::spawn(session::run(next_id, sock, ctx.clone()));
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = &mut shutdown => {
                ctx.listening.store(false, Ordering::Relaxed);
                info!("listener stopped");
                return;
            }
        }
    }
}

/// Binds `cfg.listen` and serves in the background on the current runtime; returns the bound
/// address. Starts the admin server too when `cfg.admin` is set (its address is then in
/// `ctx.admin_addr`). Used by tests and benchmarks.
pub async fn spawn(cfg: Config) -> anyhow::Result<(SocketAddr, Arc<Context>)> {
    let listener = TcpListener::bind(&cfg.listen).await?;
    let addr = listener.local_addr()?;
    let ctx = Arc::new(Context::new(cfg)?);
    ctx.topology.bound(addr);
    // Bound is listening (the kernel queues connections), even before `run` first polls.
    ctx.listening.store(true, Ordering::Relaxed);
    if let Some(admin) = ctx.cfg.admin.clone() {
        admin::spawn(&admin, ctx.clone())?;
    }
    tokio::spawn(run(listener, ctx.clone(), std::future::pending()));
    Ok((addr, ctx))
}
