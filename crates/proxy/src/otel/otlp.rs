//! A batch of span records as one OTLP `ExportTraceServiceRequest`, the protobuf body both
//! transports carry (OTLP/HTTP as is, OTLP/gRPC in its length-prefixed frame).
//!
//! The message is written field by field with `prost`'s wire primitives
//! ([`prost::encoding::encode_key`], [`prost::encoding::encode_varint`]), with the field
//! numbers of `opentelemetry-proto`'s `trace/v1/trace.proto`, `common/v1/common.proto`,
//! `resource/v1/resource.proto` and `collector/trace/v1/trace_service.proto`.
//!
//! Declined for speed: building `opentelemetry-proto`'s generated structs (or the SDK's span
//! data, which `opentelemetry-otlp` turns into them) for every span. That allocates a `String`
//! per attribute key and value, and formats the same shape's text, table and id again for each
//! of its spans: two thirds of the export's CPU in the callgrind profile of issue 29, which put
//! 1 % sampling above its 3 % bound. Here what a span takes from its shape is encoded once per
//! shape and copied ([`Encoder`] keeps it, as it keeps each node's `server.*`), and a span is
//! written once, in place, into a request buffer the encoder reuses. A test decodes the output with
//! `opentelemetry-proto`'s own types.

use super::record::{SpanRecord, StreamHasher};
use super::span::{self, ShapeFacts, Val};
use crate::stamp::WallClock;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use opentelemetry_sdk::Resource;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::net::SocketAddr;

/// Entries each cache keeps before it starts again (a shape's block is about 200 bytes).
const CACHE: usize = 4096;

/// `SpanKind.SPAN_KIND_CLIENT`.
const SPAN_KIND_CLIENT: u64 = 3;
/// `Status.StatusCode.STATUS_CODE_ERROR`.
const STATUS_CODE_ERROR: u64 = 2;
/// `SpanFlags`: the W3C sampled flag, and whether the parent is remote is known / is remote.
const FLAG_SAMPLED: u32 = 0x01;
const FLAG_HAS_IS_REMOTE: u32 = 0x100;
const FLAG_IS_REMOTE: u32 = 0x200;

/// A map of the encoder's, hashed without SipHash (see [`StreamHasher`]).
type Cache<K, V> = HashMap<K, V, BuildHasherDefault<StreamHasher>>;

/// What one shape gives each of its spans, encoded.
#[derive(Debug)]
struct ShapeBlock {
    /// The span's name (`db.query.summary`), as field 5 of `Span`.
    name: Vec<u8>,
    namespace: Option<String>,
    /// Its attributes, as repeated field 9 of `Span`.
    attributes: Vec<u8>,
}

/// Encodes batches of records; keeps, across batches, the resource and scope (encoded once),
/// each shape's block and each node's `server.*` attributes, and the request's buffer.
#[derive(Debug)]
pub struct Encoder {
    /// `ResourceSpans.resource` (field 1), whole.
    resource: Vec<u8>,
    /// `ScopeSpans.scope` (field 1), whole.
    scope: Vec<u8>,
    shapes: Cache<(u128, u8), ShapeBlock>,
    servers: Cache<SocketAddr, Vec<u8>>,
    /// The request being written. Its spans are written in place, each after a length field
    /// of [`SPAN_LENGTH`] bytes filled in when it is done, behind room left for the prefixes,
    /// the resource and the scope, written last (right-aligned in that room): no span is
    /// copied once written. Kept between batches: its allocation is taken back once the
    /// transport has dropped the previous request.
    out: BytesMut,
    /// The request's prefixes, resource and scope, before they go in front of its spans.
    head: Vec<u8>,
}

/// Bytes left for a span's length before it is written: a varint of two bytes holds the
/// lengths from 128 to 16,383, those of nearly every span (a span shorter or longer is moved
/// once, by the difference: protobuf wants the shortest varint).
const SPAN_LENGTH: usize = 2;

impl Encoder {
    /// An encoder for spans of `resource`, from the instrumentation scope `autoprep`.
    pub fn new(resource: &Resource) -> Encoder {
        let mut attrs = Vec::new();
        for (k, v) in resource.iter() {
            any_attribute(k.as_str(), v, &mut attrs);
        }
        let mut resource = Vec::new();
        bytes_field(1, &attrs, &mut resource);
        let mut scope = Vec::new();
        string_field(1, "autoprep", &mut scope);
        string_field(2, env!("CARGO_PKG_VERSION"), &mut scope);
        let mut scope_field = Vec::new();
        bytes_field(1, &scope, &mut scope_field);
        Encoder {
            resource,
            scope: scope_field,
            shapes: Cache::default(),
            servers: Cache::default(),
            out: BytesMut::new(),
            head: Vec::new(),
        }
    }

