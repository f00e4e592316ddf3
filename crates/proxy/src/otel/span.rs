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
use std::net::SocketAddr;

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

/// An attribute's value: the conventions use only strings and integers here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Val<'a> {
    Str(&'a str),
    Int(i64),
}

/// What a span takes from its statement's shape (or, without one, from its opcode): the same
/// for every span of that shape, so the exporter makes it once per shape ([`super::otlp`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeFacts {
    /// `db.query.summary`, also the span's name.
    pub summary: String,
    /// The keyspace the statement names or its shape was prepared in; else the request's
    /// ([`request_attributes`]).
    pub namespace: Option<String>,
    operation: String,
    collection: Option<String>,
    text: Option<String>,
    id: Option<String>,
}

impl ShapeFacts {
    /// The facts of `shape` for a request of `opcode`.
    pub fn of(shape: Option<&crate::shapes::ShapeStats>, opcode: u8) -> ShapeFacts {
        let text = shape.map(|s| s.redacted_text().to_owned());
        let (verb, table) = text.as_deref().map(verb_and_table).unwrap_or((None, None));
        let opcode = Opcode(opcode);
        let operation = if opcode == Opcode::BATCH {
            "BATCH".to_owned()
        } else {
            verb.unwrap_or_else(|| opcode.name().to_owned())
        };
        let (qualifier, collection) = match table {
            Some((q, t)) => (q, Some(t)),
            None => (None, None),
        };
        let namespace = qualifier.or_else(|| shape.and_then(|s| s.keyspace().map(str::to_owned)));
        let summary = match &collection {
            Some(t) => format!("{operation} {t}"),
            None => operation.clone(),
        };
        ShapeFacts {
            summary,
            namespace,
            operation,
            collection,
            text,
            id: shape.map(|s| s.id()),
        }
    }

    /// The shape's attributes: `db.collection.name`, `db.operation.name`, `db.query.summary`,
    /// `db.query.text` (redacted), `autoprep.shape.id`.
    pub fn attributes(&self, sink: &mut impl FnMut(&'static str, Val<'_>)) {
        if let Some(t) = &self.collection {
            sink("db.collection.name", Val::Str(t));
        }
        sink("db.operation.name", Val::Str(&self.operation));
        sink("db.query.summary", Val::Str(&self.summary));
        if let Some(t) = &self.text {
            sink("db.query.text", Val::Str(t));
        }
        if let Some(id) = &self.id {
            sink("autoprep.shape.id", Val::Str(id));
        }
    }
}

/// The attributes of one request that its shape does not fix: `db.system.name`,
/// `db.namespace` (`shape_namespace`, else the request's keyspace), the error, consistency,
/// page and batch sizes, and autoprep's own. The node's `server.*` are [`server_attributes`].
pub fn request_attributes(
    r: &SpanRecord,
    shape_namespace: Option<&str>,
    sink: &mut impl FnMut(&'static str, Val<'_>),
) {
    let f = &r.facts;
    sink("db.system.name", Val::Str("cassandra"));
    if let Some(ns) = shape_namespace.or(f.keyspace.as_deref()) {
        sink("db.namespace", Val::Str(ns));
    }
    match r.error {
        Some(Some(code)) => {
            let code = format!("0x{code:04x}");
            sink("db.response.status_code", Val::Str(&code));
            sink("error.type", Val::Str(&code));
        }
        Some(None) => sink("error.type", Val::Str("_OTHER")),
        None => {}
    }
    if let Some(c) = f.consistency.and_then(consistency_name) {
        sink("cassandra.consistency.level", Val::Str(c));
    }
    if let Some(p) = f.page_size {
        sink("cassandra.page.size", Val::Int(i64::from(p)));
    }
    if let Some(n) = f.batch_size {
        sink("db.operation.batch.size", Val::Int(i64::from(n)));
    }
    if let Some(w) = f.rewrite {
        sink("autoprep.rewrite", Val::Str(w));
    }
    if let Some(r) = f.routing {
        sink("autoprep.routing", Val::Str(r));
    }
    let group = match r.group {
        Group::Rewritten => "rewritten",
        Group::Control => "control",
        Group::Other => "none",
    };
    sink("autoprep.control_group", Val::Str(group));
    sink("autoprep.sampled_by", Val::Str(r.sampled_by.name()));
}

/// The node that answered: `server.address`, `server.port`.
pub fn server_attributes(server: SocketAddr, sink: &mut impl FnMut(&'static str, Val<'_>)) {
    sink("server.address", Val::Str(&server.ip().to_string()));
    sink("server.port", Val::Int(i64::from(server.port())));
}
