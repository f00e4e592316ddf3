//! Handing client connections to the next process at a drain (design change 3 of the book's
//! soak chapter: a drain the client does not see).
//!
//! With `handover_socket` set, every process listens on that Unix socket (a stale file is
//! replaced). A draining process with the same option first [`probe`]s it: when a new process
//! answers, each plain-TCP client connection stops reading requests, waits until everything it
//! forwarded is answered and written, and is [`send`]: its socket's descriptor (`SCM_RIGHTS`)
//! and a [`Handed`] state (protocol version, compression, v5 framing, keyspace, the handshake's
//! bodies, the registered events, the bytes read from the client and not handled yet). The new
//! process [`receive`]s it, acknowledges it with one byte, opens a home there by replaying the
//! handshake, keyspace and registrations, and serves the same TCP connection: the client sees
//! no disconnect.
//!
//! One Unix connection per client connection, each carrying one message: a 4-byte big-endian
//! length, then the encoded state (length 0: a probe). The descriptor rides with the first
//! bytes; the receiver answers [`ACK`] once it has decoded the state and admitted the
//! connection, and only then does the sender let go of it (otherwise it closes the client
//! connection, as a drain without hand-over would).
//!
//! Design justification: the state is a small length-prefixed binary encoding of its own rather
//! than serde: it holds credentials (the STARTUP and AUTH_RESPONSE bodies), and an encoding
//! written into one [`Zeroizing`] buffer is wiped after sending, where a serializer's
//! intermediate strings (JSON has no bytes type) would not be; decoding is check-then-parse
//! with every length bounded by what was received. `rustix` passes the descriptor: its
//! `recvmsg` gives an `OwnedFd`, so the crate stays free of `unsafe` (`nix` gives a raw
//! descriptor that only `unsafe` code can own).

use crate::cluster::ClientStatement;
use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::ProtocolVersion;
use bytes::Bytes;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{UnixListener, UnixStream};
use tokio::time::Instant;
use zeroize::Zeroizing;

/// The receiver's answer: it took the connection (or, to a probe, it is there to take them).
pub const ACK: u8 = 1;

/// How long a sender waits for the receiver's acknowledgement.
const ACK_WAIT: Duration = Duration::from_secs(5);

/// How long a draining process keeps trying to reach a new process ([`probe`]).
pub const PROBE_FOR: Duration = Duration::from_secs(5);

/// The first bytes of an encoded state, with the encoding's version.
const MAGIC: &[u8; 4] = b"APH1";
/// The first bytes of an encoded list of [`ClientStatement`]s: what routing knew of the
/// clients' statements in the draining process, sent once before the connections, so that the
/// new process routes their EXECUTEs and BATCHes and knows which of them may go again to a new
/// home. Without it the new process never learns them: every node knows their ids (routing
/// prepared them on every replica), so none answers UNPREPARED and the driver never prepares
/// them again.
const STATEMENTS_MAGIC: &[u8; 4] = b"APS1";

/// The encoding of `statements` (after [`STATEMENTS_MAGIC`]).
pub fn encode_statements(statements: &[ClientStatement]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + statements.len() * 128);
    out.extend_from_slice(STATEMENTS_MAGIC);
    put_count(&mut out, statements.len());
    for s in statements {
        put(&mut out, s.text.as_bytes());
        put_optional(&mut out, s.keyspace.as_deref().map(str::as_bytes));
        put(&mut out, &s.id);
        put_optional(&mut out, s.result_metadata_id.as_deref());
        put_count(&mut out, s.pk_indexes.len());
        for i in &s.pk_indexes {
            out.extend_from_slice(&i.to_be_bytes());
        }
        put_count(&mut out, s.tables.len());
        for (ks, table) in &s.tables {
            put(&mut out, ks.as_bytes());
            put(&mut out, table.as_bytes());
        }
    }
    out
}