    /// The `ExportTraceServiceRequest` of `batch`, its spans' times placed on the wall clock
    /// as it reads now.
    pub fn request(&mut self, batch: &[SpanRecord]) -> Bytes {
        self.request_at(batch, WallClock::now())
    }

    /// The `ExportTraceServiceRequest` of `batch`, its spans' times placed by `clock`.
    pub fn request_at(&mut self, batch: &[SpanRecord], clock: WallClock) -> Bytes {
        // Two length-delimited prefixes (a key byte and at most 5 bytes of length each).
        let room = 2 * 6 + self.resource.len() + self.scope.len();
        let out = &mut self.out;
        out.clear();
        out.reserve(room + batch.len() * 256);
        out.resize(room, 0);
        for r in batch {
            // ScopeSpans.spans (field 2)
            encode_key(2, WireType::LengthDelimited, out);
            let at = out.len();
            out.put_bytes(0, SPAN_LENGTH);
            encode_span(&mut self.shapes, &mut self.servers, r, clock, out);
            fill_length(out, at);
        }
        // ScopeSpans { scope = 1, spans = 2 }
        let scope_spans = self.scope.len() + out.len() - room;
        // ResourceSpans { resource = 1, scope_spans = 2 }
        let resource_spans = self.resource.len() + field_len(scope_spans);
        // ExportTraceServiceRequest { resource_spans = 1 }
        let head = &mut self.head;
        head.clear();
        length_prefix(1, resource_spans, head);
        head.extend_from_slice(&self.resource);
        length_prefix(2, scope_spans, head);
        head.extend_from_slice(&self.scope);
        let start = room - head.len();
        out[start..room].copy_from_slice(head);
        let mut body = out.split();
        body.advance(start);
        body.freeze()
    }
}

/// Writes the length of the span written after `at`'s [`SPAN_LENGTH`] bytes into them,
/// moving the span when its length takes another number of bytes.
fn fill_length(out: &mut BytesMut, at: usize) {
    let body = at + SPAN_LENGTH;
    let len = out.len() - body;
    let mut varint = [0u8; 10];
    let n = {
        let mut w = &mut varint[..];
        encode_varint(len as u64, &mut w);
        10 - w.len()
    };
    if n != SPAN_LENGTH {
        let end = out.len();
        if n > SPAN_LENGTH {
            out.put_bytes(0, n - SPAN_LENGTH);
        }
        out.copy_within(body..end, at + n);
        out.truncate(at + n + len);
    }
    out[at..at + n].copy_from_slice(&varint[..n]);
}

/// Writes `r`'s `Span` fields onto `b`.
fn encode_span(
    shapes: &mut Cache<(u128, u8), ShapeBlock>,
    servers: &mut Cache<SocketAddr, Vec<u8>>,
    r: &SpanRecord,
    clock: WallClock,
    b: &mut BytesMut,
) {
    let block = shape_block(shapes, r);
    bytes_field(1, &r.trace_id, b);
    bytes_field(2, &r.span_id, b);
    if let Some(p) = &r.facts.parent {
        bytes_field(4, &p.parent_id, b);
    }
    b.put_slice(&block.name);
    encode_key(6, WireType::Varint, b);
    encode_varint(SPAN_KIND_CLIENT, b);
    fixed64_field(7, clock.unix_nanos(r.start), b);
    fixed64_field(8, clock.unix_nanos(r.end), b);
    b.put_slice(&block.attributes);
    span::request_attributes(r, block.namespace.as_deref(), &mut |k, v| {
        attribute(k, v, b)
    });
    if let Some(server) = r.server {
        let len = servers.len();
        let attrs = servers.entry(server).or_insert_with(|| {
            let mut a = Vec::new();
            span::server_attributes(server, &mut |k, v| attribute(k, v, &mut a));
            a
        });
        b.put_slice(attrs);
        if len >= CACHE {
            servers.clear();
        }
    }
    if r.error.is_some() {
        // Status { code = 3 }
        let mut status = [0u8; 2];
        let mut s = &mut status[..];
        encode_key(3, WireType::Varint, &mut s);
        encode_varint(STATUS_CODE_ERROR, &mut s);
        bytes_field(15, &status, b);
    }
    let remote = if r.facts.parent.is_some() {
        FLAG_IS_REMOTE
    } else {
        0
    };
    encode_key(16, WireType::ThirtyTwoBit, b);
    b.put_u32_le(FLAG_SAMPLED | FLAG_HAS_IS_REMOTE | remote);
}

