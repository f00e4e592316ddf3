//! The sampling decision, the facts read from requests, and the spans' attributes.

use super::settings::{Protocol, Sampler, Settings};
use super::*;
use crate::control::Group;
use autoprep_protocol::envelope::{Envelope, Flags, ProtocolVersion};
use autoprep_protocol::message::query::{encode_query, QueryParams};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn settings(ratio: f64, parent_based: bool) -> Settings {
    Settings {
        endpoint: "http://127.0.0.1:1/v1/traces".into(),
        protocol: Protocol::HttpProtobuf,
        sampler: Sampler {
            parent_based,
            ratio,
        },
        slow: Some(Duration::from_millis(100)),
        batch_delay: Duration::from_millis(100),
    }
}

fn tracing(ratio: f64, parent_based: bool) -> (Tracing, Arc<handoff::Handoff>) {
    let h = Arc::new(handoff::Handoff::default());
    (
        Tracing::with_handoff(&settings(ratio, parent_based), h.clone()),
        h,
    )
}

/// The records handed over so far.
fn handed(h: &handoff::Handoff) -> Vec<SpanRecord> {
    let (mut got, mut spare) = (Vec::new(), Vec::new());
    h.collect(&mut got, &mut spare);
    got
}

#[test]
fn off_decides_nothing() {
    let t = Tracing::off();
    assert!(!t.enabled());
    assert_eq!(t.decide(None, None, true, u64::MAX), Decision::Drop);
}

#[test]
fn errors_and_slow_requests_always_sampled() {
    let (t, _rx) = tracing(0.0, true);
    let unsampled = TraceParent::parse(TP.replace("-01", "-00").as_bytes()).unwrap();
    assert_eq!(
        t.decide(Some(&unsampled), None, false, 1_000),
        Decision::Drop
    );
    assert!(
        matches!(t.decide(Some(&unsampled), None, true, 1_000), Decision::Keep(SampledBy::Error, id) if id == unsampled.trace_id)
    );
    assert!(matches!(
        t.decide(None, None, false, 100_000_000),
        Decision::Keep(SampledBy::Slow, _)
    ));
    assert_eq!(t.decide(None, None, false, 99_999_999), Decision::Drop);
}

#[test]
fn head_sampling_follows_the_parent_or_the_ratio() {
    let sampled = TraceParent::parse(TP.as_bytes()).unwrap();
    let (parent_based, _rx) = tracing(0.0, true);
    assert!(matches!(
        parent_based.decide(Some(&sampled), None, false, 1),
        Decision::Keep(SampledBy::Head, _)
    ));
    let (ratio_only, _rx) = tracing(0.0, false);
    assert_eq!(
        ratio_only.decide(Some(&sampled), None, false, 1),
        Decision::Drop
    );
    // About the ratio asked for, over many new traces: drawn at the request, kept at the
    // answer under a trace id whose low half is the draw.
    let (one_percent, _rx) = tracing(0.01, true);
    let kept = (0..100_000)
        .filter_map(|_| one_percent.draw())
        .filter(|&low| {
            matches!(one_percent.decide(None, Some(low), false, 1),
                Decision::Keep(SampledBy::Head, id) if id[8..] == low.to_be_bytes())
        })
        .count();
    assert!((700..1300).contains(&kept), "{kept}");
    assert_eq!(one_percent.decide(None, None, false, 1), Decision::Drop);
}

/// A v4 QUERY envelope with `text`, page size 100 at LOCAL_QUORUM, and a custom payload.
fn query(text: &str, payload: Option<&str>) -> Envelope {
    let mut body = Vec::new();
    if let Some(tp) = payload {
        body.extend(1u16.to_be_bytes());
        body.extend(11u16.to_be_bytes());
        body.extend(b"traceparent");
        body.extend((tp.len() as i32).to_be_bytes());
        body.extend(tp.as_bytes());
    }
    let params = QueryParams {
        consistency: 0x0006,
        page_size: Some(100),
        ..Default::default()
    };
    encode_query(ProtocolVersion::V4, text.as_bytes(), &params, &mut body).unwrap();
    let mut frame = Envelope::request_frame(ProtocolVersion::V4, Opcode::QUERY, &body);
    if payload.is_some() {
        frame[1] |= Flags::CUSTOM_PAYLOAD;
    }
    let mut buf = frame;
    let dec = autoprep_protocol::envelope::EnvelopeDecoder::new(
        autoprep_protocol::envelope::Direction::Request,
        1 << 20,
    );
    dec.decode(&mut buf).unwrap().unwrap()
}

