//! A sampled request's span, as the OpenTelemetry database conventions describe a Cassandra
//! client call (<https://opentelemetry.io/docs/specs/semconv/db/cassandra/>): kind CLIENT, named
//! by `db.query.summary`, with
//! - `db.system.name` = `cassandra`; `db.namespace` the keyspace; `db.collection.name` the
//!   table; `db.operation.name` the statement's verb (`SELECT`...), `BATCH`, or the opcode
//!   (`EXECUTE`, `PREPARE`) when the statement is not known;
//! - `db.query.text` the statement's **shape with every literal redacted**, exactly as
//!   `/shapes` shows it ([`crate::shapes::redact`]), never the text the client sent; absent
//!   when the request has no shape (a client's own EXECUTE, a PREPARE);
//! - `db.response.status_code` and `error.type`: an ERROR answer's code, in hexadecimal as the
//!   protocol spec writes it (`0x2200`); never the server's message (it may quote values);
//! - `cassandra.consistency.level`, `cassandra.page.size`, `db.operation.batch.size`;
//! - `server.address` / `server.port`: the node that answered (home or replica);
//! - `autoprep.rewrite` (`rewritten` or why it passed through), `autoprep.routing`
//!   (`replica`, or why it went home), `autoprep.shape.id` (the shape's fingerprint, as
//!   `/shapes` shows it), `autoprep.control_group`, `autoprep.sampled_by` (`head`, `error`,
//!   `slow`).

use super::record::SpanRecord;
use crate::control::Group;
use autoprep_protocol::cql::lexer::{tokenize, TokenKind};
use autoprep_protocol::envelope::Opcode;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use std::borrow::Cow;

/// The consistency level's name in the conventions (CQL's, lower case).
pub fn consistency_name(c: u16) -> Option<&'static str> {
    Some(match c {
        0x0000 => "any",
        0x0001 => "one",
        0x0002 => "two",
        0x0003 => "three",
        0x0004 => "quorum",
        0x0005 => "all",
        0x0006 => "local_quorum",
        0x0007 => "each_quorum",
        0x0008 => "serial",
        0x0009 => "local_serial",
        0x000A => "local_one",
        _ => return None,
    })
}

/// The verb and the table (keyspace-qualified or not) a canonical shape text acts on.
pub fn verb_and_table(text: &str) -> (Option<String>, Option<(Option<String>, String)>) {
    let Ok(tokens) = tokenize(text) else {
        return (None, None);
    };
    let verb = tokens
        .first()
        .filter(|t| t.kind == TokenKind::Ident)
        .map(|t| t.text.to_ascii_uppercase());
    let after = match verb.as_deref() {
        Some("UPDATE") => Some(0),
        Some("INSERT") => tokens.iter().position(|t| t.is_keyword("INTO")),
        Some("SELECT") | Some("DELETE") => tokens.iter().position(|t| t.is_keyword("FROM")),
        _ => None,
    };
    let name = |i: usize| {
        tokens
            .get(i)
            .filter(|t| matches!(t.kind, TokenKind::Ident | TokenKind::QuotedIdent))
            .map(|t| t.text.to_owned())
    };
    let table = after.and_then(|at| {
        let first = name(at + 1)?;
        match tokens.get(at + 2).map(|t| t.kind) {
            Some(TokenKind::Dot) => Some((Some(first), name(at + 3)?)),
            _ => Some((None, first)),
        }
    });
    (verb, table)
}

/// The attributes of a record's span, and its name.
pub fn attributes(r: &SpanRecord) -> (String, Vec<KeyValue>) {
    let f = &r.facts;
    let mut a = vec![KeyValue::new("db.system.name", "cassandra")];
    let text = r.shape.as_ref().map(|s| s.redacted_text().to_owned());
    let (verb, table) = text.as_deref().map(verb_and_table).unwrap_or((None, None));
    let opcode = Opcode(f.opcode);
    let operation = if opcode == Opcode::BATCH {
        "BATCH".to_owned()
    } else {
        verb.unwrap_or_else(|| opcode.name().to_owned())
    };
    let (qualifier, collection) = match table {
        Some((q, t)) => (q, Some(t)),
        None => (None, None),
    };
    let namespace = qualifier.or_else(|| {
        r.shape
            .as_ref()
            .and_then(|s| s.keyspace().map(str::to_owned))
            .or_else(|| f.keyspace.as_deref().map(str::to_owned))
    });
    if let Some(ns) = namespace {
        a.push(KeyValue::new("db.namespace", ns));
    }
    let summary = match &collection {
        Some(t) => format!("{operation} {t}"),
        None => operation.clone(),
    };
    if let Some(t) = collection {
        a.push(KeyValue::new("db.collection.name", t));
    }
    a.push(KeyValue::new("db.operation.name", operation));
    a.push(KeyValue::new("db.query.summary", summary.clone()));
    if let Some(t) = text {
        a.push(KeyValue::new("db.query.text", t));
    }
    if let Some(Some(code)) = r.error {
        let code = format!("0x{code:04x}");
        a.push(KeyValue::new("db.response.status_code", code.clone()));
        a.push(KeyValue::new("error.type", code));
    } else if r.error.is_some() {
        a.push(KeyValue::new("error.type", "_OTHER"));
    }
    if let Some(c) = f.consistency.and_then(consistency_name) {
        a.push(KeyValue::new("cassandra.consistency.level", c));
    }
    if let Some(p) = f.page_size {
        a.push(KeyValue::new("cassandra.page.size", i64::from(p)));
    }
    if let Some(n) = f.batch_size {
        a.push(KeyValue::new("db.operation.batch.size", i64::from(n)));
    }
    if let Some(s) = r.server {
        a.push(KeyValue::new("server.address", s.ip().to_string()));
        a.push(KeyValue::new("server.port", i64::from(s.port())));
    }
    autoprep_attributes(r, &mut a);
    (summary, a)
}

/// The `autoprep.*` attributes.
fn autoprep_attributes(r: &SpanRecord, a: &mut Vec<KeyValue>) {
    if let Some(w) = r.facts.rewrite {
        a.push(KeyValue::new("autoprep.rewrite", w));
    }
    match r.facts.routing {
        Some(Ok(())) => a.push(KeyValue::new("autoprep.routing", "replica")),
        Some(Err(why)) => a.push(KeyValue::new("autoprep.routing", why)),
        None => {}
    }
    if let Some(s) = &r.shape {
        a.push(KeyValue::new("autoprep.shape.id", s.id()));
    }
    let group = match r.group {
        Group::Rewritten => "rewritten",
        Group::Control => "control",
        Group::Other => "none",
    };
    a.push(KeyValue::new("autoprep.control_group", group));
    a.push(KeyValue::new("autoprep.sampled_by", r.sampled_by));
}

/// The SDK's span data of a record.
pub fn span_data(r: &SpanRecord, scope: &InstrumentationScope) -> SpanData {
    let (name, attributes) = attributes(r);
    let context = SpanContext::new(
        TraceId::from_bytes(r.trace_id),
        SpanId::from_bytes(r.span_id),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    let status = if r.error.is_some() {
        Status::error("")
    } else {
        Status::Unset
    };
    SpanData {
        span_context: context,
        parent_span_id: r
            .parent
            .map_or(SpanId::INVALID, |p| SpanId::from_bytes(p.parent_id)),
        parent_span_is_remote: r.parent.is_some(),
        span_kind: SpanKind::Client,
        name: Cow::Owned(name),
        start_time: r.start,
        end_time: r.end,
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope.clone(),
    }
}