/// The block of `r`'s shape (or, without one, of its opcode), made at its first span.
fn shape_block<'a>(
    shapes: &'a mut Cache<(u128, u8), ShapeBlock>,
    r: &SpanRecord,
) -> &'a ShapeBlock {
    let key = (
        r.shape
            .as_ref()
            .map_or(0, |s| u128::from_le_bytes(s.fingerprint())),
        r.facts.opcode,
    );
    if shapes.len() >= CACHE && !shapes.contains_key(&key) {
        shapes.clear();
    }
    shapes.entry(key).or_insert_with(|| {
        let facts = ShapeFacts::of(r.shape.as_deref(), r.facts.opcode);
        let mut name = Vec::new();
        string_field(5, &facts.summary, &mut name);
        let mut attributes = Vec::new();
        facts.attributes(&mut |k, v| attribute(k, v, &mut attributes));
        ShapeBlock {
            name,
            namespace: facts.namespace,
            attributes,
        }
    })
}

/// The bytes a length-delimited field of `len` bytes takes, key (one byte: tags below 16)
/// included.
fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

fn length_prefix(tag: u32, len: usize, b: &mut impl BufMut) {
    encode_key(tag, WireType::LengthDelimited, b);
    encode_varint(len as u64, b);
}

fn bytes_field(tag: u32, v: &[u8], b: &mut impl BufMut) {
    length_prefix(tag, v.len(), b);
    b.put_slice(v);
}

fn string_field(tag: u32, v: &str, b: &mut impl BufMut) {
    bytes_field(tag, v.as_bytes(), b);
}

fn fixed64_field(tag: u32, v: u64, b: &mut impl BufMut) {
    encode_key(tag, WireType::SixtyFourBit, b);
    b.put_u64_le(v);
}

/// A `KeyValue` as field 9 of `Span` (or 1 of `Resource`: both tags are below 16, and the
/// resource's attributes go through [`any_attribute`]).
fn attribute(key: &str, value: Val<'_>, b: &mut impl BufMut) {
    // AnyValue { string_value = 1 | int_value = 3 }
    let mut any = [0u8; 11];
    let any_len = match value {
        Val::Str(s) => field_len(s.len()),
        Val::Int(i) => {
            let mut w = &mut any[..];
            encode_key(3, WireType::Varint, &mut w);
            encode_varint(i as u64, &mut w);
            let left = w.len();
            11 - left
        }
    };
    // KeyValue { key = 1, value = 2 }
    let kv_len = field_len(key.len()) + field_len(any_len);
    length_prefix(9, kv_len, b);
    string_field(1, key, b);
    length_prefix(2, any_len, b);
    match value {
        Val::Str(s) => string_field(1, s, b),
        Val::Int(_) => b.put_slice(&any[..any_len]),
    }
}

/// A resource attribute of any of the SDK's value types, as field 1 of `Resource`.
fn any_attribute(key: &str, value: &opentelemetry::Value, b: &mut Vec<u8>) {
    let mut any = Vec::new();
    any_value(value, &mut any);
    let mut kv = Vec::new();
    string_field(1, key, &mut kv);
    bytes_field(2, &any, &mut kv);
    bytes_field(1, &kv, b);
}

/// `AnyValue { string_value = 1, bool_value = 2, int_value = 3, double_value = 4,
/// array_value = 5 }`.
fn any_value(v: &opentelemetry::Value, b: &mut Vec<u8>) {
    use opentelemetry::{Array, Value};
    fn array<T>(items: &[T], one: impl Fn(&T, &mut Vec<u8>), b: &mut Vec<u8>) {
        // ArrayValue { values = 1 }
        let mut values = Vec::new();
        for item in items {
            let mut any = Vec::new();
            one(item, &mut any);
            bytes_field(1, &any, &mut values);
        }
        bytes_field(5, &values, b);
    }
    match v {
        Value::Bool(x) => {
            encode_key(2, WireType::Varint, b);
            encode_varint(u64::from(*x), b);
        }
        Value::I64(x) => {
            encode_key(3, WireType::Varint, b);
            encode_varint(*x as u64, b);
        }
        Value::F64(x) => fixed64_field(4, x.to_bits(), b),
        Value::String(s) => string_field(1, s.as_str(), b),
        Value::Array(Array::Bool(xs)) => array(xs, |x, b| any_value(&Value::Bool(*x), b), b),
        Value::Array(Array::I64(xs)) => array(xs, |x, b| any_value(&Value::I64(*x), b), b),
        Value::Array(Array::F64(xs)) => array(xs, |x, b| any_value(&Value::F64(*x), b), b),
        Value::Array(Array::String(xs)) => array(xs, |x, b| string_field(1, x.as_str(), b), b),
        // Types the SDK may add later: as their text.
        other => string_field(1, &other.to_string(), b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_length_takes_the_shortest_varint() {
        for len in [0, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let mut out = BytesMut::from(&b"prefix"[..]);
            let at = out.len();
            out.put_bytes(0, SPAN_LENGTH);
            let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            out.put_slice(&body);
            fill_length(&mut out, at);
            let mut expected = b"prefix".to_vec();
            encode_varint(len as u64, &mut expected);
            expected.extend_from_slice(&body);
            assert_eq!(&out[..], &expected[..], "length {len}");
        }
    }
}
