//! What a client beyond `max_client_connections` gets: its first envelope is read (to learn
//! the protocol version and stream id), answered with an Overloaded ERROR (0x1001) that names
//! autoprep and the limit, and the connection is closed. Drivers report that error as the
//! reason the connection failed, and try another host or again later.
//!
//! Refusing costs little and is bounded: at most [`MAX_ANSWERING`] refused connections are
//! answered at once (beyond that they are closed without an answer), each for at most
//! [`ANSWER_TIMEOUT`]. Every refusal is counted (`autoprep_connections_refused_total`); the
//! warning is logged at most once per [`LOG_EVERY`], with how many were not logged.

use crate::metrics::Metrics;
use crate::protocol_error;
use autoprep_protocol::envelope::{Direction, EnvelopeDecoder, EnvelopeError, ProtocolVersion};
use autoprep_protocol::message::error::code;
use bytes::BytesMut;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

/// Refused connections answered at once.
pub const MAX_ANSWERING: usize = 64;

/// How long a refused client gets to send its first envelope, and then to read the answer and
/// close its side.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest first envelope body read (STARTUP and OPTIONS are a few dozen bytes).
const MAX_FIRST_BODY: usize = 64 * 1024;

/// At most one warning per this long.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// The refusal state every listener shares (in the `Context`).
#[derive(Debug)]
pub struct Refusals {
    answering: Arc<Semaphore>,
    log: RateLimit,
}

impl Default for Refusals {
    fn default() -> Self {
        Refusals {
            answering: Arc::new(Semaphore::new(MAX_ANSWERING)),
            log: RateLimit::new(LOG_EVERY),
        }
    }
}

impl Refusals {
    /// Refuses `sock` (`limit` connections are open): counts it, logs now and then, and answers
    /// it in the background when a slot is free.
    pub fn refuse(&self, sock: TcpStream, peer: SocketAddr, limit: usize, metrics: &Metrics) {
        Metrics::inc(&metrics.connections_refused);
        if let Some(unlogged) = self.log.check(Instant::now()) {
            warn!(
                %peer,
                limit,
                not_logged_since_last = unlogged,
                "client connection refused: max_client_connections reached"
            );
        }
        let Ok(slot) = self.answering.clone().try_acquire_owned() else {
            debug!(%peer, "refused connection closed without an answer (too many being answered)");
            return;
        };
        tokio::spawn(async move {
            if let Err(e) = tokio::time::timeout(ANSWER_TIMEOUT, answer(sock, limit)).await {
                debug!(%peer, error = %e, "refused client took too long");
            }
            drop(slot);
        });
    }
}

/// The message of the ERROR a refused client gets.
pub fn message(limit: usize) -> String {
    format!(
        "autoprep: connection refused: {limit} client connections are open, the most \
         max_client_connections allows; try again later"
    )
}

/// Reads the first envelope, answers it with Overloaded, and closes.
async fn answer(mut sock: TcpStream, limit: usize) {
    let decoder = EnvelopeDecoder::new(Direction::Request, MAX_FIRST_BODY);
    let mut buf = BytesMut::with_capacity(1024);
    let frame = loop {
        match decoder.decode(&mut buf) {
            Ok(Some(env)) => {
                let h = env.header();
                break overloaded(h.version, h.stream.0, &message(limit));
            }
            // A version the proxy does not speak: answered as Cassandra would, so that the
            // driver retries with one it does (and is then told about the limit).
            Err(e @ EnvelopeError::UnsupportedVersion { .. }) => {
                break protocol_error::for_envelope_error(&e)
            }
            Err(_) => return,
            Ok(None) => {}
        }
        match sock.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    };
    if sock.write_all(&frame).await.is_err() || sock.shutdown().await.is_err() {
        return;
    }
    // Wait for the client to close first: closing with its bytes unread would reset the
    // connection, and a reset can discard the answer before the client reads it.
    let mut sink = [0u8; 1024];
    while let Ok(n) = sock.read(&mut sink).await {
        if n == 0 {
            break;
        }
    }
}

/// An Overloaded ERROR envelope (unframed: a client's first messages always are).
pub fn overloaded(version: ProtocolVersion, stream: i16, message: &str) -> BytesMut {
    protocol_error::error_frame(version, stream, code::OVERLOADED, message)
}

/// Lets an event through at most once per period, counting those held back.
#[derive(Debug)]
pub struct RateLimit {
    every: Duration,
    /// When the last event went through, and how many were held back since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl RateLimit {
    pub fn new(every: Duration) -> RateLimit {
        RateLimit {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// An event at `now`: `Some(held back since the last one)` when it goes through.
    pub fn check(&self, now: Instant) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match s.0 {
            Some(last) if now.saturating_duration_since(last) < self.every => {
                s.1 += 1;
                None
            }
            _ => {
                let held = s.1;
                *s = (Some(now), 0);
                Some(held)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoprep_protocol::envelope::StreamId;
    use autoprep_protocol::message::error::ErrorView;
    use autoprep_protocol::message::ResponseBody;

    #[test]
    fn rate_limit() {
        let r = RateLimit::new(Duration::from_secs(10));
        let t = Instant::now();
        assert_eq!(r.check(t), Some(0));
        assert_eq!(r.check(t + Duration::from_secs(1)), None);
        assert_eq!(r.check(t + Duration::from_secs(9)), None);
        assert_eq!(r.check(t + Duration::from_secs(10)), Some(2));
        assert_eq!(r.check(t + Duration::from_secs(11)), None);
    }

    #[test]
    fn overloaded_error_frame() {
        let frame = overloaded(ProtocolVersion::V5, 7, &message(3)).freeze();
        let dec = EnvelopeDecoder::new(Direction::Response, 1 << 20);
        let env = dec
            .decode(&mut BytesMut::from(&frame[..]))
            .unwrap()
            .unwrap();
        assert_eq!(env.header().stream, StreamId(7));
        assert_eq!(env.header().version, ProtocolVersion::V5);
        let body = ResponseBody::parse(env.header(), env.body()).unwrap();
        let err = ErrorView::parse(body.message, ProtocolVersion::V5).unwrap();
        assert_eq!(err.code, code::OVERLOADED);
        assert!(err.message.starts_with("autoprep: "));
        assert!(err.message.contains(" 3 client connections"));
    }
}
