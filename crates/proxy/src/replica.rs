//! A client session's connections to the replicas it routes to (see [`crate::cluster`]).
//!
//! **Design.** Each client connection keeps its home upstream connection for everything that
//! is not routed (the handshake, authentication, `USE`, `REGISTER`, DDL, topology reads, the
//! proxy's own PREPAREs and view reads) and opens, lazily, one connection to each replica it
//! routes to. A replica connection is set up by replaying the client's own STARTUP and
//! authentication exchange, so it runs as the same user with the same protocol version and
//! compression, and the rewritten EXECUTE frames built for the home connection go to it
//! unchanged. Per-client connections rather than a shared pool per node: the server
//! authorizes per connection, and two clients of one sidecar may be different users. The
//! exchange is held only for the session's life, in memory that is zeroed when it ends
//! ([`Handshake`]); an exchange that cannot be replayed (the server asks differently the second
//! time) marks the replica unusable for that session, and its requests go home.
//!
//! A replica connection costs an outbox, a read buffer that starts empty and a table of the
//! requests in flight on it: a few KiB, only for the replicas a connection actually routes to.

use crate::socket::{self, ReadHalf};
use crate::upstream::{self, UpstreamTls};
use crate::wire::{self, FrameReader};
use crate::writer::{Out, Outbox};
use autoprep_protocol::envelope::{Direction, Envelope, Opcode, ProtocolVersion};
use autoprep_protocol::segment::SegmentError;
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use zeroize::Zeroizing;

/// How long a replica connection may take to connect and authenticate.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// After a replica connection failed, this long before the session tries that node again.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Requests in flight on one replica connection beyond which requests go home.
const MAX_IN_FLIGHT: usize = 1024;

/// The client's handshake as it went to the home node: STARTUP, then each AUTH_RESPONSE.
/// Zeroed when dropped (the AUTH_RESPONSE bodies hold credentials).
#[derive(Debug, Default, Clone)]
pub struct Handshake {
    pub version: Option<ProtocolVersion>,
    pub startup: Option<Zeroizing<Vec<u8>>>,
    pub auth: Vec<Zeroizing<Vec<u8>>>,
    /// STARTUP asked for LZ4 (v5 segments).
    pub lz4: bool,
    /// The home node accepted it (READY or AUTH_SUCCESS): it can be replayed.
    pub complete: bool,
}

