//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>, section 3.2 `traceparent`): the
//! parent a client gives a request, read from the request's custom payload (key
//! `traceparent`, the value the header's text) or from a SQLCommenter comment at the end of the
//! statement text (`... /*traceparent='00-<trace-id>-<parent-id>-<flags>'*/`, the form
//! SQLCommenter appends; other `key='value'` pairs may stand beside it).
//!
//! Only what the spec allows is taken: lower-case hexadecimal, a version other than `ff`, a
//! trace id and a parent id that are not all zeros; version `00` exactly 55 characters, a later
//! version at least that, followed by `-` if longer. Anything else is no parent: the request
//! starts a trace of its own.
//!
//! Comments never change a statement's shape (the normalizer drops them: tested below), so
//! a traceparent in a comment does not split a shape, and the payload reaches the server as it
//! came (the proxy reads it, never edits it).

use autoprep_protocol::primitives::read_bytes_map;

/// The payload key and comment key.
pub const KEY: &str = "traceparent";

/// A parsed `traceparent`: the caller's trace and span, and its sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub parent_id: [u8; 8],
    /// The `trace-flags` byte; bit 0 is `sampled`.
    pub flags: u8,
}

impl TraceParent {
    /// Whether the caller sampled its span (trace-flags bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// Parses a `traceparent` value.
    pub fn parse(s: &[u8]) -> Option<TraceParent> {
        if s.len() < 55 {
            return None;
        }
        let version = hex_byte(s.get(0..2)?)?;
        if version == 0xff || s[2] != b'-' || s[35] != b'-' || s[52] != b'-' {
            return None;
        }
        match (version, s.len()) {
            (0, 55) => {}
            (0, _) => return None,
            // A later version may append fields after a dash.
            (_, 55) => {}
            (_, _) if s[55] == b'-' => {}
            _ => return None,
        }
        let mut trace_id = [0u8; 16];
        for (i, b) in trace_id.iter_mut().enumerate() {
            *b = hex_byte(&s[3 + 2 * i..5 + 2 * i])?;
        }
        let mut parent_id = [0u8; 8];
        for (i, b) in parent_id.iter_mut().enumerate() {
            *b = hex_byte(&s[36 + 2 * i..38 + 2 * i])?;
        }
        let flags = hex_byte(&s[53..55])?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            parent_id,
            flags,
        })
    }

    /// The `traceparent` of the request's custom payload (`[bytes map]`, raw), if any.
    pub fn from_payload(payload: &[u8]) -> Option<TraceParent> {
        let mut found = None;
        let mut buf = payload;
        let read = read_bytes_map(&mut buf, |k, v| {
            if found.is_none() && k == KEY {
                found = v;
            }
        });
        read.ok()?;
        TraceParent::parse(found?)
    }

    /// The `traceparent` of a SQLCommenter comment ending the statement `text` (trailing
    /// blanks and one `;` after it allowed).
    pub fn from_comment(text: &[u8]) -> Option<TraceParent> {
        let key = b"traceparent='";
        let body = before_closing_comment(text)?;
        let open = memchr::memmem::rfind(body, b"/*")?;
        let comment = &body[open + 2..];
        // The key starts the comment or follows a comma of another pair.
        let at = memchr::memmem::find_iter(comment, key).find(|&i| {
            comment[..i]
                .trim_ascii_end()
                .last()
                .is_none_or(|c| *c == b',')
        })?;
        let value = &comment[at + key.len()..];
        let close = memchr::memchr(b'\'', value)?;
        TraceParent::parse(&value[..close])
    }

    /// The W3C text of this parent (for tests and logs).
    pub fn to_header(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            crate::shapes::hex(&self.trace_id),
            crate::shapes::hex(&self.parent_id),
            self.flags
        )
    }
}

/// The statement `text` up to the `*/` of the comment that ends it (trailing blanks and one
/// `;` after it allowed), or `None` when no comment ends it. Looked at first, from the end: a
/// statement that does not end with a comment (nearly all) costs a few byte compares, and no
/// substring searcher is built for it.
pub fn before_closing_comment(text: &[u8]) -> Option<&[u8]> {
    let end = text.trim_ascii_end();
    end.strip_suffix(b";")
        .unwrap_or(end)
        .trim_ascii_end()
        .strip_suffix(b"*/")
}

