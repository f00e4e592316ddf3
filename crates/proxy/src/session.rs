//! One client connection and its own upstream connection.
//!
//! Two readers run concurrently in the connection's task: client → upstream takes a fresh
//! upstream stream id for every request, upstream → client maps each response back to the
//! client's stream id. Each socket has its own writer task (see [`crate::writer`]). v5 framing
//! starts on both sides once the server answers STARTUP with READY or AUTHENTICATE.

use crate::config::Config;
use crate::protocol_error;
use crate::streams::{Pending, StreamTable};
use crate::writer::{self, Out};
use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, EnvelopeError, Opcode, ProtocolVersion, StreamId,
};
use autoprep_protocol::message::startup::StartupView;
use autoprep_protocol::segment::{FramedDecoder, SegmentDecoder, SegmentError};
use bytes::BytesMut;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};
use tracing::{debug, info, warn, Instrument};

/// Envelopes queued toward one socket before a reader waits (backpressure).
const CHANNEL_DEPTH: usize = 1024;

/// How long the client writer may take to flush a final answer after the session ends.
const FLUSH_GRACE: Duration = Duration::from_secs(5);

/// State both readers of a connection share.
#[derive(Debug, Default)]
struct State {
    streams: StreamTable,
    /// STARTUP asked for LZ4 (used for v5 segment compression).
    lz4_requested: bool,
    /// Set once the client side is framed (v5), with whether segments are LZ4-compressed.
    client_framing: Option<bool>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled whenever an upstream stream id is released.
    freed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another reader panicked; the state is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why a session ended.
#[derive(Debug)]
enum End {
    ClientClosed,
    UpstreamClosed,
    ClientIo(std::io::Error),
    UpstreamIo(std::io::Error),
    /// The client asked for a protocol version the proxy does not speak (drivers probe for
    /// the highest version this way); it was answered and is closed.
    VersionRefused(String),
    /// The client sent bytes that are not the protocol; it was answered and is closed.
    BadClientInput(String),
    BadUpstreamInput(String),
    /// A writer went away (its socket failed).
    WriterGone,
}

/// Runs one client connection to completion.
pub async fn run(id: u64, client: TcpStream, cfg: Arc<Config>) {
    let peer = client
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let span = tracing::info_span!("conn", id, peer = %peer);
    serve(client, cfg).instrument(span).await
}

async fn serve(client: TcpStream, cfg: Arc<Config>) {
    let connect = tokio::time::timeout(
        Duration::from_millis(cfg.connect_timeout_ms),
        TcpStream::connect(&cfg.upstream),
    )
    .await;
    let upstream = match connect {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            warn!(upstream = %cfg.upstream, error = %e, "upstream refused the connection; closing the client connection");
            return;
        }
        Err(_) => {
            warn!(upstream = %cfg.upstream, "upstream connect timed out; closing the client connection");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    debug!("connected upstream");
    let (client_rd, client_wr) = client.into_split();
    let (upstream_rd, upstream_wr) = upstream.into_split();
    let (to_client, client_rx) = mpsc::channel(CHANNEL_DEPTH);
    let (to_upstream, upstream_rx) = mpsc::channel(CHANNEL_DEPTH);
    let client_writer = tokio::spawn(writer::run(client_rx, client_wr).in_current_span());
    let upstream_writer = tokio::spawn(writer::run(upstream_rx, upstream_wr).in_current_span());
    let shared = Arc::new(Shared::default());

    let end = tokio::select! {
        end = client_to_upstream(client_rd, &shared, to_upstream.clone(), to_client.clone(), cfg.max_frame_bytes) => end,
        end = upstream_to_client(upstream_rd, &shared, to_client, to_upstream, cfg.max_frame_bytes) => end,
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
        End::WriterGone => debug!("a socket writer stopped"),
    }
    // Every sender is gone with the readers: the writers flush what is queued and stop.
    let _ = tokio::time::timeout(FLUSH_GRACE, client_writer).await;
    upstream_writer.abort();
}

/// Reads client envelopes and forwards them upstream under proxy-owned stream ids.
async fn client_to_upstream(
    mut rd: OwnedReadHalf,
    shared: &Shared,
    to_upstream: mpsc::Sender<Out>,
    to_client: mpsc::Sender<Out>,
    max_frame_bytes: usize,
) -> End {
    let envelopes = EnvelopeDecoder::new(Direction::Request, max_frame_bytes);
    let mut framed: Option<FramedDecoder> = None;
    let mut buf = BytesMut::with_capacity(16 * 1024);
    loop {
        loop {
            if framed.is_none() {
                if let Some(lz4) = shared.lock().client_framing {
                    framed = Some(FramedDecoder::new(
                        SegmentDecoder::new(lz4),
                        envelopes.clone(),
                    ));
                }
            }
            let next = match &mut framed {
                Some(f) => f.decode(&mut buf),
                None => envelopes.decode(&mut buf).map_err(SegmentError::from),
            };
            let env = match next {
                Ok(Some(env)) => env,
                Ok(None) => break,
                Err(e) => return refuse(e, &to_client).await,
            };
            if env.header().opcode.0 > Opcode::AUTH_SUCCESS.0 {
                // Cassandra answers an opcode it does not know and then keeps failing every
                // later request on that connection; the proxy answers it the same way itself
                // and keeps the upstream connection sound.
                let h = env.header();
                debug!(opcode = h.opcode.0, "unknown opcode answered by the proxy");
                let msg = format!("Unknown opcode {}", h.opcode.0);
                let frame = protocol_error::build(h.version, h.stream.0, &msg);
                if to_client.send(Out::Envelope(frame)).await.is_err() {
                    return End::WriterGone;
                }
                continue;
            }
            if let Err(end) = forward_request(env, shared, &to_upstream).await {
                return end;
            }
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) if buf.is_empty() => return End::ClientClosed,
            Ok(0) => return refuse_truncated(&buf, &envelopes, &to_client).await,
            Ok(_) => {}
            Err(e) => return End::ClientIo(e),
        }
    }
}

/// The client stopped sending in the middle of a frame: answer (it may still be reading).
async fn refuse_truncated(
    buf: &[u8],
    envelopes: &EnvelopeDecoder,
    to_client: &mpsc::Sender<Out>,
) -> End {
    let (version, stream) = match envelopes.peek_header(buf) {
        Ok(Some(h)) => (h.version, h.stream.0),
        _ => (ProtocolVersion::V4, 0),
    };
    let msg = format!(
        "truncated frame: the connection ended after {} bytes of an incomplete frame",
        buf.len()
    );
    let _ = to_client
        .send(Out::Envelope(protocol_error::build(version, stream, &msg)))
        .await;
    End::BadClientInput(msg)
}

/// Answers malformed client input with a protocol ERROR; the session then ends.
async fn refuse(err: SegmentError, to_client: &mpsc::Sender<Out>) -> End {
    let frame = match &err {
        SegmentError::Envelope(e) => protocol_error::for_envelope_error(e),
        other => protocol_error::build(ProtocolVersion::V5, 0, &other.to_string()),
    };
    let _ = to_client.send(Out::Envelope(frame)).await;
    match err {
        SegmentError::Envelope(EnvelopeError::UnsupportedVersion { .. }) => {
            End::VersionRefused(err.to_string())
        }
        _ => End::BadClientInput(err.to_string()),
    }
}

async fn forward_request(
    mut env: Envelope,
    shared: &Shared,
    to_upstream: &mpsc::Sender<Out>,
) -> Result<(), End> {
    let header = *env.header();
    if header.opcode == Opcode::STARTUP {
        // STARTUP is never compressed; a body the proxy cannot read goes to the server as is.
        if let Ok(s) = StartupView::parse(env.body()) {
            shared.lock().lz4_requested = s.compression() == Some(Compression::Lz4);
        }
    }
    let pending = Pending::Client {
        stream: header.stream.0,
    };
    let id = loop {
        if let Some(id) = shared.lock().streams.allocate(pending.clone()) {
            break id;
        }
        // All ids are in flight: wait for a response to free one (backpressure).
        shared.freed.notified().await;
    };
    env.set_stream(StreamId(id));
    to_upstream
        .send(Out::Envelope(env.into_frame()))
        .await
        .map_err(|_| End::WriterGone)
}

/// Reads server envelopes and returns each to the client under its own stream id.
async fn upstream_to_client(
    mut rd: OwnedReadHalf,
    shared: &Shared,
    to_client: mpsc::Sender<Out>,
    to_upstream: mpsc::Sender<Out>,
    max_frame_bytes: usize,
) -> End {
    let envelopes = EnvelopeDecoder::new(Direction::Response, max_frame_bytes);
    let mut framed: Option<FramedDecoder> = None;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            let next = match &mut framed {
                Some(f) => f.decode(&mut buf),
                None => envelopes.decode(&mut buf).map_err(SegmentError::from),
            };
            let mut env = match next {
                Ok(Some(env)) => env,
                Ok(None) => break,
                Err(e) => return End::BadUpstreamInput(e.to_string()),
            };
            let header = *env.header();
            if header.stream.0 >= 0 {
                let pending = shared.lock().streams.release(header.stream.0);
                shared.freed.notify_one();
                match pending {
                    Some(Pending::Client { stream }) => env.set_stream(StreamId(stream)),
                    None => {
                        warn!(
                            stream = header.stream.0,
                            "response on a stream with no request; dropped"
                        );
                        continue;
                    }
                }
            }
            let starts_framing = framed.is_none()
                && header.version >= ProtocolVersion::V5
                && (header.opcode == Opcode::READY || header.opcode == Opcode::AUTHENTICATE);
            if starts_framing {
                let lz4 = shared.lock().lz4_requested;
                // Order matters: the upstream writer and the client reader switch before the
                // client can see READY and send its first framed request.
                if to_upstream.send(Out::StartFraming { lz4 }).await.is_err() {
                    return End::WriterGone;
                }
                shared.lock().client_framing = Some(lz4);
                framed = Some(FramedDecoder::new(
                    SegmentDecoder::new(lz4),
                    envelopes.clone(),
                ));
                let sent = to_client
                    .send(Out::Envelope(env.into_frame()))
                    .await
                    .is_ok()
                    && to_client.send(Out::StartFraming { lz4 }).await.is_ok();
                if !sent {
                    return End::WriterGone;
                }
                debug!(lz4, "v5 framing started");
                continue;
            }
            if to_client
                .send(Out::Envelope(env.into_frame()))
                .await
                .is_err()
            {
                return End::WriterGone;
            }
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => return End::UpstreamClosed,
            Ok(_) => {}
            Err(e) => return End::UpstreamIo(e),
        }
    }
}
