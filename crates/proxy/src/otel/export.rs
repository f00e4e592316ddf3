//! The exporter: its own thread with a current-thread Tokio runtime, fed by a bounded queue
//! (`std::sync::mpsc::sync_channel`, a preallocated ring: queuing a span allocates nothing on
//! the data path). It collects up to [`BATCH`] spans or waits the batch delay
//! (`OTEL_BSP_SCHEDULE_DELAY`, 5 s by default), looking at the queue every 100 ms rather than
//! being woken for each span, turns them into span
//! data ([`super::span`]) and exports them with `opentelemetry-otlp`'s exporter over gRPC
//! (tonic) or HTTP/protobuf (hyper), with the resource the SDK's detectors read
//! (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`; `service.name` defaults to `autoprep`).
//!
//! The exporter is built and every export runs inside that runtime (tonic's channel and hyper's
//! connections spawn their tasks on it), so the proxy's own runtime never runs export work.

use super::record::{Counters, SpanRecord};
use super::settings::{Protocol, Settings};
use opentelemetry::InstrumentationScope;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SpanExporter as _;
use opentelemetry_sdk::Resource;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Spans the queue holds (the SDK's default `OTEL_BSP_MAX_QUEUE_SIZE`).
pub const QUEUE: usize = 2048;
/// Spans per export (the SDK's default `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
pub const BATCH: usize = 512;
/// How often the exporter looks at its queue: 2,048 spans every 100 ms is 20,000 spans a
/// second before the queue drops any.
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
    let exporter = {
        let _in = rt.enter();
        build(settings)?
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
    let delay = settings.batch_delay;
    std::thread::Builder::new()
        .name("autoprep-otel".into())
        .spawn(move || run(rt, exporter, rx, &counters, delay))?;
    Ok(tx)
}

/// The OTLP exporter for `settings`, with its resource set.
fn build(settings: &Settings) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
    let mut exporter = match settings.protocol {
        Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(settings.endpoint.clone())
            .with_timeout(TIMEOUT)
            .build()?,
        Protocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.clone())
            .with_timeout(TIMEOUT)
            .build()?,
    };
    exporter.set_resource(&resource());
    Ok(exporter)
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
    exporter: opentelemetry_otlp::SpanExporter,
    rx: Receiver<Message>,
    counters: &Counters,
    delay: Duration,
) {
    let scope = InstrumentationScope::builder("autoprep")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let mut batch: Vec<SpanRecord> = Vec::with_capacity(BATCH);
    let mut waiters: Vec<SyncSender<()>> = Vec::new();
    let mut due = Instant::now() + delay;
    loop {
        // Sleep, not wait on the queue: a blocked receiver would be woken (a futex call on the
        // sending side, two context switches here) for every span; a sleeping one is not.
        std::thread::sleep(POLL.min(due.saturating_duration_since(Instant::now())));
        let mut closed = false;
        while !closed && batch.len() < BATCH {
            match rx.try_recv() {
                Ok(m) => take(m, &mut batch, &mut waiters),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => closed = true,
            }
        }
        let full = batch.len() >= BATCH;
        if full || !waiters.is_empty() || closed || Instant::now() >= due {
            if !batch.is_empty() {
                let data = batch
                    .iter()
                    .map(|r| super::span::span_data(r, &scope))
                    .collect();
                let n = batch.len() as u64;
                batch.clear();
                let outcome = rt.block_on(exporter.export(data));
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
