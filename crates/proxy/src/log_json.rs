//! Log lines as JSON (`--log-format json`): one object per line with `timestamp` (RFC 3339,
//! UTC, microseconds), `level`, `target`, `message`, the event's other fields, the fields of
//! each span it happened in under the span's name (`"conn": {"id": 7, "peer": "..."}`), and
//! `trace_id` / `span_id` at the top when a span in scope carries them (the `request` span
//! [`crate::otel`] opens around the log line of a traced request).
//!
//! A `tracing-subscriber` layer of its own rather than the crate's `json` formatter: that one
//! nests span fields under a `span` key and cannot lift the trace ids to the top, which is
//! where log pipelines (the OpenTelemetry Collector's JSON parser, Loki, Elasticsearch) look
//! for them.

use serde_json::{Map, Value};
use std::fmt;
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Writes each event as one JSON line to `W` (standard output in the binary).
pub struct JsonLayer<W> {
    make_writer: W,
}

impl<W> JsonLayer<W>
where
    W: Fn() -> Box<dyn std::io::Write> + Send + Sync + 'static,
{
    /// A layer writing through what `make_writer` returns, once per line.
    pub fn new(make_writer: W) -> Self {
        JsonLayer { make_writer }
    }
}

/// A span's fields, kept in its extensions.
struct Fields(Map<String, Value>);

/// Collects fields into a JSON map.
struct Collect<'a>(&'a mut Map<String, Value>);

impl Visit for Collect<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::from(format!("{value:?}")));
    }
}

impl<S, W> Layer<S> for JsonLayer<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: Fn() -> Box<dyn std::io::Write> + Send + Sync + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut map = Map::new();
        attrs.record(&mut Collect(&mut map));
        span.extensions_mut().insert(Fields(map));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(Fields(map)) = ext.get_mut::<Fields>() {
            values.record(&mut Collect(map));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert("timestamp".into(), Value::from(rfc3339(SystemTime::now())));
        line.insert("level".into(), Value::from(meta.level().as_str()));
        line.insert("target".into(), Value::from(meta.target()));
        let mut fields = Map::new();
        event.record(&mut Collect(&mut fields));
        line.insert(
            "message".into(),
            fields.remove("message").unwrap_or(Value::from("")),
        );
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                let ext = span.extensions();
                let Some(Fields(map)) = ext.get::<Fields>() else {
                    continue;
                };
                for key in ["trace_id", "span_id"] {
                    if let Some(v) = map.get(key) {
                        line.insert(key.into(), v.clone());
                    }
                }
                line.insert(span.name().into(), Value::Object(map.clone()));
            }
        }
        for (k, v) in fields {
            line.entry(k).or_insert(v);
        }
        let mut text = Value::Object(line).to_string();
        text.push('\n');
        let _ = (self.make_writer)().write_all(text.as_bytes());
    }
}

/// `t` as RFC 3339 in UTC with microseconds, e.g. `2026-11-29T03:35:42.123456Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (the era arithmetic of
/// H. Hinnant's "chrono-Compatible Low-Level Date Algorithms", written out here).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tracing_subscriber::layer::SubscriberExt as _;

    #[test]
    fn dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let t = UNIX_EPOCH + Duration::from_micros(1_709_251_199_123_456);
        assert_eq!(rfc3339(t), "2024-02-29T23:59:59.123456Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00.000000Z");
    }

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn one_object_per_line_with_span_fields_and_trace_ids() {
        let buf = Buf::default();
        let w = buf.clone();
        let subscriber = tracing_subscriber::registry().with(JsonLayer::new(move || {
            Box::new(w.clone()) as Box<dyn std::io::Write>
        }));
        tracing::subscriber::with_default(subscriber, || {
            let conn = tracing::info_span!("conn", id = 7u64, peer = "127.0.0.1:5000");
            let _c = conn.enter();
            tracing::warn!(error = "boom", "a \"quoted\" message");
            let req = tracing::info_span!("request", trace_id = "0af7", span_id = "b7ad");
            let _r = req.enter();
            tracing::info!("inside");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        let first = &lines[0];
        assert_eq!(first["level"], "WARN");
        assert_eq!(first["message"], "a \"quoted\" message");
        assert_eq!(first["error"], "boom");
        assert_eq!(first["conn"]["id"], 7);
        assert_eq!(first["conn"]["peer"], "127.0.0.1:5000");
        assert!(first.get("trace_id").is_none());
        assert!(first["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(lines[1]["trace_id"], "0af7");
        assert_eq!(lines[1]["span_id"], "b7ad");
        assert_eq!(lines[1]["target"], module_path!());
    }
}