/// Two lower-case hexadecimal digits.
fn hex_byte(s: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    match s {
        [a, b] => Some(digit(*a)? << 4 | digit(*b)?),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoprep_protocol::cql::normalize::{normalize, Normalized};

    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn parses_the_spec_example() {
        let p = TraceParent::parse(TP.as_bytes()).unwrap();
        assert_eq!(
            crate::shapes::hex(&p.trace_id),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(crate::shapes::hex(&p.parent_id), "b7ad6b7169203331");
        assert!(p.sampled());
        assert_eq!(p.to_header(), TP);
        let unsampled = TP.replace("-01", "-00");
        assert!(!TraceParent::parse(unsampled.as_bytes()).unwrap().sampled());
    }

    #[test]
    fn refuses_what_the_spec_refuses() {
        for bad in [
            // Upper-case hex.
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            // Version ff.
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            // All-zero trace id, all-zero parent id.
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            // Version 00 with more after it, too short, wrong separators, not hex.
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
            "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
            // A later version whose extra part does not start with a dash.
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",
        ] {
            assert_eq!(TraceParent::parse(bad.as_bytes()), None, "{bad}");
        }
        // A later version may carry more fields.
        let later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-ever";
        assert!(TraceParent::parse(later.as_bytes()).is_some());
    }

    /// A `[bytes map]` of `pairs`.
    fn payload(pairs: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = (pairs.len() as u16).to_be_bytes().to_vec();
        for (k, v) in pairs {
            out.extend((k.len() as u16).to_be_bytes());
            out.extend(k.as_bytes());
            out.extend((v.len() as i32).to_be_bytes());
            out.extend(*v);
        }
        out
    }

    #[test]
    fn from_the_custom_payload() {
        let p = payload(&[("other", b"x"), (KEY, TP.as_bytes())]);
        assert_eq!(
            TraceParent::from_payload(&p),
            TraceParent::parse(TP.as_bytes())
        );
        assert_eq!(
            TraceParent::from_payload(&payload(&[("other", b"x")])),
            None
        );
        assert_eq!(
            TraceParent::from_payload(&p[..p.len() - 3]),
            None,
            "truncated"
        );
    }

    #[test]
    fn from_a_sqlcommenter_comment() {
        let want = TraceParent::parse(TP.as_bytes());
        for text in [
            format!("SELECT * FROM t WHERE k = 1 /*traceparent='{TP}'*/"),
            format!("SELECT * FROM t WHERE k = 1 /*action='run',traceparent='{TP}',tracestate='a%3Db'*/ ;"),
            format!("INSERT INTO t (k) VALUES (1)/*traceparent='{TP}'*/\n"),
        ] {
            assert_eq!(TraceParent::from_comment(text.as_bytes()), want, "{text}");
        }
        for text in [
            // Not in a comment, or the comment is not at the end.
            format!("SELECT * FROM t WHERE k = 'traceparent=''{TP}'''"),
            format!("SELECT * FROM t /*traceparent='{TP}'*/ WHERE k = 1"),
            // A key that only ends in traceparent.
            format!("SELECT 1 FROM t /*xtraceparent='{TP}'*/"),
            "SELECT 1 FROM t".to_owned(),
        ] {
            assert_eq!(TraceParent::from_comment(text.as_bytes()), None, "{text}");
        }
    }

    /// A SQLCommenter comment never splits a shape: the normalizer gives the same canonical
    /// text and hash with and without it, for each statement kind.
    #[test]
    fn a_comment_never_splits_a_shape() {
        for stmt in [
            "SELECT v FROM ks.t WHERE k = 'abcdefgh' AND c = 1234567",
            "INSERT INTO t (k, v) VALUES (42, 'secret-value')",
            "UPDATE t SET v = 'x' WHERE k = 5",
            "DELETE FROM t WHERE k = 7 IF EXISTS",
            "SELECT * FROM t WHERE k IN (1, 2, 3)",
        ] {
            let shape = |text: &str| match normalize(text.as_bytes()) {
                Ok(Normalized::Shape(s)) => (s.text.clone(), s.hash(Some("ks")), s.slots.len()),
                other => panic!("{text}: {other:?}"),
            };
            let plain = shape(stmt);
            for commented in [
                format!("{stmt} /*traceparent='{TP}'*/"),
                format!("{stmt}/*action='x',traceparent='{TP}'*/;"),
                format!("/*traceparent='{TP}'*/ {stmt}"),
                format!("{stmt} -- traceparent='{TP}'\n"),
            ] {
                assert_eq!(shape(&commented), plain, "{commented}");
            }
        }
    }
}
