//! SUPPORTED (spec section 4.2.4): a `[string multimap]` of server options.

use crate::error::DecodeError;
use crate::primitives::{read_short, read_string, read_string_multimap, StringList};

/// Calls `f` for every key of a SUPPORTED body with its values.
pub fn for_each_option<'a>(
    mut body: &'a [u8],
    f: impl FnMut(&'a str, &mut StringList<'a>),
) -> Result<(), DecodeError> {
    read_string_multimap(&mut body, f)
}

/// A SUPPORTED body without the options whose key `drop` selects: `None` when no key is
/// dropped (the body is then fine as it is), otherwise the new body, with the kept options in
/// their order and their values byte for byte.
pub fn without_options(
    body: &[u8],
    drop: impl Fn(&str) -> bool,
) -> Result<Option<Vec<u8>>, DecodeError> {
    let mut rest = body;
    let n = read_short(&mut rest)?;
    // Byte ranges of the options kept, in `body`.
    let mut kept: Vec<(usize, usize)> = Vec::with_capacity(usize::from(n));
    let mut dropped = false;
    for _ in 0..n {
        let start = body.len() - rest.len();
        let key = read_string(&mut rest)?;
        StringList::read(&mut rest)?;
        if drop(key) {
            dropped = true;
        } else {
            kept.push((start, body.len() - rest.len()));
        }
    }
    if !dropped {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(body.len());
    // Fewer options than the u16 count the body had: the count fits.
    out.extend_from_slice(&(kept.len() as u16).to_be_bytes());
    for (a, b) in kept {
        out.extend_from_slice(&body[a..b]);
    }
    // Anything after the map (nothing, from a sound server) stays.
    out.extend_from_slice(rest);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primitives::write_string;

    fn multimap(entries: &[(&str, &[&str])]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(entries.len() as u16).to_be_bytes());
        for (k, vs) in entries {
            write_string(&mut b, k).unwrap();
            b.extend_from_slice(&(vs.len() as u16).to_be_bytes());
            for v in *vs {
                write_string(&mut b, v).unwrap();
            }
        }
        b
    }

    fn options(body: &[u8]) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        for_each_option(body, |k, vs| {
            out.push((k.to_owned(), vs.map(|v| v.unwrap().to_owned()).collect()))
        })
        .unwrap();
        out
    }

    #[test]
    fn drops_selected_keys_and_keeps_the_rest_in_order() {
        let body = multimap(&[
            ("COMPRESSION", &["lz4", "snappy"]),
            ("CQL_VERSION", &["3.3.1"]),
            ("SCYLLA_SHARD", &["3"]),
        ]);
        let out = without_options(&body, |k| k == "SCYLLA_SHARD")
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            multimap(&[
                ("COMPRESSION", &["lz4", "snappy"]),
                ("CQL_VERSION", &["3.3.1"])
            ])
        );
        assert_eq!(options(&out).len(), 2);
    }

    #[test]
    fn nothing_dropped_is_none() {
        let body = multimap(&[
            ("CQL_VERSION", &["3.4.7"]),
            ("PROTOCOL_VERSIONS", &["5/v5"]),
        ]);
        assert_eq!(
            without_options(&body, |k| k.starts_with("SCYLLA")).unwrap(),
            None
        );
    }

    #[test]
    fn truncated_bodies_are_errors() {
        let body = multimap(&[("SCYLLA_SHARD", &["3"])]);
        for n in 0..body.len() {
            assert!(without_options(&body[..n], |_| true).is_err(), "{n}");
        }
    }
}
