//! Test helpers: a small reader for CQL literal text and CQL type names, standing in for the
//! lexer in encoder tests. Shared with the server differential test through `#[path]`; the
//! including module must have `Literal` and `ColumnType` in scope.
//!
//! Literal forms: `'..'` (with `''`), `$$..$$`, integers, floats, `NaN`, `Infinity` (optionally
//! negative), booleans, `null`, UUIDs, `0x..` blobs, durations (unit and ISO forms), `[..]`,
//! `{..}` (set, map, or UDT when keys are identifiers), `(..)`.

#![allow(dead_code)]

use super::{ColumnType, Literal};
use std::borrow::Cow;

/// Parses one literal; panics on malformed test input.
pub fn lit(text: &str) -> Literal<'_> {
    let mut p = LitParser { s: text, i: 0 };
    let l = p.term();
    p.ws();
    assert_eq!(p.i, text.len(), "trailing input in literal {text:?}");
    l
}

struct LitParser<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> LitParser<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }

    fn ws(&mut self) {
        while self.rest().starts_with([' ', '\t', '\n', '\r']) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.ws();
        if self.rest().starts_with(c) {
            self.i += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) {
        assert!(self.eat(c), "expected {c:?} at {} in {:?}", self.i, self.s);
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> &'a str {
        let r = self.rest();
        let end = r.find(|c: char| !f(c)).unwrap_or(r.len());
        self.i += end;
        &r[..end]
    }

    fn ident(&mut self) -> Option<Cow<'a, str>> {
        self.ws();
        let r = self.rest();
        if let Some(q) = r.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = q.char_indices();
            while let Some((j, c)) = chars.next() {
                if c == '"' {
                    if q[j + 1..].starts_with('"') {
                        out.push('"');
                        chars.next();
                    } else {
                        self.i += 1 + j + 1;
                        return Some(Cow::Owned(out));
                    }
                } else {
                    out.push(c);
                }
            }
            panic!("unterminated quoted identifier");
        }
        if r.starts_with(|c: char| c.is_ascii_alphabetic()) {
            let w = self.take_while(|c| c.is_ascii_alphanumeric() || c == '_');
            return Some(Cow::Owned(w.to_ascii_lowercase()));
        }
        None
    }

    fn is_uuid_at(&self) -> bool {
        let b = self.rest().as_bytes();
        b.len() >= 36
            && b[..36].iter().enumerate().all(|(i, c)| {
                if matches!(i, 8 | 13 | 18 | 23) {
                    *c == b'-'
                } else {
                    c.is_ascii_hexdigit()
                }
            })
            && !b.get(36).is_some_and(|c| c.is_ascii_alphanumeric())
    }

    fn term(&mut self) -> Literal<'a> {
        self.ws();
        let r = self.rest();
        if self.is_uuid_at() {
            self.i += 36;
            return Literal::Uuid(&r[..36]);
        }
        if let Some(body) = r.strip_prefix('\'') {
            let mut out = String::new();
            let mut j = 0;
            let b = body.as_bytes();
            loop {
                assert!(j < b.len(), "unterminated string");
                if b[j] == b'\'' {
                    if b.get(j + 1) == Some(&b'\'') {
                        out.push('\'');
                        j += 2;
                        continue;
                    }
                    break;
                }
                let c = body[j..].chars().next().unwrap_or('\0');
                out.push(c);
                j += c.len_utf8();
            }
            self.i += 1 + j + 1;
            return Literal::String(Cow::Owned(out));
        }
        if let Some(body) = r.strip_prefix("$$") {
            let end = body.find("$$").expect("unterminated $$ string");
            self.i += 2 + end + 2;
            return Literal::String(Cow::Borrowed(&body[..end]));
        }
        if r.starts_with("0x") || r.starts_with("0X") {
            self.i += 2;
            return Literal::Hex(self.take_while(|c| c.is_ascii_hexdigit()));
        }
        if self.eat('[') {
            let items = self.items(']');
            return Literal::List(items);
        }
        if self.eat('(') {
            let items = self.items(')');
            return Literal::Tuple(items);
        }
        if self.eat('{') {
            return self.brace();
        }
        let start = self.i;
        let neg = r.starts_with('-');
        if neg {
            self.i += 1;
            self.ws();
        }
        let r2 = self.rest();
        if r2.starts_with(|c: char| c.is_ascii_digit()) {
            let digits = self.take_while(|c| c.is_ascii_digit());
            let after = self.rest();
            let is_exp = (after.starts_with(['e', 'E']))
                && after[1..]
                    .trim_start_matches(['+', '-'])
                    .starts_with(|c: char| c.is_ascii_digit());
            if after.starts_with('.') || is_exp {
                if self.rest().starts_with('.') {
                    self.i += 1;
                    self.take_while(|c| c.is_ascii_digit());
                }
                let after = self.rest();
                if after.starts_with(['e', 'E']) {
                    self.i += 1;
                    if self.rest().starts_with(['+', '-']) {
                        self.i += 1;
                    }
                    self.take_while(|c| c.is_ascii_digit());
                }
                return Literal::Float(&self.s[start..self.i]);
            }
            if after.starts_with(|c: char| c.is_alphabetic() || c == 'µ') {
                self.take_while(|c| c.is_alphanumeric() || c == 'µ');
                return Literal::Duration(&self.s[start..self.i]);
            }
            let _ = digits;
            return Literal::Integer(&self.s[start..self.i]);
        }
        if r2.starts_with('P') && r2[1..].starts_with(|c: char| c.is_ascii_digit() || c == 'T') {
            self.take_while(|c| c.is_ascii_alphanumeric() || c == ':' || c == '-');
            return Literal::Duration(&self.s[start..self.i]);
        }
        let w = self.take_while(|c| c.is_ascii_alphabetic());
        match w.to_ascii_lowercase().as_str() {
            "nan" => Literal::NaN,
            "infinity" => Literal::Infinity { negative: neg },
            "true" if !neg => Literal::Boolean(true),
            "false" if !neg => Literal::Boolean(false),
            "null" if !neg => Literal::Null,
            _ => panic!("cannot read literal at {start} in {:?}", self.s),
        }
    }

    fn items(&mut self, close: char) -> Vec<Literal<'a>> {
        let mut v = Vec::new();
        if self.eat(close) {
            return v;
        }
        loop {
            v.push(self.term());
            if self.eat(close) {
                return v;
            }
            self.expect(',');
        }
    }

    fn brace(&mut self) -> Literal<'a> {
        if self.eat('}') {
            return Literal::Map(Vec::new());
        }
        // UDT when the first key is an identifier followed by ':'.
        let save = self.i;
        let is_udt = {
            let word = self.ident();
            let udt = word.is_some_and(|w| {
                !matches!(w.as_ref(), "true" | "false" | "null" | "nan" | "infinity")
            }) && self.eat(':');
            self.i = save;
            udt && !self.is_uuid_at()
        };
        if is_udt {
            let mut fields = Vec::new();
            loop {
                let name = self.ident().expect("field name");
                self.expect(':');
                fields.push((name, self.term()));
                if self.eat('}') {
                    return Literal::Udt(fields);
                }
                self.expect(',');
            }
        }
        let first = self.term();
        if self.eat(':') {
            let mut entries = vec![(first, self.term())];
            loop {
                if self.eat('}') {
                    return Literal::Map(entries);
                }
                self.expect(',');
                let k = self.term();
                self.expect(':');
                entries.push((k, self.term()));
            }
        }
        let mut items = vec![first];
        loop {
            if self.eat('}') {
                return Literal::Set(items);
            }
            self.expect(',');
            items.push(self.term());
        }
    }
}

