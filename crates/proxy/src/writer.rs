//! The write side of a connection: an [`Outbox`] per socket. Senders push whole envelopes
//! (framed into v5 segments once framing has started); the reader that pushed them calls
//! [`Outbox::flush`] when it has handled what one read brought, and the bytes go to the socket
//! right there, in one system call, when it takes them (plain TCP). Only what the socket does
//! not take at once (a full send buffer), and everything on a TLS socket, is written by the
//! outbox's writer task, which sleeps otherwise.
//!
//! So a request and its answer wake the connection's task twice (the two reads), as a
//! byte splice does, rather than also waking a writer task per direction; and answers decoded
//! from one read leave in one write. Order is kept: once a backlog exists, everything goes
//! behind it through the writer task until it is written.
//!
//! Envelopes pushed in the order they lie in the reader's buffer (a batch passed through:
//! only their stream ids patched in place) are joined where they lie (`BytesMut::unsplit`)
//! rather than copied, so such a batch is written from the read buffer itself.

use crate::socket::WriteHalf;
use autoprep_protocol::segment::SegmentEncoder;
use bytes::BytesMut;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::Notify;
use tokio_util::either::Either;

/// What a sender asks of an outbox.
#[derive(Debug)]
pub enum Out {
    /// Write one whole envelope (framed into segments when framing is on), or a run of whole
    /// envelopes one after another; once framing is on, a run must fit one segment's payload
    /// ([`autoprep_protocol::segment::MAX_PAYLOAD`]: see `FramedDecoder::take_run`), since a
    /// larger one would be split over segments as a single large envelope is.
    Envelope(BytesMut),
    /// From now on wrap envelopes in v5 segments (LZ4-compressed when `lz4`).
    StartFraming { lz4: bool },
}

/// The socket is gone (closed or failed): nothing more can be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// Above this many bytes waiting, a sender waits until the writer task has written some
/// (backpressure toward the reader that produces them).
const BACKLOG_LIMIT: usize = 1024 * 1024;

#[derive(Debug, Default)]
struct State {
    /// Bytes pushed and not yet handed to the socket.
    pending: BytesMut,
    framing: Option<SegmentEncoder>,
    /// The writer task owns the writing: set while it has a backlog to write (and always on
    /// TLS); senders then leave everything to it, in order.
    writer_busy: bool,
    closed: bool,
    failed: bool,
    /// Plain TCP: the socket, for writes from the flushing reader. Under the lock the flush
    /// takes anyway, so that it can be let go of ([`Outbox::release`]) while the outbox lives
    /// on, and is when the socket fails.
    direct: Option<Arc<OwnedWriteHalf>>,
}

impl State {
    /// Closes the v5 segment being gathered, so that `pending` holds only whole segments: called
    /// before its bytes are written.
    fn seal(&mut self) {
        // After a failure `pending` was dropped, and with it any segment being gathered.
        if self.failed {
            return;
        }
        if let Some(enc) = &mut self.framing {
            enc.finish(&mut self.pending);
        }
    }
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Wakes the writer task.
    work: Notify,
    /// Wakes a sender waiting for the backlog to shrink.
    space: Notify,
    sent: Option<Arc<AtomicU64>>,
}

