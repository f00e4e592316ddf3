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
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut written = 0u64;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(msg) = next {
            match msg {
                Out::Envelope(frame) => match &mut framing {
                    Some(enc) => enc.push(&frame, &mut out),
                    // A lone unframed envelope is written from its own buffer, with no copy.
                    None if out.is_empty() && rx.is_empty() => out = frame,
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
        sock.write_all(&out).await?;
        // TLS keeps what the socket did not take yet; plain TCP returns at once.
        sock.flush().await?;
        written += out.len() as u64;
        if let Some(sent) = &sent {
            sent.fetch_add(out.len() as u64, Ordering::Relaxed);
        }
        out.clear();
    }
    let _ = sock.shutdown().await;
    Ok(written)
}
