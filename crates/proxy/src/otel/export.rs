//! The exporter: its own thread with a current-thread Tokio runtime, fed by a bounded queue
//! (`std::sync::mpsc::sync_channel`, a preallocated ring: queuing a span allocates nothing on
//! the data path). It collects up to [`BATCH`] spans or waits the batch delay
//! (`OTEL_BSP_SCHEDULE_DELAY`, 5 s by default), looking at the queue every 100 ms rather than
//! being woken for each span, encodes them as one OTLP request ([`super::otlp`]) and sends it
//! over OTLP/gRPC (a tonic channel) or OTLP/HTTP with a protobuf body (a hyper client), with
//! the resource the SDK's detectors read (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`;
//! `service.name` defaults to `autoprep`).
//!
//! The transport is built and every export runs inside that runtime (tonic's channel and hyper's
//! connections spawn their tasks on it), so the proxy's own runtime never runs export work.

use super::otlp::Encoder;
use super::record::{Counters, SpanRecord};
use super::settings::{Protocol, Settings};
use bytes::{Buf, BufMut, Bytes};
use opentelemetry_sdk::Resource;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Spans the queue holds (the SDK's default `OTEL_BSP_MAX_QUEUE_SIZE`).
pub const QUEUE: usize = 2048;
/// Spans per export (the SDK's default `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
pub const BATCH: usize = 512;
/// How often an idle exporter looks at its queue: from idle, 2,048 spans within 100 ms
/// (20,000 spans a second) before the queue drops any; once a poll finds a full batch, the
/// exporter drains the queue batch after batch without sleeping.
const POLL: Duration = Duration::from_millis(100);
/// The longest one export may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// What the exporter's queue carries.
#[derive(Debug)]
pub enum Message {
    Span(Box<SpanRecord>),
    /// Export what is queued, then answer.
    Flush(SyncSender<()>),
}

/// Starts the exporter's thread; returns its queue.
pub fn spawn(settings: &Settings, counters: Arc<Counters>) -> anyhow::Result<SyncSender<Message>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let transport = {
        let _in = rt.enter();
        Transport::new(settings)?
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
    let delay = settings.batch_delay;
    std::thread::Builder::new()
        .name("autoprep-otel".into())
        .spawn(move || run(rt, transport, rx, &counters, delay))?;
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
    rx: Receiver<Message>,
    counters: &Counters,
    delay: Duration,
) {
    let mut encoder = Encoder::new(&resource());
    let mut batch: Vec<SpanRecord> = Vec::with_capacity(BATCH);
    let mut waiters: Vec<SyncSender<()>> = Vec::new();
    let mut due = Instant::now() + delay;
    let mut drained = true;
    loop {
        // Sleep, not wait on the queue: a blocked receiver would be woken (a futex call on the
        // sending side, two context switches here) for every span; a sleeping one is not. After
        // a full batch, no sleep: more may be queued (the exporter keeps up with the encoding's
        // pace, not one batch per poll).
        if drained {
            std::thread::sleep(POLL.min(due.saturating_duration_since(Instant::now())));
        }
        let mut closed = false;
        while !closed && batch.len() < BATCH {
            match rx.try_recv() {
                Ok(m) => take(m, &mut batch, &mut waiters),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => closed = true,
            }
        }
        let full = batch.len() >= BATCH;
        drained = !full;
        if full || !waiters.is_empty() || closed || Instant::now() >= due {
            if !batch.is_empty() {
                let body = encoder.request(&batch);
                let n = batch.len() as u64;
                batch.clear();
                let outcome = rt.block_on(transport.export(body));
                let counter = match outcome {
                    Ok(()) => &counters.exported,
                    Err(e) => {
                        tracing::debug!(error = %e, "span export failed");
                        &counters.failed
                    }
                };
                counter.fetch_add(n, Ordering::Relaxed);
            }
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

/// Adds a message to the batch or to the flush waiters.
fn take(m: Message, batch: &mut Vec<SpanRecord>, waiters: &mut Vec<SyncSender<()>>) {
    match m {
        Message::Span(r) => batch.push(*r),
        Message::Flush(w) => waiters.push(w),
    }
}
