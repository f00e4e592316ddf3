//! The literal encoder against the server's types: a type (a Cassandra class name, read by the
//! crate's own class parser) and CQL literal text. Encoding must never panic; where it
//! returns bytes they must be one whole `[value]` that the server could deserialize as the
//! type (checked by `autoprep_fuzz::value`, written from the spec); where it refuses, it
//! must have written nothing. Encoding is deterministic.
//!
//! Input: `<class name>\n<server time zone, may be empty>\n<literal text>`, e.g.
//! `ListType(Int32Type)\n\n[1, 2]`. The literal is taken where the normalizer finds it
//! (`... WHERE k = <text>`), and as an `IN (<text>)` list for `encode_in_list`.
//!
//! The type's own writers are checked too: a class name the parser understood reads back the
//! same from the name the fuzz crate writes for it, and from its protocol `[option]`.
#![no_main]

use autoprep_fuzz::types::{class_name, cql, write_option};
use autoprep_fuzz::value;
use autoprep_protocol::cql::normalize::{normalize, Normalized, Slot};
use autoprep_protocol::cql::Literal;
use autoprep_protocol::types::encode::scylla;
use autoprep_protocol::types::{encode_in_list, encode_literal, ColumnType, EncodeOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.splitn(3, '\n');
    let class = lines.next().unwrap_or_default();
    let zone = lines.next().unwrap_or_default();
    let literal = lines.next().unwrap_or_default();

    let ty = ColumnType::from_custom_class(class);
    type_round_trips(&ty);
    let opts = EncodeOptions {
        server_time_zone: zone.parse().ok(),
    };

    let eq = format!("SELECT * FROM t WHERE k = {literal}");
    if let Ok(Normalized::Shape(shape)) = normalize(eq.as_bytes()) {
        for slot in &shape.slots {
            if let Slot::Literal(lit) = slot {
                encode_one(lit, &ty, &opts);
                for t in [ColumnType::Varchar, ColumnType::Int, ColumnType::Blob] {
                    encode_one(lit, &t, &opts);
                }
            }
        }
    }
    let list = format!("SELECT * FROM t WHERE k IN ({literal})");
    if let Ok(Normalized::Shape(shape)) = normalize(list.as_bytes()) {
        let list_ty = ColumnType::List(Box::new(ty.clone()));
        for slot in &shape.slots {
            if let Slot::Literal(Literal::List(items)) = slot {
                let mut out = vec![0xA5];
                match encode_in_list(items, &list_ty, &opts, &mut out) {
                    Ok(()) => whole_value(&out[1..], &list_ty, "IN list"),
                    Err(_) => assert_eq!(out, [0xA5], "a refused IN list wrote bytes"),
                }
            }
        }
    }
});

/// Encodes `lit` as `ty` and checks what came out.
fn encode_one(lit: &Literal<'_>, ty: &ColumnType, opts: &EncodeOptions) {
    let _ = scylla::established(lit, ty);
    let mut out = vec![0xA5];
    match encode_literal(lit, ty, opts, &mut out) {
        Ok(()) => {
            whole_value(&out[1..], ty, "literal");
            let mut again = vec![0xA5];
            encode_literal(lit, ty, opts, &mut again).expect("encoding is deterministic");
            assert_eq!(out, again, "encoding is deterministic");
        }
        Err(e) => {
            assert_eq!(out, [0xA5], "a refused literal wrote bytes ({e})");
            let _ = (e.label(), e.server_rejects(), e.to_string());
        }
    }
}

/// `out` is one `[value]`: a length, then that many bytes of a value of `ty` (or -1, null).
fn whole_value(out: &[u8], ty: &ColumnType, what: &str) {
    let (len, body) = out.split_at(4.min(out.len()));
    let len = i32::from_be_bytes(len.try_into().expect("a [value] has a length"));
    if len == -1 {
        assert!(body.is_empty(), "bytes after a null {what}");
        return;
    }
    assert_eq!(
        Ok(body.len()),
        usize::try_from(len),
        "{what}: length prefix"
    );
    if let Err(why) = value::check(ty, body) {
        panic!(
            "{what} encoded as {} is not one: {why}: {body:02x?}",
            cql(ty)
        );
    }
}

/// The class name and the `[option]` the fuzz crate writes for `ty` read back as `ty`.
fn type_round_trips(ty: &ColumnType) {
    if !matches!(ty, ColumnType::Custom(_)) {
        let name = class_name(ty);
        assert_eq!(
            &ColumnType::from_custom_class(&name),
            ty,
            "class name {name}"
        );
    }
    let mut option = Vec::new();
    write_option(ty, &mut option);
    let mut rest = &option[..];
    match ty {
        ColumnType::Custom(c) if c.len() > usize::from(u16::MAX) => {}
        _ => {
            assert_eq!(
                ColumnType::read(&mut rest).ok().as_ref(),
                Some(ty),
                "[option] read back"
            );
            assert!(rest.is_empty());
            let mut rest = &option[..];
            ColumnType::skip(&mut rest).expect("[option] skipped");
            assert!(rest.is_empty());
        }
    }
    let _ = ty.cql_name();
}
