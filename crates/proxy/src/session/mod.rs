//! One client connection and its own upstream connection (its home).
//!
//! Two readers run concurrently in the connection's task: client → upstream takes a fresh
//! upstream stream id for every request, upstream → client maps each response back to the
//! client's stream id. Each socket has an outbox (see [`crate::writer`]): what a reader pushes
//! while handling one read is written when that read is handled, from this task when the
//! socket takes it. v5 framing starts on both sides once the server answers STARTUP with READY
//! or AUTHENTICATE.
//!
//! When the home connection fails (the node died or closed it), the client connection is kept
//! and moves to a new home on another node, the client's handshake, keyspace and event
//! registrations replayed there (see [`rehome`]); only when no node can be reached is it closed.
//!
//! At the end of a drain's grace period (see [`crate::lifecycle`]) the client reader stops
//! reading, the upstream reader goes on until every forwarded request is answered (at most
//! [`lifecycle::CLOSE_WAIT`]), and the connection closes.

use conn::{Conn, Place};
use end::End;
use pending::Pending;
use request::client_to_upstream;
use response::upstream_to_client;

use crate::context::Context;
use crate::lifecycle;
use crate::metrics::Metrics;
use crate::wire::FrameReader;
use crate::writer::Outbox;
use crate::{socket, tls, upstream};
use autoprep_protocol::envelope::Direction;

use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tracing::{debug, info, warn, Instrument};

mod answer;
mod classify;
mod conn;
mod end;
mod pending;
mod rehome;
mod request;
mod response;
mod routing;
mod send;
mod state;

/// How long the client writer may take to flush a final answer after the session ends.
const FLUSH_GRACE: Duration = Duration::from_secs(5);

/// A home that fails within this long of the move to it ends the session (see [`rehome`]).
const REHOME_PAUSE: Duration = Duration::from_secs(1);

/// Runs one client connection to completion.
pub async fn run(id: u64, client: TcpStream, ctx: Arc<Context>) {
    let peer = client
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let span = tracing::info_span!("conn", id, peer = %peer);
    Metrics::inc(&ctx.metrics.connections_total);
    Metrics::inc(&ctx.metrics.client_connections);
    serve(client, &ctx).instrument(span).await;
    ctx.metrics
        .client_connections
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
}