/// The UDTs the test schemas define: `u(a int, b text, c frozen<list<int>>)` and
/// `p(x double, "Y" frozen<u>)`.
pub fn udt(name: &str, keyspace: &str) -> Option<ColumnType> {
    let u = ColumnType::Udt {
        keyspace: keyspace.to_owned(),
        name: "u".to_owned(),
        fields: vec![
            ("a".to_owned(), ColumnType::Int),
            ("b".to_owned(), ColumnType::Varchar),
            ("c".to_owned(), ColumnType::List(Box::new(ColumnType::Int))),
        ],
    };
    match name {
        "u" => Some(u),
        "p" => Some(ColumnType::Udt {
            keyspace: keyspace.to_owned(),
            name: "p".to_owned(),
            fields: vec![("x".to_owned(), ColumnType::Double), ("Y".to_owned(), u)],
        }),
        _ => None,
    }
}

/// Parses a CQL type name (`int`, `frozen<list<int>>`, `vector<float, 3>`, `u`, ...).
pub fn cql_type(text: &str) -> ColumnType {
    let mut p = LitParser { s: text, i: 0 };
    let t = p.cql_type();
    p.ws();
    assert_eq!(p.i, text.len(), "trailing input in type {text:?}");
    t
}

impl LitParser<'_> {
    fn cql_type(&mut self) -> ColumnType {
        let name = self.ident().expect("type name").into_owned();
        let simple = match name.as_str() {
            "ascii" => Some(ColumnType::Ascii),
            "bigint" => Some(ColumnType::Bigint),
            "blob" => Some(ColumnType::Blob),
            "boolean" => Some(ColumnType::Boolean),
            "counter" => Some(ColumnType::Counter),
            "decimal" => Some(ColumnType::Decimal),
            "double" => Some(ColumnType::Double),
            "float" => Some(ColumnType::Float),
            "int" => Some(ColumnType::Int),
            "timestamp" => Some(ColumnType::Timestamp),
            "uuid" => Some(ColumnType::Uuid),
            "text" | "varchar" => Some(ColumnType::Varchar),
            "varint" => Some(ColumnType::Varint),
            "timeuuid" => Some(ColumnType::Timeuuid),
            "inet" => Some(ColumnType::Inet),
            "date" => Some(ColumnType::Date),
            "time" => Some(ColumnType::Time),
            "smallint" => Some(ColumnType::Smallint),
            "tinyint" => Some(ColumnType::Tinyint),
            "duration" => Some(ColumnType::Duration),
            other => udt(other, "ks"),
        };
        if let Some(t) = simple {
            return t;
        }
        self.expect('<');
        let t = match name.as_str() {
            "frozen" => self.cql_type(),
            "list" => ColumnType::List(Box::new(self.cql_type())),
            "set" => ColumnType::Set(Box::new(self.cql_type())),
            "map" => {
                let k = self.cql_type();
                self.expect(',');
                ColumnType::Map(Box::new(k), Box::new(self.cql_type()))
            }
            "tuple" => {
                let mut v = vec![self.cql_type()];
                while self.eat(',') {
                    v.push(self.cql_type());
                }
                ColumnType::Tuple(v)
            }
            "vector" => {
                let e = self.cql_type();
                self.expect(',');
                self.ws();
                let n = self
                    .take_while(|c| c.is_ascii_digit())
                    .parse()
                    .expect("dimension");
                ColumnType::Vector {
                    element: Box::new(e),
                    dimension: n,
                }
            }
            other => panic!("unknown type {other}"),
        };
        self.expect('>');
        t
    }
}
