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
//!
//! When the drain hands connections over (see [`crate::handover`]), a plain-TCP connection's
//! client reader stops at once, between two reads (no request half-handled: the bytes of one
//! not yet whole stay in its reader), the upstream reader goes on until every forwarded request
//! is answered (at most the grace period), the client's outbox writes everything, and the
//! client socket goes to the next process with the connection's state. There, [`adopt`] opens
//! a home by replaying the handshake, keyspace and registrations (as `rehome` does) and serves
//! the same connection.

use conn::{Conn, Place};
use end::End;
use pending::Pending;
use request::client_to_upstream;
use response::upstream_to_client;

use crate::context::Context;
use crate::handover::{self, Handed};
use crate::lifecycle;
use crate::metrics::Metrics;
use crate::wire::FrameReader;
use crate::writer::{Out, Outbox};
use crate::{replica, socket, tls, upstream};
use autoprep_protocol::envelope::Direction;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::either::Either;
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

/// Runs a client connection taken over from a draining process (see [`crate::handover`]) to
/// completion: a home is opened by replaying its handshake, keyspace and event registrations,
/// and the connection is served from where the other process left it.
pub async fn adopt(id: u64, client: TcpStream, handed: Handed, ctx: Arc<Context>) {
    let peer = client
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let span = tracing::info_span!("conn", id, peer = %peer, adopted = true);
    Metrics::inc(&ctx.metrics.connections_total);
    Metrics::inc(&ctx.metrics.client_connections);
    adopted(client, handed, &ctx).instrument(span).await;
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
    // Only a plain TCP connection can be handed over: a TLS session's state stays here.
    let handable = matches!(client, Either::Left(_));
    let (client_rd, client_wr) = socket::into_split(client);
    let (upstream_rd, upstream_wr) = socket::into_split(upstream);
    let sent = Some(ctx.metrics.bytes_to_clients.clone());
    let (to_client, client_task) = Outbox::new(client_wr, sent);
    let (to_upstream, upstream_task) = Outbox::new(upstream_wr, None);
    let client_writer = tokio::spawn(client_task.in_current_span());
    let upstream_writer = tokio::spawn(upstream_task.in_current_span());
    let place = Place {
        node: picked.node,
        local,
        home,
        client: to_client.clone(),
        upstream: to_upstream,
    };
    let first = Arc::new(Conn::open(ctx, place, handable));
    let client_frames = FrameReader::new(Direction::Request, cfg.max_frame_bytes);
    let upstream_frames = FrameReader::new(Direction::Response, cfg.max_frame_bytes);
    let parts = Parts {
        first,
        client_rd,
        client_frames,
        to_client,
        client_writer,
        upstream_rd,
        upstream_frames,
        upstream_writer,
    };
    go_on(ctx, parts).await;
}

/// The connection taken over: its home opened, its state and its reader restored, served.
async fn adopted(client: TcpStream, handed: Handed, ctx: &Arc<Context>) {
    let cfg = &ctx.cfg;
    let local = client.local_addr().ok();
    let _ = client.set_nodelay(true);
    let Handed {
        version,
        compression,
        framing,
        lz4_requested,
        use_warning_given,
        keyspace,
        startup,
        auth,
        registered,
        unread,
    } = handed;
    let mut state = state::State {
        lz4_requested,
        use_warning_given,
        keyspace: keyspace.map(Arc::from),
        registered,
        ..state::State::default()
    };
    state.handshake = replica::Handshake {
        version: Some(version),
        startup: Some(startup),
        auth,
        lz4: lz4_requested,
        complete: true,
    };
    let Some((home, node)) = rehome::open(ctx, None, &state).await else {
        Metrics::inc(&ctx.metrics.handover_adopt_failed);
        warn!("no node took the handshake of a connection taken over; closing it");
        return;
    };
    let replica::Replayed {
        out,
        socket: upstream_rd,
        frames: upstream_frames,
        writer: upstream_writer,
        peer,
    } = home;
    if let Some(peer) = peer {
        ctx.upstreams.connected(node, peer);
        ctx.metrics.homed_on(peer);
    }
    let (client_rd, client_wr) = socket::into_split(socket::plain(client));
    let sent = Some(ctx.metrics.bytes_to_clients.clone());
    let (to_client, client_task) = Outbox::new(client_wr, sent);
    if let Some(lz4) = framing {
        // The client's side is framed already: so is everything written to it.
        let _ = to_client.send(Out::StartFraming { lz4 }).await;
    }
    let client_writer = tokio::spawn(client_task.in_current_span());
    let place = Place {
        node: u32::try_from(node).unwrap_or(u32::MAX),
        local,
        home: peer,
        client: to_client.clone(),
        upstream: out,
    };
    let first = Arc::new(Conn::open(ctx, place, true));
    {
        let mut st = first.lock();
        st.lz4_requested = state.lz4_requested;
        st.use_warning_given = state.use_warning_given;
        st.keyspace = state.keyspace.take();
        st.registered = std::mem::take(&mut state.registered);
        st.handshake = std::mem::take(&mut state.handshake);
    }
    first.negotiate(compression);
    if let Some(lz4) = framing {
        let _ = first.client_framing.set(lz4);
    }
    first
        .ready
        .store(true, std::sync::atomic::Ordering::Release);
    Metrics::inc(&ctx.metrics.handover_adopted);
    debug!(home = ?peer, "serving a connection taken over from a draining process");
    let client_frames =
        FrameReader::resume(Direction::Request, cfg.max_frame_bytes, &unread, framing);
    let parts = Parts {
        first,
        client_rd,
        client_frames,
        to_client,
        client_writer,
        upstream_rd,
        upstream_frames,
        upstream_writer,
    };
    go_on(ctx, parts).await;
}