/// Why a replica connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("connect: {0}")]
    Connect(String),
    #[error("replica connection closed during the handshake")]
    Closed,
    #[error("the handshake went otherwise than on the home node ({0})")]
    Diverged(&'static str),
    #[error("timed out")]
    Timeout,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Frames(#[from] SegmentError),
}

/// What an answer on a replica connection is for.
#[derive(Debug)]
pub enum Routed {
    /// A client's request.
    Client(RoutedRequest),
    /// A request of the proxy's own (USE, PREPARE on the replica).
    Own(oneshot::Sender<Envelope>),
}

/// A client's request sent to a replica: what its answer (or the connection's end) needs.
#[derive(Debug)]
pub struct RoutedRequest {
    /// The client's stream id.
    pub stream: i16,
    /// What the client sent (sent home if the replica does not know `id`).
    pub original: Bytes,
    pub id: Bytes,
    pub hash: Option<autoprep_cache::ShapeHash>,
    /// It may repeat (see [`autoprep_protocol::cql::idempotent::may_repeat`]): when the
    /// connection ends with it in flight it is sent home again.
    pub repeatable: bool,
    /// For the response-time metrics (overall, per shape, control comparison).
    pub tag: crate::streams::Tag,
    /// Statements prepared with literals inline the request references: the home node
    /// learns them before `original` is sent there (see `crate::rewrite::literal_prepare`).
    pub literals: Vec<std::sync::Arc<crate::rewrite::literal_prepare::Statement>>,
}

#[derive(Debug, Default)]
struct Flight {
    routed: HashMap<i16, Routed>,
    next: u16,
    /// The keyspace the proxy last set on this connection (v4 PREPAREs need one).
    keyspace: Option<String>,
    /// Prepared ids being prepared on this connection.
    preparing: std::collections::HashSet<Bytes>,
}

/// One replica connection.
#[derive(Debug)]
pub struct Link {
    pub addr: SocketAddr,
    pub version: ProtocolVersion,
    out: Outbox,
    flight: Mutex<Flight>,
    /// One PREPARE sequence (USE, then PREPARE) at a time: the proxy owns this connection's
    /// keyspace and never lets a USE run beside its own PREPARE (see `session::Conn::hold_use`).
    pub prepare_turn: tokio::sync::Mutex<()>,
}

impl Link {
    fn lock(&self) -> MutexGuard<'_, Flight> {
        self.flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `frame` (its stream id to be set) for `routed`; gives the frame back when the
    /// connection has too much in flight or is gone.
    pub async fn send(&self, mut frame: BytesMut, routed: Routed) -> Result<(), BytesMut> {
        let id = {
            let mut f = self.lock();
            if f.routed.len() >= MAX_IN_FLIGHT {
                return Err(frame);
            }
            let mut id;
            loop {
                id = (f.next & 0x7fff) as i16;
                f.next = f.next.wrapping_add(1);
                if !f.routed.contains_key(&id) {
                    break;
                }
            }
            f.routed.insert(id, routed);
            id
        };
        wire::set_stream(&mut frame, id);
        let keep = frame.clone();
        if self.out.send(Out::Envelope(frame)).await.is_err() {
            self.lock().routed.remove(&id);
            return Err(keep);
        }
        self.out.flush();
        Ok(())
    }

    /// Sends a request of the proxy's own and waits for its answer (`None`: the connection
    /// ended first).
    pub async fn request(&self, frame: BytesMut) -> Option<Envelope> {
        let (tx, rx) = oneshot::channel();
        self.send(frame, Routed::Own(tx)).await.ok()?;
        rx.await.ok()
    }

    /// What the answer on `stream` was for.
    pub fn answered(&self, stream: i16) -> Option<Routed> {
        self.lock().routed.remove(&stream)
    }

    /// Every request still in flight (the connection ended).
    pub fn take_in_flight(&self) -> Vec<Routed> {
        self.lock().routed.drain().map(|(_, r)| r).collect()
    }

    /// The keyspace last set on the connection by the proxy.
    pub fn keyspace(&self) -> Option<String> {
        self.lock().keyspace.clone()
    }

    /// The proxy set `keyspace` on the connection.
    pub fn set_keyspace(&self, keyspace: Option<String>) {
        self.lock().keyspace = keyspace;
    }

    /// Marks `id` as being prepared here; false when it already is.
    pub fn start_preparing(&self, id: &Bytes) -> bool {
        self.lock().preparing.insert(id.clone())
    }

    /// `id` is no longer being prepared here.
    pub fn done_preparing(&self, id: &Bytes) {
        self.lock().preparing.remove(id);
    }

    /// Closes the connection (what was pushed is still written).
    pub fn close(&self) {
        self.out.close();
    }
}

/// A session's replica connections, by node address.
#[derive(Debug, Default)]
pub struct Links {
    slots: Mutex<HashMap<SocketAddr, Slot>>,
    /// Set when the session ended: a connection that opens afterwards is closed at once.
    closed: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
enum Slot {
    Opening,
    Open(Arc<Link>, JoinHandle<()>),
    Failed(Instant),
}

/// The state of a session's connection to one replica.
#[derive(Debug)]
pub enum LinkState {
    /// Usable.
    Open(Arc<Link>),
    /// Being opened, or failed recently: requests go home meanwhile.
    NotYet(&'static str),
    /// Not tried yet: the caller opens it (it is now marked as opening).
    Absent,
}

impl Links {
    fn lock(&self) -> MutexGuard<'_, HashMap<SocketAddr, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection to `addr`; marks it opening when it is absent (or failed long enough
    /// ago), and the caller must then open it and call [`Links::opened`] or [`Links::failed`].
    pub fn get(&self, addr: SocketAddr, now: Instant) -> LinkState {
        let mut slots = self.lock();
        match slots.get(&addr) {
            Some(Slot::Open(l, _)) => LinkState::Open(l.clone()),
            Some(Slot::Opening) => LinkState::NotYet("replica connecting"),
            Some(Slot::Failed(at)) if now.saturating_duration_since(*at) < RETRY_AFTER => {
                LinkState::NotYet("replica unreachable")
            }
            _ => {
                slots.insert(addr, Slot::Opening);
                LinkState::Absent
            }
        }
    }

    /// The connection to `addr` is open; `reader` is its reading task.
    pub fn opened(&self, link: Arc<Link>, reader: JoinHandle<()>) {
        let mut slots = self.lock();
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            link.close();
            reader.abort();
            return;
        }
        slots.insert(link.addr, Slot::Open(link, reader));
    }

    /// The connection to `addr` failed or ended.
    pub fn failed(&self, addr: SocketAddr, now: Instant) {
        if let Some(Slot::Open(l, _)) = self.lock().insert(addr, Slot::Failed(now)) {
            l.close();
        }
    }

    /// Closes every connection (the session ends).
    pub fn close_all(&self) {
        let mut slots = self.lock();
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        for (_, slot) in slots.drain() {
            if let Slot::Open(l, reader) = slot {
                l.close();
                reader.abort();
            }
        }
    }

    /// The open connections.
    pub fn open_links(&self) -> Vec<Arc<Link>> {
        self.lock()
            .values()
            .filter_map(|s| match s {
                Slot::Open(l, _) => Some(l.clone()),
                _ => None,
            })
            .collect()
    }

    /// Requests in flight on every open connection.
    pub fn in_flight(&self) -> usize {
        self.lock()
            .values()
            .map(|s| match s {
                Slot::Open(l, _) => l.lock().routed.len(),
                _ => 0,
            })
            .sum()
    }
}

/// An open replica connection: the link to send on, and what its reader needs.
pub struct Opened {
    pub link: Arc<Link>,
    pub socket: ReadHalf,
    /// The connection's frames (v5 segments once the handshake started framing).
    pub frames: FrameReader,
    pub writer: JoinHandle<()>,
}

/// Connects to `addr` and replays the client's `handshake` on it.
pub async fn open(
    addr: SocketAddr,
    handshake: &Handshake,
    tls: Option<&UpstreamTls>,
    max_frame_bytes: usize,
) -> Result<Opened, OpenError> {
    let replayed = tokio::time::timeout(
        OPEN_TIMEOUT,
        replay(&addr.to_string(), handshake, tls, max_frame_bytes),
    )
    .await
    .map_err(|_| OpenError::Timeout)??;
    let Some(version) = handshake.version else {
        return Err(OpenError::Diverged("no STARTUP recorded"));
    };
    let link = Arc::new(Link {
        addr,
        version,
        out: replayed.out,
        flight: Mutex::new(Flight::default()),
        prepare_turn: tokio::sync::Mutex::new(()),
    });
    Ok(Opened {
        link,
        socket: replayed.socket,
        frames: replayed.frames,
        writer: replayed.writer,
    })
}

/// A connection on which the client's handshake was replayed (a replica connection, or a new
/// home connection: see `session::rehome`), authenticated as the client's.
pub struct Replayed {
    /// Its outbox (v5 framing started when the handshake started it).
    pub out: Outbox,
    pub socket: ReadHalf,
    /// Its frames, with whatever was read beyond the handshake's last answer.
    pub frames: FrameReader,
    pub writer: JoinHandle<()>,
    /// The node's address as connected to.
    pub peer: Option<SocketAddr>,
}

impl Replayed {
    /// Sends `frame` (stream id 0) and reads the next answer: for the proxy's own requests
    /// one at a time, before the connection carries any other.
    pub async fn ask(&mut self, frame: BytesMut) -> Result<Envelope, OpenError> {
        self.out
            .send(Out::Envelope(frame))
            .await
            .map_err(|_| OpenError::Closed)?;
        self.out.flush();
        self.answer().await
    }

    async fn answer(&mut self) -> Result<Envelope, OpenError> {
        loop {
            if let Some(env) = self.frames.decode()? {
                return Ok(env);
            }
            if self.frames.read_from(&mut self.socket).await? == 0 {
                return Err(OpenError::Closed);
            }
        }
    }
}

/// Connects to `addr` (`host:port`) and replays the client's `handshake` on it: its STARTUP,
/// then each AUTH_RESPONSE the server asks for, until READY or AUTH_SUCCESS. No time limit of
/// its own: callers bound it.
pub async fn replay(
    addr: &str,
    handshake: &Handshake,
    tls: Option<&UpstreamTls>,
    max_frame_bytes: usize,
) -> Result<Replayed, OpenError> {
    let (Some(version), Some(startup)) = (handshake.version, handshake.startup.as_ref()) else {
        return Err(OpenError::Diverged("no STARTUP recorded"));
    };
    let sock = upstream::connect_to(addr, tls, OPEN_TIMEOUT)
        .await
        .map_err(|e| OpenError::Connect(e.to_string()))?;
    let peer = socket::peer_addr(&sock);
    let (rd, wr) = socket::into_split(sock);
    let (out, writer) = Outbox::new(wr, None);
    let mut c = Replayed {
        out,
        socket: rd,
        frames: FrameReader::new(Direction::Response, max_frame_bytes),
        writer: tokio::spawn(writer),
        peer,
    };
    let mut auth = handshake.auth.iter();
    let mut next = Envelope::request_frame(version, Opcode::STARTUP, startup);
    loop {
        let env = c.ask(next).await?;
        let op = env.header().opcode;
        if version >= ProtocolVersion::V5
            && !c.frames.is_framed()
            && (op == Opcode::READY || op == Opcode::AUTHENTICATE)
        {
            c.out
                .send(Out::StartFraming { lz4: handshake.lz4 })
                .await
                .map_err(|_| OpenError::Closed)?;
            c.frames.start_framing(handshake.lz4);
        }
        match op {
            Opcode::READY | Opcode::AUTH_SUCCESS => return Ok(c),
            Opcode::AUTHENTICATE | Opcode::AUTH_CHALLENGE => {
                let body = auth
                    .next()
                    .ok_or(OpenError::Diverged("more authentication"))?;
                next = Envelope::request_frame(version, Opcode::AUTH_RESPONSE, body);
            }
            _ => return Err(OpenError::Diverged("an error or another answer")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::stand_in::{answer, MAX};

    /// A stand-in node: answers STARTUP with AUTHENTICATE and the AUTH_RESPONSE with
    /// `after_auth`, then every request with a Void RESULT on its stream.
    async fn node(
        after_auth: Opcode,
    ) -> (SocketAddr, tokio::sync::mpsc::Receiver<(Opcode, Vec<u8>)>) {
        crate::stand_in::spawn(move |h| match h.opcode {
            Opcode::STARTUP => answer(h.version, h.stream.0, Opcode::AUTHENTICATE, b"\0\x01x"),
            Opcode::AUTH_RESPONSE => answer(h.version, h.stream.0, after_auth, &[0, 0, 0, 0]),
            _ => answer(h.version, h.stream.0, Opcode::RESULT, &1i32.to_be_bytes()),
        })
        .await
    }

    fn handshake() -> Handshake {
        Handshake {
            version: Some(ProtocolVersion::V4),
            startup: Some(Zeroizing::new(b"\0\0".to_vec())),
            auth: vec![Zeroizing::new(b"secret".to_vec())],
            lz4: false,
            complete: true,
        }
    }

    #[tokio::test]
    async fn a_replica_connection_replays_the_handshake_and_carries_requests() {
        let (addr, mut seen) = node(Opcode::AUTH_SUCCESS).await;
        let mut o = open(addr, &handshake(), None, MAX).await.expect("opened");
        assert_eq!(
            seen.recv().await.unwrap(),
            (Opcode::STARTUP, b"\0\0".to_vec())
        );
        assert_eq!(
            seen.recv().await.unwrap(),
            (Opcode::AUTH_RESPONSE, b"secret".to_vec())
        );
        // A request of the proxy's own, answered on its stream.
        let frame = Envelope::request_frame(ProtocolVersion::V4, Opcode::OPTIONS, &[]);
        let (tx, rx) = oneshot::channel();
        o.link.send(frame, Routed::Own(tx)).await.unwrap();
        assert_eq!(o.link.lock().routed.len(), 1);
        let env = loop {
            if let Some(env) = o.frames.decode().unwrap() {
                break env;
            }
            assert!(o.frames.read_from(&mut o.socket).await.unwrap() > 0);
        };
        match o.link.answered(env.header().stream.0) {
            Some(Routed::Own(tx)) => tx.send(env).unwrap(),
            other => panic!("answer for {other:?}"),
        }
        assert_eq!(rx.await.unwrap().header().opcode, Opcode::RESULT);
        assert!(o.link.take_in_flight().is_empty());
    }

    #[tokio::test]
    async fn a_handshake_answered_otherwise_is_not_replayed() {
        let (addr, _seen) = node(Opcode::ERROR).await;
        let opened = open(addr, &handshake(), None, MAX).await;
        assert!(matches!(opened, Err(OpenError::Diverged(_))));
        // Nothing recorded to replay.
        let none = Handshake::default();
        let (addr, _seen) = node(Opcode::AUTH_SUCCESS).await;
        assert!(matches!(
            open(addr, &none, None, MAX).await,
            Err(OpenError::Diverged(_))
        ));
    }

    #[test]
    fn links_open_once_and_wait_after_a_failure() {
        let links = Links::default();
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let t0 = Instant::now();
        assert!(matches!(links.get(addr, t0), LinkState::Absent));
        assert!(matches!(
            links.get(addr, t0),
            LinkState::NotYet("replica connecting")
        ));
        links.failed(addr, t0);
        assert!(matches!(
            links.get(addr, t0),
            LinkState::NotYet("replica unreachable")
        ));
        assert!(matches!(
            links.get(addr, t0 + RETRY_AFTER),
            LinkState::Absent
        ));
        assert_eq!(links.in_flight(), 0);
        assert!(links.open_links().is_empty());
    }
}