#[test]
fn facts_from_the_payload_and_from_a_comment() {
    let want = TraceParent::parse(TP.as_bytes());
    let f = Facts::of(
        &query("SELECT * FROM t WHERE k = 1", Some(TP)),
        None,
        Some("ks".into()),
    );
    assert_eq!(f.opcode, Opcode::QUERY.0);
    assert_eq!(f.parent, want);
    assert_eq!((f.consistency, f.page_size), (Some(6), Some(100)));
    assert_eq!(f.keyspace.as_deref(), Some("ks"));
    let commented = format!("SELECT * FROM t WHERE k = 1 /*traceparent='{TP}'*/");
    assert_eq!(Facts::of(&query(&commented, None), None, None).parent, want);
    assert_eq!(
        Facts::of(&query("SELECT 1 FROM t", None), None, None).parent,
        None
    );
}

#[test]
fn requests_keep_facts_by_client_stream() {
    let mut r = Requests::default();
    r.note(7, Facts::default());
    r.rewrite(7, "rewritten");
    r.routing(7, Err("single node"));
    r.rewrite(8, "not noted: ignored");
    let f = r.take(7).unwrap();
    assert_eq!(f.rewrite, Some("rewritten"));
    assert_eq!(f.routing, Some("single node"));
    assert!(r.take(7).is_none());
    // A replica's answer may come before the sender notes where it went.
    r.note(9, Facts::default());
    assert_eq!(r.take_routed(9).unwrap().routing, Some(record::REPLICA));
    // Stream ids 64 apart share a bit of the mask, not an entry.
    r.note(3, Facts::default());
    r.note(67, Facts::default());
    r.clear(131);
    assert!(r.take(3).is_some());
    assert!(r.take(67).is_some());
    assert_eq!(r.noted().load(Ordering::Relaxed), 0);
    assert!(r.take(3).is_none());
}