/// What a connection is served with once its home is open.
struct Parts {
    first: Arc<Conn>,
    client_rd: socket::ReadHalf,
    /// The client's frames (with bytes read already when the connection was taken over).
    client_frames: FrameReader,
    to_client: Outbox,
    client_writer: JoinHandle<()>,
    upstream_rd: socket::ReadHalf,
    upstream_frames: FrameReader,
    upstream_writer: JoinHandle<()>,
}

/// Serves the connection until it ends: the two readers, a new home whenever the home fails,
/// and at a drain, its close or its hand-over to the next process.
async fn go_on(ctx: &Arc<Context>, parts: Parts) {
    let Parts {
        first,
        mut client_rd,
        mut client_frames,
        to_client,
        client_writer,
        upstream_rd,
        upstream_frames,
        mut upstream_writer,
    } = parts;
    // The home the session is on: a new one when the home node fails (see `rehome`).
    let mut conn = first.clone();
    // Set when the client reader stopped for a hand-over and every request it forwarded was
    // answered: the connection is at a request boundary.
    let mut at_boundary = false;

    // A block, so that both readers are gone at its end.
    let end = {
        let client_side = client_to_upstream(&mut client_rd, &mut client_frames, first);
        tokio::pin!(client_side);
        let mut upstream_rd = upstream_rd;
        let mut frames = upstream_frames;
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
                    // then close, or hand the connection over (then everything in flight
                    // must be answered: up to the grace period).
                    End::Closing => {
                        conn.client_stopped.cancel();
                        let handing = ctx.lifecycle.handing_over() && !ctx.lifecycle.is_closing();
                        let wait = if handing {
                            Duration::from_secs(ctx.cfg.drain_grace_seconds)
                                .max(lifecycle::CLOSE_WAIT)
                        } else {
                            lifecycle::CLOSE_WAIT
                        };
                        break match tokio::time::timeout(wait, &mut upstream_side).await {
                            Ok(End::Closing) => {
                                at_boundary = handing;
                                End::Closing
                            }
                            Ok(other) => other,
                            Err(_) => End::Closing,
                        };
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
    let flushed = tokio::time::timeout(FLUSH_GRACE, client_writer).await;
    upstream_writer.abort();
    let handed = at_boundary
        && flushed.is_ok()
        && to_client.written_all()
        && hand_over(ctx, &conn, &client_rd, &client_frames).await;
    if handed {
        // The next process serves the socket: this one must not shut its write side down,
        // which dropping the last handle of the write half would do (tokio's
        // `OwnedWriteHalf`). Kept until the process exits; the read half may go.
        ctx.kept.keep(Box::new(to_client));
        Metrics::inc(&ctx.metrics.drain_handed_over);
        debug!("client connection handed over to the next process");
        return;
    }
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
        End::Closing => {
            Metrics::inc(&ctx.metrics.drain_closed);
            if at_boundary {
                info!("drain: the connection could not be handed over; closed")
            } else {
                info!("drain grace period over; connection closed")
            }
        }
    }
}

/// Passes the client socket and the connection's state to the process listening on the
/// hand-over socket; whether it took them. Not when the connection is TLS, its handshake is
/// not complete (nothing to replay), or v5 segments hold part of a request.
async fn hand_over(
    ctx: &Context,
    conn: &Conn,
    client_rd: &socket::ReadHalf,
    frames: &FrameReader,
) -> bool {
    let (Some(path), Either::Left(rd)) = (ctx.cfg.handover_socket.as_deref(), client_rd) else {
        return false;
    };
    let Some(unread) = frames.carried() else {
        debug!("part of a request is inside a v5 segment; not handed over");
        return false;
    };
    let state = {
        let st = conn.lock();
        let hs = &st.handshake;
        let (true, Some(version), Some(startup)) = (hs.complete, hs.version, &hs.startup) else {
            debug!("the handshake is not complete; not handed over");
            return false;
        };
        Handed {
            version,
            compression: conn.wire().compression,
            framing: conn.client_framing.get().copied(),
            lz4_requested: st.lz4_requested,
            use_warning_given: st.use_warning_given,
            keyspace: st.keyspace.as_deref().map(str::to_owned),
            startup: startup.clone(),
            auth: hs.auth.clone(),
            registered: st.registered.clone(),
            unread: unread.to_vec(),
        }
    };
    match handover::send(path, rd.as_ref().as_fd(), &state).await {
        Ok(()) => true,
        Err(e) => {
            warn!(error = %e, "the next process did not take the client connection; closing it");
            false
        }
    }
}
