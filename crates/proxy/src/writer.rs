//! The write side of a connection: one task per socket that takes whole envelopes from a
//! bounded channel, frames them (v5 segments once framing has started), and writes everything
//! that is ready in one `write` call.

use autoprep_protocol::segment::SegmentEncoder;
use bytes::BytesMut;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// What a writer is asked to do.
#[derive(Debug)]
pub enum Out {
    /// Write one whole envelope (framed into segments when framing is on).
    Envelope(BytesMut),
    /// From now on wrap envelopes in v5 segments (LZ4-compressed when `lz4`).
    StartFraming { lz4: bool },
}

/// Above this many buffered bytes a batch is written without waiting for more.
const BATCH_BYTES: usize = 256 * 1024;

/// A write buffer larger than this is given back after its write.
const KEEP_BYTES: usize = 64 * 1024;

/// Writes `bytes` whole, flushes (TLS keeps what the socket did not take yet; plain TCP
/// returns at once) and counts them in `sent`.
async fn write<W: AsyncWrite + Unpin>(
    sock: &mut W,
    bytes: &[u8],
    sent: &Option<Arc<AtomicU64>>,
) -> std::io::Result<()> {
    sock.write_all(bytes).await?;
    sock.flush().await?;
    if let Some(sent) = sent {
        sent.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Writes until the channel closes (every sender dropped) or the socket fails, then shuts the
/// socket's write side down. Returns the number of bytes written.
pub async fn run<W: AsyncWrite + Unpin>(rx: mpsc::Receiver<Out>, sock: W) -> std::io::Result<u64> {
    run_counted(rx, sock, None).await
}

/// Like [`run`], also adding every write's size to `sent` as it happens (the metrics' bytes
/// out).
pub async fn run_counted<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<Out>,
    mut sock: W,
    sent: Option<Arc<AtomicU64>>,
) -> std::io::Result<u64> {
    let mut framing: Option<SegmentEncoder> = None;
    // Starts empty and keeps at most `KEEP_BYTES` between writes: an idle connection holds
    // no write buffer, and a large answer's memory goes back once it is written.
    let mut out = BytesMut::new();
    let mut written = 0u64;
    while let Some(first) = rx.recv().await {
        if let (Out::Envelope(frame), None, true) = (&first, &framing, rx.is_empty()) {
            // A lone unframed envelope is written from its own buffer, with no copy.
            write(&mut sock, frame, &sent).await?;
            written += frame.len() as u64;
            continue;
        }
        let mut next = Some(first);
        while let Some(msg) = next {
            match msg {
                Out::Envelope(frame) => match &mut framing {
                    Some(enc) => enc.push(&frame, &mut out),
                    None => out.extend_from_slice(&frame),
                },
                Out::StartFraming { lz4 } => {
                    if let Some(enc) = &mut framing {
                        enc.finish(&mut out);
                    }
                    framing = Some(SegmentEncoder::new(lz4));
                }
            }
            if out.len() >= BATCH_BYTES {
                break;
            }
            next = rx.try_recv().ok();
        }
        if let Some(enc) = &mut framing {
            enc.finish(&mut out);
        }
        write(&mut sock, &out, &sent).await?;
        written += out.len() as u64;
        if out.capacity() > KEEP_BYTES {
            out = BytesMut::new();
        } else {
            out.clear();
        }
    }
    let _ = sock.shutdown().await;
    Ok(written)
}