/// Decodes what [`encode_statements`] wrote.
pub fn decode_statements(mut buf: &[u8]) -> Result<Vec<ClientStatement>, DecodeError> {
    let b = &mut buf;
    if take(b, 4)? != STATEMENTS_MAGIC {
        return Err(DecodeError::Magic);
    }
    let text = |b: &mut &[u8]| -> Result<String, DecodeError> {
        Ok(std::str::from_utf8(get(b)?)
            .map_err(|_| DecodeError::Keyspace)?
            .to_owned())
    };
    let n = count(b)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let statement = text(b)?;
        let keyspace = match get_optional(b)? {
            Some(k) => Some(
                std::str::from_utf8(k)
                    .map_err(|_| DecodeError::Keyspace)?
                    .to_owned(),
            ),
            None => None,
        };
        let id = Bytes::copy_from_slice(get(b)?);
        let result_metadata_id = get_optional(b)?.map(Bytes::copy_from_slice);
        let n = count(b)?;
        let mut pk_indexes = Vec::with_capacity(n);
        for _ in 0..n {
            let i = take(b, 2)?;
            pk_indexes.push(u16::from_be_bytes([i[0], i[1]]));
        }
        let n = count(b)?;
        let mut tables = Vec::with_capacity(n);
        for _ in 0..n {
            tables.push((text(b)?, text(b)?));
        }
        out.push(ClientStatement {
            text: statement,
            keyspace,
            id,
            result_metadata_id,
            pk_indexes,
            tables,
        });
    }
    if !b.is_empty() {
        return Err(DecodeError::Trailing(b.len()));
    }
    Ok(out)
}

/// What a client connection carries to the process that takes it over. Its `Debug` leaves
/// the handshake's bodies out (credentials) and gives only the sizes of the rest.
#[derive(Clone, PartialEq, Eq)]
pub struct Handed {
    pub version: ProtocolVersion,
    /// The compression STARTUP negotiated.
    pub compression: Option<Compression>,
    /// v5 framing started on the client side: with LZ4-compressed segments or not.
    pub framing: Option<bool>,
    /// STARTUP asked for LZ4.
    pub lz4_requested: bool,
    /// The client had Cassandra's once-per-connection warning about `USE`.
    pub use_warning_given: bool,
    /// The keyspace of its last successful `USE`.
    pub keyspace: Option<String>,
    /// The STARTUP body (credentials may follow in `auth`: never logged, wiped when dropped).
    pub startup: Zeroizing<Vec<u8>>,
    /// The AUTH_RESPONSE bodies, in order.
    pub auth: Vec<Zeroizing<Vec<u8>>>,
    /// The REGISTER bodies, in order.
    pub registered: Vec<Bytes>,
    /// Bytes read from the client and not handled yet (a request's first part).
    pub unread: Vec<u8>,
}

impl std::fmt::Debug for Handed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handed")
            .field("version", &self.version)
            .field("compression", &self.compression)
            .field("framing", &self.framing)
            .field("keyspace", &self.keyspace.is_some())
            .field("auth_steps", &self.auth.len())
            .field("registered", &self.registered.len())
            .field("unread_bytes", &self.unread.len())
            .finish_non_exhaustive()
    }
}

/// Why a state could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a hand-over state of this version")]
    Magic,
    #[error("truncated: {needed} bytes needed, {left} left")]
    Truncated { needed: usize, left: usize },
    #[error("unknown {field} {value}")]
    Unknown { field: &'static str, value: u8 },
    #[error("a keyspace, table or statement is not UTF-8")]
    Keyspace,
    #[error("{0} bytes after the state")]
    Trailing(usize),
}