/// One socket's outbox; cheap to clone (every clone is the same outbox).
#[derive(Debug, Clone)]
pub struct Outbox {
    inner: Arc<Inner>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count(&self, n: usize) {
        if let Some(sent) = &self.sent {
            sent.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

impl Outbox {
    /// An outbox over `sock`, and its writer task (to spawn), which ends once the outbox is
    /// closed and everything pushed is written, or the socket fails. `sent`, when given,
    /// counts the bytes written.
    pub fn new(
        sock: WriteHalf,
        sent: Option<Arc<AtomicU64>>,
    ) -> (Outbox, impl std::future::Future<Output = ()> + Send) {
        let (direct, writer) = match sock {
            Either::Left(tcp) => {
                let tcp = Arc::new(tcp);
                (Some(tcp.clone()), Either::Left(tcp))
            }
            Either::Right(tls) => (None, Either::Right(tls)),
        };
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                direct,
                ..State::default()
            }),
            work: Notify::new(),
            space: Notify::new(),
            sent,
        });
        let task = write_backlog(inner.clone(), writer);
        (Outbox { inner }, task)
    }

    /// Pushes `out` (written at the next [`Outbox::flush`] at the latest); waits while the
    /// backlog is over its limit.
    ///
    /// The push happens when this is called, not when the future is first polled (every
    /// caller awaits it at once): the future returned is a few bytes, where an `async fn`
    /// holding `out` was large enough to be built and moved with `memcpy` for every envelope.
    pub fn send(
        &self,
        out: Out,
    ) -> impl std::future::Future<Output = Result<(), Gone>> + Send + '_ {
        let pushed = self.push(out);
        async move {
            if pushed? {
                self.flush();
                self.wait_for_room().await?;
            }
            Ok(())
        }
    }

    /// Adds `out` to what is pending; whether the backlog is now over its limit.
    fn push(&self, out: Out) -> Result<bool, Gone> {
        let mut st = self.inner.lock();
        if st.closed || st.failed {
            return Err(Gone);
        }
        match out {
            Out::Envelope(frame) => {
                let st = &mut *st;
                match &mut st.framing {
                    // The segment stays open for the envelopes that follow until the bytes
                    // are written (`State::seal`): one segment per write, as drivers and the
                    // server pack them, rather than one per envelope.
                    Some(enc) => enc.push(&frame, &mut st.pending),
                    // Frames split one after the other off a read buffer (a pass-through
                    // batch) join where they lie, without a copy; others are copied.
                    None => st.pending.unsplit(frame),
                }
            }
            Out::StartFraming { lz4 } => st.framing = Some(SegmentEncoder::new(lz4)),
        }
        Ok(st.pending.len() > BACKLOG_LIMIT)
    }

    /// Writes what was pushed: on plain TCP straight to the socket when it takes it and the
    /// writer task has no backlog; whatever is left goes to the writer task.
    pub fn flush(&self) {
        let mut guard = self.inner.lock();
        let st = &mut *guard;
        st.seal();
        if st.pending.is_empty() || st.writer_busy || st.failed {
            return;
        }
        if let Some(tcp) = &st.direct {
            match tcp.try_write(&st.pending) {
                Ok(n) => {
                    self.inner.count(n);
                    if n == st.pending.len() {
                        // Not `clear`: the buffer may be a frame taken whole, whose
                        // allocation is the read buffer it was split from.
                        st.pending = BytesMut::new();
                        return;
                    }
                    let _ = st.pending.split_to(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => {
                    st.failed = true;
                    st.pending = BytesMut::new();
                    drop(guard);
                    self.inner.space.notify_one();
                    self.inner.work.notify_one();
                    return;
                }
            }
        }
        st.writer_busy = true;
        drop(guard);
        self.inner.work.notify_one();
    }

    async fn wait_for_room(&self) -> Result<(), Gone> {
        loop {
            {
                let st = self.inner.lock();
                if st.failed {
                    return Err(Gone);
                }
                if st.pending.len() <= BACKLOG_LIMIT {
                    return Ok(());
                }
            }
            self.inner.space.notified().await;
        }
    }

    /// Everything pushed was written, and the socket never failed (once the writer task has
    /// ended after [`Outbox::close`]: nothing is pending toward the client).
    pub fn written_all(&self) -> bool {
        let st = self.inner.lock();
        !st.failed && st.pending.is_empty()
    }

    /// No more envelopes: the writer task writes what is left and shuts the socket's write
    /// side down.
    pub fn close(&self) {
        self.flush();
        self.inner.lock().closed = true;
        self.inner.work.notify_one();
    }

    /// After [`Outbox::close`], for an outbox that outlives its socket's use (the old home of
    /// a client connection moved to a new one lives until the client reader's next read):
    /// lets go of its handle on the socket, so that the socket's write side is shut down and
    /// its descriptor closed (with the read side) once the writer task has written what is
    /// left, not when the outbox goes.
    pub fn release(&self) {
        self.inner.lock().direct = None;
    }
}

/// The writer task: writes the backlog whenever the outbox has one, until it is closed and
/// empty, or the socket fails.
async fn write_backlog(
    inner: Arc<Inner>,
    mut sock: Either<Arc<OwnedWriteHalf>, tokio::io::WriteHalf<WriteTls>>,
) {
    loop {
        let chunk = {
            let mut st = inner.lock();
            st.seal();
            let tls = matches!(sock, Either::Right(_));
            if st.failed {
                break;
            }
            if st.pending.is_empty() || !(st.writer_busy || tls || st.closed) {
                st.writer_busy = false;
                if st.closed && st.pending.is_empty() {
                    break;
                }
                None
            } else {
                st.writer_busy = true;
                // `take`, not `split`: an empty remainder would still hold the allocation.
                Some(std::mem::take(&mut st.pending))
            }
        };
        let Some(chunk) = chunk else {
            inner.work.notified().await;
            continue;
        };
        let written = match &mut sock {
            Either::Left(tcp) => write_tcp(tcp, &chunk).await,
            Either::Right(tls) => write_all(tls, &chunk).await,
        };
        inner.space.notify_one();
        match written {
            Ok(()) => inner.count(chunk.len()),
            Err(_) => {
                let mut st = inner.lock();
                st.failed = true;
                st.pending = BytesMut::new();
                st.direct = None;
                drop(st);
                inner.space.notify_one();
                return;
            }
        }
    }
    if let Either::Right(tls) = &mut sock {
        let _ = tls.shutdown().await;
    }
    // A plain socket's write side is shut down when its last handle (the outbox's, unless
    // released, and this task's) is dropped. The outbox keeps its handle otherwise: a socket
    // handed to the next process must not be shut down (see `session::hand_over`).
}

type WriteTls = tokio_rustls::TlsStream<tokio::net::TcpStream>;

async fn write_tcp(tcp: &OwnedWriteHalf, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        tcp.writable().await?;
        match tcp.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn write_all<W: AsyncWrite + Unpin>(sock: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    sock.write_all(bytes).await?;
    // TLS keeps what the socket did not take yet.
    sock.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoprep_protocol::segment::SegmentDecoder;
    use tokio::io::AsyncReadExt;

    /// A v4-shaped envelope of 9 bytes with `tag` as its stream id.
    fn envelope(tag: u8) -> BytesMut {
        BytesMut::from(&[0x05, 0, 0, tag, 0x07, 0, 0, 0, 0][..])
    }

    /// The segments of everything one outbox writes for `pushes` (each flushed at once when
    /// `flushes_between`).
    async fn segments_of(pushes: &[&[u8]], flushes_between: bool, lz4: bool) -> Vec<Vec<u8>> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (_rd, wr) = crate::socket::into_split(crate::socket::plain(a.unwrap()));
        let (outbox, task) = Outbox::new(wr, None);
        tokio::spawn(task);
        outbox.send(Out::StartFraming { lz4 }).await.unwrap();
        for p in pushes {
            outbox
                .send(Out::Envelope(BytesMut::from(*p)))
                .await
                .unwrap();
            if flushes_between {
                outbox.flush();
            }
        }
        outbox.flush();
        let want: usize = pushes.iter().map(|p| p.len()).sum();
        let (mut sock, _) = b.unwrap();
        let decoder = SegmentDecoder::new(lz4);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut got = 0;
        while got < want {
            sock.read_buf(&mut buf).await.unwrap();
            while let Some(s) = decoder.decode(&mut buf).unwrap() {
                got += s.payload.len();
                out.push(s.payload.to_vec());
            }
        }
        out
    }

    /// A closed and released outbox that outlives its writer task (the old home of a client
    /// connection moved to a new one) holds no handle on the socket: its write side is shut
    /// down when the task ends, and the descriptor closes with the read side. Not released
    /// (a client socket handed to the next process), it keeps it.
    #[tokio::test]
    async fn a_closed_outbox_lets_go_of_its_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (rd, wr) = crate::socket::into_split(crate::socket::plain(a.unwrap()));
        let (outbox, task) = Outbox::new(wr, None);
        let task = tokio::spawn(task);
        outbox.send(Out::Envelope(envelope(1))).await.unwrap();
        outbox.close();
        task.await.unwrap();
        let (mut peer, _) = b.unwrap();
        let mut got = vec![0u8; 9];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(got, envelope(1).to_vec());
        let mut more = [0u8; 1];
        let wait = std::time::Duration::from_millis(300);
        let read = tokio::time::timeout(wait, peer.read(&mut more)).await;
        assert!(read.is_err(), "kept: the socket is not shut down");
        outbox.release();
        drop(rd);
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), peer.read(&mut more));
        assert_eq!(
            read.await.ok().map(Result::unwrap),
            Some(0),
            "released: the end"
        );
        assert!(outbox.written_all());
    }

    #[tokio::test]
    async fn envelopes_pushed_between_two_writes_share_one_segment() {
        let (a, b, c) = (envelope(1), envelope(2), envelope(3));
        for lz4 in [false, true] {
            let segs = segments_of(&[&a, &b, &c], false, lz4).await;
            assert_eq!(segs, vec![[&a[..], &b[..], &c[..]].concat()], "lz4 {lz4}");
            // Flushed after each: a segment each (each is written at once).
            let segs = segments_of(&[&a, &b, &c], true, lz4).await;
            assert_eq!(segs, vec![a.to_vec(), b.to_vec(), c.to_vec()], "lz4 {lz4}");
        }
    }
}