async fn serve(client: TcpStream, ctx: &Arc<Context>) {
    let cfg = &ctx.cfg;
    let local = client.local_addr().ok();
    let _ = client.set_nodelay(true);
    let client = match tls::accept(ctx.client_tls.as_ref(), client).await {
        Ok(s) => s,
        // A connection closed before its first byte (a TCP health check, a port scan) is
        // not worth a warning.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            debug!(error = %e, "client closed the connection before the TLS handshake");
            return;
        }
        Err(e) => {
            warn!(error = %e, "client TLS handshake failed; connection closed");
            return;
        }
    };
    let place = |addr| ctx.cluster.place(addr, cfg.routing_remote_failover);
    let (upstream, picked) = match upstream::connect(
        &ctx.upstreams,
        &ctx.cluster.homing(&place),
        ctx.upstream_tls.as_ref(),
        Duration::from_millis(cfg.connect_timeout_ms),
        &ctx.metrics.upstream_connect_failures,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "closing the client connection");
            return;
        }
    };
    debug!(node = picked.node, upstream = %picked.addr, "connected upstream");
    let home = socket::peer_addr(&upstream);
    if let Some(home) = home {
        ctx.upstreams.connected(picked.node as usize, home);
        ctx.metrics.homed_on(home);
    }
    let (client_rd, client_wr) = socket::into_split(client);
    let (upstream_rd, upstream_wr) = socket::into_split(upstream);
    let sent = Some(ctx.metrics.bytes_to_clients.clone());
    let (to_client, client_task) = Outbox::new(client_wr, sent);
    let (to_upstream, upstream_task) = Outbox::new(upstream_wr, None);
    let client_writer = tokio::spawn(client_task.in_current_span());
    let mut upstream_writer = tokio::spawn(upstream_task.in_current_span());
    let place = Place {
        node: picked.node,
        local,
        home,
        client: to_client.clone(),
        upstream: to_upstream,
    };
    let first = Arc::new(Conn::open(ctx, place));
    // The home the session is on: a new one when the home node fails (see `rehome`).
    let mut conn = first.clone();

    // A block, so that both readers are gone at its end.
    let end = {
        let client_side = client_to_upstream(client_rd, first);
        tokio::pin!(client_side);
        let mut upstream_rd = upstream_rd;
        let mut frames = FrameReader::new(Direction::Response, cfg.max_frame_bytes);
        let mut rehomed_at: Option<std::time::Instant> = None;
        loop {
            let end = {
                let upstream_side = upstream_to_client(upstream_rd, frames, &conn);
                tokio::pin!(upstream_side);
                let end = tokio::select! {
                    end = &mut client_side => end,
                    end = &mut upstream_side => end,
                };
                match end {
                    // The client reader stopped: deliver the answers to what it forwarded,
                    // then close.
                    End::Closing => {
                        conn.client_stopped.cancel();
                        break tokio::time::timeout(lifecycle::CLOSE_WAIT, &mut upstream_side)
                            .await
                            .unwrap_or(End::Closing);
                    }
                    other => other,
                }
            };
            // The home failed: the client connection moves to a new one while its reader
            // waits (it is not polled meanwhile), unless the session is ending anyway, or its
            // last new home failed at once (a node that ends every connection: no loop).
            let ending = conn.closing.is_cancelled() || conn.client_stopped.is_cancelled();
            let again_at_once = rehomed_at.is_some_and(|at| at.elapsed() < REHOME_PAUSE);
            if !end.home_failed() || ending || again_at_once {
                break end;
            }
            rehomed_at = Some(std::time::Instant::now());
            debug!(error = ?end, "home connection failed; looking for a new home");
            match rehome::rehome(ctx, &conn).await {
                Some(new) => {
                    upstream_writer.abort();
                    upstream_writer = new.writer;
                    conn = new.conn;
                    upstream_rd = new.socket;
                    frames = new.frames;
                }
                None => break end,
            }
        }
    };
    match &end {
        End::ClientClosed => debug!("client closed the connection"),
        End::UpstreamClosed => {
            info!("upstream closed the connection; closing the client connection")
        }
        End::ClientIo(e) => debug!(error = %e, "client connection failed"),
        End::UpstreamIo(e) => {
            warn!(error = %e, "upstream connection failed; closing the client connection")
        }
        End::VersionRefused(e) => {
            debug!(error = %e, "protocol version refused (driver negotiation); answered and closed")
        }
        End::BadClientInput(e) => {
            warn!(error = %e, "malformed input from the client; answered and closed the connection")
        }
        End::BadUpstreamInput(e) => {
            warn!(error = %e, "malformed data from upstream; closing the client connection")
        }
        End::HomeGone => {
            warn!("upstream connection failed; closing the client connection")
        }
        End::WriterGone => debug!("a socket writer stopped"),
        End::Closing => info!("drain grace period over; connection closed"),
    }
    // PREPAREs of this connection still in flight will never be answered: let other
    // connections prepare those shapes at once; a cluster-view refresh it carried is over.
    for p in conn.lock().streams.in_flight() {
        match p {
            Pending::Prepare { hash, .. } => ctx.rewriter.cache.abandoned(conn.node, *hash),
            Pending::ClusterRead(_) => ctx.cluster.abandon_refresh(),
            _ => {}
        }
    }
    conn.links.close_all();
    // Whatever still waits for a new home gives up: there is none.
    conn.hand_over(None);
    // The readers are gone: the writers write what is left and stop.
    to_client.close();
    conn.upstream.close();
    let _ = tokio::time::timeout(FLUSH_GRACE, client_writer).await;
    upstream_writer.abort();
}
