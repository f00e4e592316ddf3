//! The exporter: its own thread with a current-thread Tokio runtime, fed by the threads'
//! buffers of [`super::handoff`]. Every 100 ms it takes what they hold (rather than being woken
//! for each span), sooner (down to 10 ms) when spans come fast enough to fill a buffer by then;
//! once [`BATCH`] spans wait, or the batch delay (`OTEL_BSP_SCHEDULE_DELAY`, 5 s by default)
//! has passed, or a flush asks, it encodes them, [`BATCH`] at a time, as OTLP requests
//! ([`super::otlp`]) and sends them over OTLP/gRPC (a tonic channel) or OTLP/HTTP with a
//! protobuf body (a hyper client), with the resource the SDK's detectors read
//! (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`; `service.name` defaults to `autoprep`).
//!
//! The transport is built and every export runs inside that runtime (tonic's channel and hyper's
//! connections spawn their tasks on it), so the proxy's own runtime never runs export work.

use super::handoff::Handoff;
use super::otlp::Encoder;
use super::record::{Counters, SpanRecord};
use super::settings::{Protocol, Settings};
use bytes::{Buf, BufMut, Bytes};
use opentelemetry_sdk::Resource;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Spans per export (the SDK's default `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
pub const BATCH: usize = 512;
/// How often the exporter takes the threads' spans when they come slowly: about a tenth of a
/// second's worth of system calls and context switches at most, whatever the load.
const POLL: Duration = Duration::from_millis(100);
/// How often at most, when they come fast: each thread's buffer holds
/// [`super::handoff::QUEUE`] (2,048) spans, so a thread may record about 200,000 spans a
/// second before one is dropped (20,000 at [`POLL`]).
const POLL_MIN: Duration = Duration::from_millis(10);

/// When to take the threads' spans next, `collected` having come in `since`: soon enough
/// that, at that rate, a thread's buffer is at most half full by then (the total stands for
/// the busiest thread's), between [`POLL_MIN`] and [`POLL`].
fn next_poll(collected: usize, since: Duration) -> Duration {
    let half = (super::handoff::QUEUE / 2) as u32;
    match u32::try_from(collected) {
        Ok(0) => POLL,
        Ok(n) => (since * half / n).clamp(POLL_MIN, POLL),
        Err(_) => POLL_MIN,
    }
}
/// The longest one export may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A flush request: export what is recorded, then answer on it.
pub type Flush = SyncSender<()>;

/// Starts the exporter's thread, which takes the spans `handoff` receives; returns where flush
/// requests go (dropping it stops the exporter, after a last export).
pub fn spawn(
    settings: &Settings,
    handoff: Arc<Handoff>,
    counters: Arc<Counters>,
) -> anyhow::Result<SyncSender<Flush>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let transport = {
        let _in = rt.enter();
        Transport::new(settings)?
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(16);
    let delay = settings.batch_delay;
    std::thread::Builder::new()
        .name("autoprep-otel".into())
        .spawn(move || run(rt, transport, &handoff, rx, &counters, delay))?;
    Ok(tx)
}

/// How an encoded request reaches the collector.
enum Transport {
    /// OTLP/gRPC: the `TraceService/Export` call on a tonic channel (HTTP/2, reconnecting).
    Grpc(tonic::client::Grpc<tonic::transport::Channel>),
    /// OTLP/HTTP: a POST of the protobuf body to the traces URL (HTTP/1.1, kept alive).
    Http {
        client: hyper_util::client::legacy::Client<
            hyper_util::client::legacy::connect::HttpConnector,
            http_body_util::Full<Bytes>,
        >,
        uri: hyper::Uri,
    },
}

/// The gRPC method OTLP/gRPC calls (`opentelemetry/proto/collector/trace/v1/trace_service.proto`).
const EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

impl Transport {
    fn new(settings: &Settings) -> anyhow::Result<Transport> {
        Ok(match settings.protocol {
            Protocol::Grpc => {
                let channel = tonic::transport::Channel::from_shared(settings.endpoint.clone())?
                    .timeout(TIMEOUT)
                    .connect_lazy();
                Transport::Grpc(tonic::client::Grpc::new(channel))
            }
            Protocol::HttpProtobuf => Transport::Http {
                client: hyper_util::client::legacy::Client::builder(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .build_http(),
                uri: settings.endpoint.parse()?,
            },
        })
    }

    /// Sends one `ExportTraceServiceRequest`.
    async fn export(&mut self, body: Bytes) -> Result<(), String> {
        match self {
            Transport::Grpc(grpc) => {
                grpc.ready().await.map_err(|e| e.to_string())?;
                let path = http::uri::PathAndQuery::from_static(EXPORT_PATH);
                grpc.unary(tonic::Request::new(body), path, Raw)
                    .await
                    .map(|_| ())
                    .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
            }
            Transport::Http { client, uri } => {
                let request = hyper::Request::post(uri.clone())
                    .header(hyper::header::CONTENT_TYPE, "application/x-protobuf")
                    .body(http_body_util::Full::new(body))
                    .map_err(|e| e.to_string())?;
                let call = async {
                    let answer = client.request(request).await.map_err(|e| e.to_string())?;
                    let status = answer.status();
                    // Read the answer to its end: the connection is then kept for the next.
                    http_body_util::BodyExt::collect(answer.into_body())
                        .await
                        .map_err(|e| e.to_string())?;
                    if status.is_success() {
                        Ok(())
                    } else {
                        Err(format!("the collector answered {status}"))
                    }
                };
                tokio::time::timeout(TIMEOUT, call)
                    .await
                    .map_err(|_| format!("no answer in {TIMEOUT:?}"))?
            }
        }
    }
}

/// A codec for an already encoded request, whose answer (an `ExportTraceServiceResponse`,
/// possibly a partial success) is not read.
#[derive(Debug, Clone, Copy)]
struct Raw;

impl tonic::codec::Codec for Raw {
    type Encode = Bytes;
    type Decode = ();
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl tonic::codec::Encoder for Raw {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Bytes,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

impl tonic::codec::Decoder for Raw {
    type Item = ();
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<()>, tonic::Status> {
        src.advance(src.remaining());
        Ok(Some(()))
    }
}

/// The SDK's resource from the environment, `service.name` `autoprep` unless it names one.
pub fn resource() -> Resource {
    let detected = Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::new("service.name"))
        .is_some_and(|v| !v.as_str().starts_with("unknown_service"));
    if named {
        detected
    } else {
        Resource::builder().with_service_name("autoprep").build()
    }
}

fn run(
    rt: tokio::runtime::Runtime,
    mut transport: Transport,
    handoff: &Handoff,
    flushes: Receiver<Flush>,
    counters: &Counters,
    delay: Duration,
) {
    let mut encoder = Encoder::new(&resource());
    let mut pending: Vec<SpanRecord> = Vec::new();
    let mut spare: Vec<SpanRecord> = Vec::new();
    let mut waiters: Vec<Flush> = Vec::new();
    let mut due = Instant::now() + delay;
    let (mut poll, mut polled) = (POLL, Instant::now());
    loop {
        // Wait for a flush request or the next poll, not for spans: an exporter woken for
        // every span would cost the data path a system call and itself two context switches
        // per span. A flush (a drain's, a test's) is answered at once rather than at the poll.
        let mut closed = false;
        match flushes.recv_timeout(poll.min(due.saturating_duration_since(Instant::now()))) {
            Ok(w) => waiters.push(w),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => closed = true,
        }
        while !closed {
            match flushes.try_recv() {
                Ok(w) => waiters.push(w),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => closed = true,
            }
        }
        let before = pending.len();
        handoff.collect(&mut pending, &mut spare);
        let now = Instant::now();
        poll = next_poll(pending.len() - before, now - polled);
        polled = now;
        if pending.len() >= BATCH || !waiters.is_empty() || closed || Instant::now() >= due {
            for batch in pending.chunks(BATCH) {
                let body = encoder.request(batch);
                let outcome = rt.block_on(transport.export(body));
                let counter = match outcome {
                    Ok(()) => &counters.exported,
                    Err(e) => {
                        tracing::debug!(error = %e, "span export failed");
                        &counters.failed
                    }
                };
                counter.fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
            pending.clear();
            for w in waiters.drain(..) {
                let _ = w.send(());
            }
            due = Instant::now() + delay;
        }
        if closed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_sooner_as_spans_come_faster() {
        let tenth = Duration::from_millis(100);
        assert_eq!(next_poll(0, tenth), POLL);
        assert_eq!(
            next_poll(500, tenth),
            POLL,
            "a buffer under half full by the next poll"
        );
        // 2,048 spans in 100 ms: 1,024 (half a buffer) come in 50 ms.
        assert_eq!(next_poll(2048, tenth), Duration::from_millis(50));
        assert_eq!(next_poll(1 << 20, tenth), POLL_MIN);
        assert_eq!(next_poll(usize::MAX, tenth), POLL_MIN);
    }
}