fn value<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn text(v: &Value) -> String {
    match v {
        Value::StringValue(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// The wall clock the tests' spans are placed by: 1.7e18 ns since the Unix epoch at stamp 0.
const CLOCK_AT_0: u64 = 1_700_000_000_000_000_000;

fn clock() -> crate::stamp::WallClock {
    crate::stamp::WallClock::at(CLOCK_AT_0, Stamp::default())
}

/// The spans of `records` as the collector decodes them, with opentelemetry-proto's types.
fn decoded(encoder: &mut otlp::Encoder, records: &[SpanRecord]) -> Vec<Span> {
    let body = encoder.request_at(records, clock());
    let request = ExportTraceServiceRequest::decode(body).expect("a valid OTLP request");
    let [rs] = &request.resource_spans[..] else {
        panic!("one resource: {request:?}");
    };
    let service = value(&rs.resource.as_ref().unwrap().attributes, "service.name");
    assert!(service.is_some(), "{rs:?}");
    let [ss] = &rs.scope_spans[..] else {
        panic!("one scope: {rs:?}");
    };
    assert_eq!(ss.scope.as_ref().unwrap().name, "autoprep");
    ss.spans.clone()
}

/// A sampled QUERY's span: the conventions' attributes, the shape's redacted text, the
/// client's parent; no literal anywhere.
#[test]
fn a_span_carries_the_redacted_shape_and_the_parent() {
    let shapes = crate::shapes::Shapes::new(4);
    let shape = shapes.enter(
        autoprep_cache::ShapeHash(1),
        Some("ks"),
        "SELECT v, 'inline-secret' FROM app.users WHERE k = ?",
    );
    let (t, rx) = tracing(1.0, true);
    let mut facts = Facts::of(&query("SELECT ...", Some(TP)), None, Some("ks".into()));
    facts.rewrite = Some("rewritten");
    facts.routing = Some(record::REPLICA);
    let tag = Tag {
        started: Some(Stamp::now()),
        shape: Some(shape.clone()),
        group: Group::Rewritten,
    };
    let env = query("x", None);
    let server: SocketAddr = "127.0.0.2:9042".parse().unwrap();
    t.answered(
        Some(facts),
        &tag,
        Stamp::now(),
        Answer::Header(env.header()),
        Some(server),
    );
    let Some(r) = handed(&rx).pop() else {
        panic!("no span handed over");
    };
    assert_eq!(r.facts.parent, TraceParent::parse(TP.as_bytes()));
    assert_eq!(r.trace_id, r.facts.parent.unwrap().trace_id);
    let mut encoder = otlp::Encoder::new(&export::resource());
    // Twice: the second span is made from the blocks the first one left in the encoder.
    let spans = decoded(&mut encoder, &[r.clone(), r.clone()]);
    assert_eq!(spans[0], spans[1]);
    // The encoder's buffer, taken back for the next request, leaves a request still held
    // alone; a span longer than a length of two bytes holds is written as well.
    let held = encoder.request_at(std::slice::from_ref(&r), clock());
    let long = shapes.enter(
        autoprep_cache::ShapeHash(2),
        Some("ks"),
        &format!(
            "SELECT v FROM app.users WHERE k IN ({})",
            vec!["?"; 9000].join(", ")
        ),
    );
    let long = SpanRecord {
        shape: Some(long),
        ..r.clone()
    };
    let again = decoded(&mut encoder, &[long, r.clone()]);
    assert!(again[0]
        .attributes
        .iter()
        .any(|kv| kv.key == "db.query.text"));
    assert_eq!(again[1], spans[0]);
    let held = ExportTraceServiceRequest::decode(held).expect("intact");
    assert_eq!(held.resource_spans[0].scope_spans[0].spans[0], spans[0]);
    let data = &spans[0];
    assert_eq!(data.kind, 3, "CLIENT");
    assert_eq!(data.name, "SELECT users");
    assert_eq!(data.trace_id, r.trace_id);
    assert_eq!(data.span_id, r.span_id);
    assert_eq!(crate::shapes::hex(&data.parent_span_id), "b7ad6b7169203331");
    assert_eq!(data.flags, 0x301, "sampled, with a remote parent");
    assert_eq!(data.status, None);
    // Placed on the wall clock by the encoder's reading, a stamp's nanoseconds after it.
    assert!(r.end >= r.start);
    assert_eq!(
        data.start_time_unix_nano,
        CLOCK_AT_0 + r.start.nanos_since(Stamp::default())
    );
    assert_eq!(
        data.end_time_unix_nano,
        CLOCK_AT_0 + r.end.nanos_since(Stamp::default())
    );
    let a = &data.attributes;
    let s = |k| value(a, k).map(text);
    assert_eq!(s("db.system.name").as_deref(), Some("cassandra"));
    assert_eq!(s("db.namespace").as_deref(), Some("app"));
    assert_eq!(s("db.collection.name").as_deref(), Some("users"));
    assert_eq!(s("db.operation.name").as_deref(), Some("SELECT"));
    assert_eq!(
        s("db.query.text").as_deref(),
        Some("SELECT v, <literal> FROM app.users WHERE k = ?")
    );
    assert_eq!(
        s("cassandra.consistency.level").as_deref(),
        Some("local_quorum")
    );
    assert_eq!(value(a, "cassandra.page.size"), Some(&Value::IntValue(100)));
    assert_eq!(value(a, "server.port"), Some(&Value::IntValue(9042)));
    assert_eq!(s("server.address").as_deref(), Some("127.0.0.2"));
    assert_eq!(s("autoprep.rewrite").as_deref(), Some("rewritten"));
    assert_eq!(s("autoprep.routing").as_deref(), Some("replica"));
    assert_eq!(s("autoprep.shape.id"), Some(shape.id()));
    assert_eq!(s("autoprep.control_group").as_deref(), Some("rewritten"));
    assert_eq!(a.len(), 15, "{a:?}");
    for kv in a {
        assert!(!format!("{kv:?}").contains("inline-secret"), "{kv:?}");
    }
}

/// An error answer's span, without a shape or a parent: the opcode names the operation, the
/// request's keyspace is the namespace, the status is an error.
#[test]
fn an_error_span_without_a_shape() {
    let record = SpanRecord {
        trace_id: [7; 16],
        span_id: [9; 8],
        start: Stamp::now(),
        end: Stamp::now(),
        facts: Facts {
            opcode: Opcode::EXECUTE.0,
            keyspace: Some("shop".into()),
            ..Facts::default()
        },
        shape: None,
        group: Group::Other,
        error: Some(Some(0x2500)),
        server: None,
        sampled_by: SampledBy::Error,
    };
    let mut encoder = otlp::Encoder::new(&export::resource());
    let spans = decoded(&mut encoder, &[record]);
    let a = &spans[0].attributes;
    let s = |k| value(a, k).map(text);
    assert_eq!(spans[0].name, "EXECUTE");
    assert_eq!(spans[0].flags, 0x101, "sampled, no remote parent");
    assert!(spans[0].parent_span_id.is_empty());
    assert_eq!(spans[0].status.as_ref().unwrap().code, 2, "ERROR");
    assert_eq!(s("db.namespace").as_deref(), Some("shop"));
    assert_eq!(s("db.response.status_code").as_deref(), Some("0x2500"));
    assert_eq!(s("error.type").as_deref(), Some("0x2500"));
    assert_eq!(s("autoprep.sampled_by").as_deref(), Some("error"));
    assert_eq!(s("db.query.text"), None);
}

#[test]
fn verbs_and_tables_of_shapes() {
    let t = |s| span::verb_and_table(s);
    assert_eq!(
        t("INSERT INTO ks.t (k, v) VALUES (?, ?)"),
        (Some("INSERT".into()), Some((Some("ks".into()), "t".into())))
    );
    assert_eq!(
        t("UPDATE t SET v = ? WHERE k = ?"),
        (Some("UPDATE".into()), Some((None, "t".into())))
    );
    assert_eq!(
        t("DELETE v FROM \"T\" WHERE k = ?"),
        (Some("DELETE".into()), Some((None, "\"T\"".into())))
    );
    assert_eq!(t("TRUNCATE t").1, None);
}

#[test]
fn a_full_buffer_drops_and_counts() {
    let (t, h) = tracing(1.0, true);
    let tag = Tag {
        started: Some(Stamp::now()),
        ..Tag::default()
    };
    let env = query("x", None);
    for _ in 0..handoff::QUEUE + 2 {
        let facts = Facts {
            drawn: t.draw(),
            ..Facts::default()
        };
        t.answered(
            Some(facts),
            &tag,
            Stamp::now(),
            Answer::Header(env.header()),
            None,
        );
    }
    // A request the head sampler passed over has no facts: answered, it has no span.
    t.answered(None, &tag, Stamp::now(), Answer::Header(env.header()), None);
    assert_eq!(t.counts().dropped, 2, "a buffer of {}", handoff::QUEUE);
    assert_eq!(h.waiting(), handoff::QUEUE);
}

#[test]
fn only_a_payload_or_a_closing_comment_may_name_a_parent() {
    let may = |env: &Envelope| Facts::may_have_parent(env, || None);
    assert!(!may(&query("SELECT v FROM t WHERE k = 1", None)));
    assert!(may(&query("SELECT v FROM t WHERE k = 1", Some(TP))));
    assert!(may(&query(
        &format!("SELECT v FROM t WHERE k = 1 /*traceparent='{TP}'*/ ;"),
        None
    )));
    for end in ["", " ", "\n", "\t\r\n", "\x0c", ";", " ; "] {
        assert!(may(&query(
            &format!("SELECT v FROM t WHERE k = 1 /*traceparent='{TP}'*/{end}"),
            None
        )));
    }
    // A comment elsewhere in the statement is not SQLCommenter's.
    assert!(!may(&query("SELECT /* x */ v FROM t WHERE k = 1", None)));
}

/// The head sampler's countdown keeps about the ratio's share, on every thread from its first
/// request, each with a trace id the ratio test keeps, whether drawn one by one or in runs
/// (the countdown taken for a run goes on from where single draws left it, and back).
#[test]
fn the_head_countdown_keeps_the_ratio() {
    for ratio in [0.01, 0.25] {
        let counts: Vec<usize> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    let (t, _h) = tracing(ratio, true);
                    let mut kept = Vec::new();
                    while kept.len() < 200_000 {
                        // Runs of 1 to 64, every other run drawn one by one.
                        let n = 1 + kept.len() % 64;
                        if kept.len() % 2 == 0 {
                            let mut run = t.draws();
                            kept.extend((0..n).map(|_| run.draw()));
                        } else {
                            kept.extend((0..n).map(|_| t.draw()));
                        }
                    }
                    kept.truncate(200_000);
                    kept.into_iter()
                        .flatten()
                        .inspect(|low| assert!(ids::low_keeps(*low, ratio), "{low:x}"))
                        .count()
                })
                .join()
                .unwrap()
            })
            .collect();
        for kept in counts {
            let share = kept as f64 / 200_000.0;
            // Binomial: 5 standard deviations.
            let sd = (ratio * (1.0 - ratio) / 200_000.0).sqrt();
            assert!((share - ratio).abs() < 5.0 * sd, "{ratio}: {share}");
        }
    }
    // A run and single draws share the thread's countdown: a gap of the ratio's size lasts
    // across them.
    std::thread::spawn(|| {
        let (t, _h) = tracing(0.5, true);
        let mut gaps = Vec::new();
        let mut since = 0u32;
        for i in 0..100_000 {
            let drawn = if i % 3 == 0 {
                t.draw()
            } else {
                let mut run = t.draws();
                run.draw()
            };
            if drawn.is_some() {
                gaps.push(since);
                since = 0;
            } else {
                since += 1;
            }
        }
        // Geometric with p = 1/2: mean gap 1.
        let mean = f64::from(gaps.iter().sum::<u32>()) / gaps.len() as f64;
        assert!((0.9..1.1).contains(&mean), "{mean}");
    })
    .join()
    .unwrap();
    std::thread::spawn(|| {
        let (t, _rx) = tracing(0.0, true);
        assert!((0..1000).all(|_| t.draw().is_none()));
        let mut run = t.draws();
        assert!((0..1000).all(|_| run.draw().is_none()));
        let (t, _h) = tracing(1.0, true);
        assert!((0..1000).all(|_| t.draw().is_some()));
        let mut run = t.draws();
        assert!((0..1000).all(|_| run.draw().is_some()));
    })
    .join()
    .unwrap();
}