impl Handed {
    /// The state's encoding (wiped when dropped: it holds the credentials).
    pub fn encode(&self) -> Zeroizing<Vec<u8>> {
        let mut out = Zeroizing::new(Vec::with_capacity(
            64 + self.startup.len() + self.unread.len(),
        ));
        out.extend_from_slice(MAGIC);
        out.push(self.version.as_u8());
        out.push(match self.compression {
            None => 0,
            Some(Compression::Lz4) => 1,
            Some(Compression::Snappy) => 2,
        });
        out.push(match self.framing {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        });
        out.push(u8::from(self.lz4_requested) | u8::from(self.use_warning_given) << 1);
        match &self.keyspace {
            None => out.push(0),
            Some(ks) => {
                out.push(1);
                put(&mut out, ks.as_bytes());
            }
        }
        put(&mut out, &self.startup);
        put_count(&mut out, self.auth.len());
        for a in &self.auth {
            put(&mut out, a);
        }
        put_count(&mut out, self.registered.len());
        for r in &self.registered {
            put(&mut out, r);
        }
        put(&mut out, &self.unread);
        out
    }

    /// Decodes what [`Handed::encode`] wrote.
    pub fn decode(mut buf: &[u8]) -> Result<Handed, DecodeError> {
        let b = &mut buf;
        if take(b, 4)? != MAGIC {
            return Err(DecodeError::Magic);
        }
        let v = byte(b)?;
        let version = ProtocolVersion::from_byte(v).ok_or(DecodeError::Unknown {
            field: "protocol version",
            value: v,
        })?;
        let compression = match byte(b)? {
            0 => None,
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Snappy),
            value => {
                return Err(DecodeError::Unknown {
                    field: "compression",
                    value,
                })
            }
        };
        let framing = match byte(b)? {
            0 => None,
            1 => Some(false),
            2 => Some(true),
            value => {
                return Err(DecodeError::Unknown {
                    field: "framing",
                    value,
                })
            }
        };
        let flags = byte(b)?;
        let keyspace = match byte(b)? {
            0 => None,
            1 => Some(
                std::str::from_utf8(get(b)?)
                    .map_err(|_| DecodeError::Keyspace)?
                    .to_owned(),
            ),
            value => {
                return Err(DecodeError::Unknown {
                    field: "keyspace marker",
                    value,
                })
            }
        };
        let startup = Zeroizing::new(get(b)?.to_vec());
        // Counts are bounded by the bytes left (each item has a 4-byte length at least).
        let n = count(b)?;
        let mut auth = Vec::with_capacity(n);
        for _ in 0..n {
            auth.push(Zeroizing::new(get(b)?.to_vec()));
        }
        let n = count(b)?;
        let mut registered = Vec::with_capacity(n);
        for _ in 0..n {
            registered.push(Bytes::copy_from_slice(get(b)?));
        }
        let unread = get(b)?.to_vec();
        if !b.is_empty() {
            return Err(DecodeError::Trailing(b.len()));
        }
        Ok(Handed {
            version,
            compression,
            framing,
            lz4_requested: flags & 1 != 0,
            use_warning_given: flags & 2 != 0,
            keyspace,
            startup,
            auth,
            registered,
            unread,
        })
    }
}

fn put_optional(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => out.push(0),
        Some(b) => {
            out.push(1);
            put(out, b);
        }
    }
}

fn get_optional<'a>(buf: &mut &'a [u8]) -> Result<Option<&'a [u8]>, DecodeError> {
    match byte(buf)? {
        0 => Ok(None),
        1 => Ok(Some(get(buf)?)),
        value => Err(DecodeError::Unknown {
            field: "optional marker",
            value,
        }),
    }
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    put_count(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_count(out: &mut Vec<u8>, n: usize) {
    // The state of one connection: its parts are far below 4 GiB (frames are at most 2 GiB).
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes());
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    if buf.len() < n {
        return Err(DecodeError::Truncated {
            needed: n,
            left: buf.len(),
        });
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

fn byte(buf: &mut &[u8]) -> Result<u8, DecodeError> {
    Ok(take(buf, 1)?[0])
}

fn count(buf: &mut &[u8]) -> Result<usize, DecodeError> {
    let n = take(buf, 4)?;
    let n = u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize;
    // Each item takes 4 bytes at least: a larger count is a lie, not an allocation to make.
    if n > buf.len() / 4 {
        return Err(DecodeError::Truncated {
            needed: n.saturating_mul(4),
            left: buf.len(),
        });
    }
    Ok(n)
}

fn get<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let n = take(buf, 4)?;
    let n = u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize;
    take(buf, n)
}

/// Listens on `path`, replacing what is there (the socket file of a process that is gone or
/// draining: connecting to an old file fails, and a draining process has closed its
/// listener).
pub fn listen(path: &Path) -> io::Result<UnixListener> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    // Whoever can connect could pose as the next process and be handed client connections
    // (and their credentials): only this user may.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Whether a process that takes connections over listens on `path`, trying for `within`.
pub async fn probe(path: &Path, within: Duration) -> bool {
    let until = Instant::now() + within;
    loop {
        if let Ok(Ok(())) = tokio::time::timeout(ACK_WAIT, probe_once(path)).await {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn probe_once(path: &Path) -> io::Result<()> {
    let mut sock = UnixStream::connect(path).await?;
    sock.write_all(&0u32.to_be_bytes()).await?;
    acknowledged(&mut sock).await
}

async fn acknowledged(sock: &mut UnixStream) -> io::Result<()> {
    let mut ack = [0u8; 1];
    sock.read_exact(&mut ack).await?;
    if ack[0] != ACK {
        return Err(io::Error::other("refused"));
    }
    Ok(())
}

/// Hands the client socket `fd` over, with `state`, to the process listening on `path`.
/// `Ok` once it acknowledged: from then on the connection is its own, and this process must
/// neither write to it nor shut it down.
pub async fn send(path: &Path, fd: BorrowedFd<'_>, state: &Handed) -> io::Result<()> {
    let body = state.encode();
    let mut msg = Zeroizing::new(Vec::with_capacity(4 + body.len()));
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("state too large"))?;
    msg.extend_from_slice(&len.to_be_bytes());
    msg.extend_from_slice(&body);
    drop(body);
    let mut sock = UnixStream::connect(path).await?;
    let sent = sock
        .async_io(Interest::WRITABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            let fds = [fd];
            if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
                return Err(io::Error::other("no room for the descriptor"));
            }
            rustix::net::sendmsg(
                &sock,
                &[IoSlice::new(&msg)],
                &mut control,
                SendFlags::NOSIGNAL,
            )
            .map_err(io::Error::from)
        })
        .await?;
    // The descriptor went with the first bytes; the rest is plain bytes.
    sock.write_all(&msg[sent..]).await?;
    tokio::time::timeout(ACK_WAIT, acknowledged(&mut sock))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?
}

/// Sends what routing knows of the clients' statements (see [`ClientStatement`]) to the
/// process listening on `path`; `Ok` once it acknowledged.
pub async fn send_statements(path: &Path, statements: &[ClientStatement]) -> io::Result<()> {
    let body = encode_statements(statements);
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("statements too large"))?;
    let mut sock = UnixStream::connect(path).await?;
    sock.write_all(&len.to_be_bytes()).await?;
    sock.write_all(&body).await?;
    tokio::time::timeout(ACK_WAIT, acknowledged(&mut sock))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?
}

/// What arrived on the hand-over socket.
#[derive(Debug)]
pub enum Received {
    /// A draining process looks for this one: answer [`ack`] if it takes connections.
    Probe,
    /// What routing knew of the clients' statements in the draining process. Answer [`ack`]
    /// once they are known here.
    Statements(Vec<ClientStatement>),
    /// A client connection: its socket and state. Answer [`ack`] once it is taken.
    Connection(OwnedFd, Handed),
}

/// Reads one message from a connection to the hand-over socket; states longer than `max`
/// bytes are refused.
pub async fn receive(sock: &mut UnixStream, max: usize) -> io::Result<Received> {
    let mut first = Zeroizing::new(vec![0u8; 64 * 1024]);
    let (n, fd) = sock
        .async_io(Interest::READABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let got = rustix::net::recvmsg(
                &*sock,
                &mut [IoSliceMut::new(&mut first)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            )?;
            let mut fd = None;
            for m in control.drain() {
                if let RecvAncillaryMessage::ScmRights(fds) = m {
                    // More than one: the others are closed as they are dropped.
                    for f in fds {
                        fd.get_or_insert(f);
                    }
                }
            }
            Ok((got.bytes, fd))
        })
        .await?;
    let mut msg = Zeroizing::new(first[..n].to_vec());
    drop(first);
    while msg.len() < 4 {
        let mut more = [0u8; 4];
        let got = sock.read(&mut more[..4 - msg.len()]).await?;
        if got == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        msg.extend_from_slice(&more[..got]);
    }
    let len = u32::from_be_bytes([msg[0], msg[1], msg[2], msg[3]]) as usize;
    if len == 0 {
        return Ok(Received::Probe);
    }
    if len > max {
        return Err(io::Error::other(format!(
            "a state of {len} bytes (at most {max})"
        )));
    }
    if msg.len() > 4 + len {
        return Err(io::Error::other("bytes after the state"));
    }
    let have = msg.len();
    msg.resize(4 + len, 0);
    sock.read_exact(&mut msg[have..]).await?;
    if msg[4..].starts_with(STATEMENTS_MAGIC) {
        let statements = decode_statements(&msg[4..]).map_err(io::Error::other)?;
        return Ok(Received::Statements(statements));
    }
    let fd = fd.ok_or_else(|| io::Error::other("no descriptor came with the state"))?;
    let state = Handed::decode(&msg[4..]).map_err(io::Error::other)?;
    Ok(Received::Connection(fd, state))
}

/// Tells the sender its connection (or, after a probe, its drain) is taken.
pub async fn ack(sock: &mut UnixStream) -> io::Result<()> {
    sock.write_all(&[ACK]).await
}

/// Whatever must stay open, untouched, until the process exits: the write side of a client
/// socket handed over (dropping it would shut the socket's write side down, which the new
/// process shares).
#[derive(Debug, Default)]
pub struct Kept(Mutex<Vec<Box<dyn std::fmt::Debug + Send>>>);

impl Kept {
    pub fn keep(&self, thing: Box<dyn std::fmt::Debug + Send>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(thing);
    }
}

impl Drop for Kept {
    /// Never dropped, even when the process's context is (at its exit, once the runtime is
    /// gone): dropping a kept write half would shut down the write side of a socket the next
    /// process serves. Its descriptor closes with the process, which sends nothing.
    fn drop(&mut self) {
        let kept = self.0.get_mut().unwrap_or_else(|p| p.into_inner());
        for thing in kept.drain(..) {
            std::mem::forget(thing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    fn state() -> Handed {
        Handed {
            version: ProtocolVersion::V5,
            compression: Some(Compression::Lz4),
            framing: Some(true),
            lz4_requested: true,
            use_warning_given: true,
            keyspace: Some("ks \"quoted\"".into()),
            startup: Zeroizing::new(b"\0\x01\0\x0bCQL_VERSION\0\x053.0.0".to_vec()),
            auth: vec![Zeroizing::new(b"\0user\0secret".to_vec())],
            registered: vec![Bytes::from_static(b"\0\x01\0\x0dSCHEMA_CHANGE")],
            unread: b"\x05\0\0\x01".to_vec(),
        }
    }

    fn statements() -> Vec<ClientStatement> {
        vec![
            ClientStatement {
                text: "INSERT INTO ks.t (k, v) VALUES (?, ?)".into(),
                keyspace: Some("ks".into()),
                id: Bytes::from_static(&[7; 16]),
                result_metadata_id: Some(Bytes::from_static(&[8; 16])),
                pk_indexes: vec![0, 2],
                tables: vec![("ks".into(), "t".into())],
            },
            ClientStatement {
                text: "SELECT v FROM t WHERE k = ?".into(),
                keyspace: None,
                id: Bytes::from_static(&[9; 16]),
                result_metadata_id: None,
                pk_indexes: vec![0],
                tables: vec![],
            },
        ]
    }

    #[test]
    fn statements_round_trip_and_a_broken_list_is_an_error() {
        let encoded = encode_statements(&statements());
        assert_eq!(decode_statements(&encoded).unwrap(), statements());
        assert_eq!(decode_statements(&encode_statements(&[])).unwrap(), vec![]);
        for cut in 0..encoded.len() {
            assert!(decode_statements(&encoded[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = encoded.clone();
        longer.push(0);
        assert_eq!(decode_statements(&longer), Err(DecodeError::Trailing(1)));
        assert_eq!(decode_statements(b"APH1"), Err(DecodeError::Magic));
    }

    #[test]
    fn the_state_round_trips() {
        let s = state();
        assert_eq!(Handed::decode(&s.encode()).unwrap(), s);
        let bare = Handed {
            version: ProtocolVersion::V3,
            compression: None,
            framing: None,
            lz4_requested: false,
            use_warning_given: false,
            keyspace: None,
            startup: Zeroizing::new(Vec::new()),
            auth: Vec::new(),
            registered: Vec::new(),
            unread: Vec::new(),
        };
        assert_eq!(Handed::decode(&bare.encode()).unwrap(), bare);
    }

    #[test]
    fn its_debug_shows_no_credentials() {
        let shown = format!("{:?}", state());
        assert!(
            !shown.contains("secret") && !shown.contains("user"),
            "{shown}"
        );
    }

    #[test]
    fn a_broken_state_is_an_error_not_a_panic() {
        let bytes = state().encode();
        for cut in 0..bytes.len() {
            assert!(Handed::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = bytes.to_vec();
        trailing.push(0);
        assert_eq!(Handed::decode(&trailing), Err(DecodeError::Trailing(1)));
        let mut bad = bytes.to_vec();
        bad[4] = 9;
        assert!(matches!(
            Handed::decode(&bad),
            Err(DecodeError::Unknown { .. })
        ));
        // A count larger than the bytes left allocates nothing.
        let mut lying = MAGIC.to_vec();
        lying.extend([4, 0, 0, 0, 0]);
        lying.extend(0u32.to_be_bytes());
        lying.extend(u32::MAX.to_be_bytes());
        assert!(matches!(
            Handed::decode(&lying),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[tokio::test]
    async fn a_socket_and_its_state_cross_to_the_listener() {
        let dir = std::env::temp_dir().join(format!("autoprep-handover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h.sock");
        // A stale file is replaced.
        std::fs::write(&path, b"stale").unwrap();
        let listener = listen(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // The connection to hand over: one end of a socket pair.
        let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let taker = tokio::spawn(async move {
            let (mut probe, _) = listener.accept().await.unwrap();
            assert!(matches!(
                receive(&mut probe, 1 << 20).await.unwrap(),
                Received::Probe
            ));
            ack(&mut probe).await.unwrap();
            let (mut sock, _) = listener.accept().await.unwrap();
            let Received::Statements(known) = receive(&mut sock, 1 << 20).await.unwrap() else {
                panic!("statements")
            };
            ack(&mut sock).await.unwrap();
            let (mut sock, _) = listener.accept().await.unwrap();
            let Received::Connection(fd, got) = receive(&mut sock, 1 << 20).await.unwrap() else {
                panic!("a connection")
            };
            ack(&mut sock).await.unwrap();
            (fd, got, known)
        });
        assert!(probe(&path, Duration::from_secs(1)).await);
        send_statements(&path, &statements()).await.unwrap();
        send(&path, theirs.as_fd(), &state()).await.unwrap();
        let (fd, got, known) = taker.await.unwrap();
        assert_eq!(got, state());
        assert_eq!(known, statements());
        // The descriptor received is the same socket: what goes into it reaches our end.
        drop(theirs);
        let mut received = std::os::unix::net::UnixStream::from(fd);
        received.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        ours.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn nobody_listening_is_no_hand_over() {
        let path =
            std::env::temp_dir().join(format!("autoprep-nobody-{}.sock", std::process::id()));
        assert!(!probe(&path, Duration::from_millis(100)).await);
        let (_ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(send(&path, theirs.as_fd(), &state()).await.is_err());
    }
}
