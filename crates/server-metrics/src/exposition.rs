//! The Prometheus text exposition format (0.0.4): `name{label="value",…} value [timestamp]`
//! lines, `#` comments. OpenMetrics text, which an endpoint may send instead, parses the same
//! way (its `# EOF` is a comment).

/// One sample line of an exposition: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Series {
    /// The value of label `key`, if the series has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A line that is not a comment and does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// From 1.
    pub line: usize,
    pub reason: &'static str,
}

/// A parsed exposition.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    pub series: Vec<Series>,
}

impl Exposition {
    /// Parses the text; a line that is not a comment and does not parse is an error (an
    /// endpoint that is not Prometheus' must not read as one without the series).
    pub fn parse(text: &str) -> Result<Exposition, ParseError> {
        let mut series = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            series.push(parse_line(line).map_err(|reason| ParseError {
                line: n + 1,
                reason,
            })?);
        }
        Ok(Exposition { series })
    }

    /// Whether any series is named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.series.iter().any(|s| s.name == name)
    }

    /// The sum of every series of `name` whose labels pass `keep`, or `None` when none does.
    pub fn sum_where(&self, name: &str, keep: impl Fn(&Series) -> bool) -> Option<f64> {
        let mut found = false;
        let mut sum = 0.0;
        for s in self.series.iter().filter(|s| s.name == name && keep(s)) {
            found = true;
            sum += s.value;
        }
        found.then_some(sum)
    }

    /// The sum of every series of `name` (all shards, all label values).
    pub fn sum(&self, name: &str) -> Option<f64> {
        self.sum_where(name, |_| true)
    }
}

fn parse_line(line: &str) -> Result<Series, &'static str> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or("no value")?;
    let name = &line[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        return Err("bad metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(body)?;
        labels = parsed;
        rest = after;
    }
    // The value, then an optional timestamp.
    let value = rest.split_whitespace().next().ok_or("no value")?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().map_err(|_| "the value is not a number")?,
    };
    Ok(Series {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// A series' labels, in the order written.
type Labels = Vec<(String, String)>;

/// Parses `k="v",k2="v2"}` (after the `{`), with the escapes of the format (`\\`, `\"`, `\n`);
/// returns the labels and what follows the `}`.
fn parse_labels(mut s: &str) -> Result<(Labels, &str), &'static str> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = s.find('=').ok_or("label without =")?;
        let key = s[..eq].trim().to_owned();
        s = s[eq + 1..].trim_start();
        s = s.strip_prefix('"').ok_or("unquoted label value")?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("unterminated label value"),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("unterminated escape"),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key, value));
        s = s[end + 1..].trim_start();
        s = s.strip_prefix(',').unwrap_or(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_labels_escapes_and_values() {
        let e = Exposition::parse(
            "a 1\nb{x=\"y\",z=\"q\\\"r\\\\s\\nt\"} 2.5e3 1700000000000\n\
             c{ k = \"v, w\" , } +Inf\n# comment\n\nd NaN\n",
        )
        .unwrap();
        assert_eq!(e.series.len(), 4);
        assert_eq!(e.series[0].value, 1.0);
        assert_eq!(e.series[1].value, 2500.0);
        assert_eq!(e.series[1].label("z"), Some("q\"r\\s\nt"));
        assert_eq!(e.series[2].label("k"), Some("v, w"));
        assert!(e.series[2].value.is_infinite());
        assert!(e.series[3].value.is_nan());
        assert_eq!(
            Exposition::parse("ok 1\n<html> x").unwrap_err(),
            ParseError {
                line: 2,
                reason: "bad metric name"
            }
        );
        assert!(Exposition::parse("a{b=\"c} 1").is_err());
        assert!(Exposition::parse("a{b=c} 1").is_err());
        assert!(Exposition::parse("a x").is_err());
    }

    proptest! {
        /// Garbage never panics the parser (an endpoint may answer anything).
        #[test]
        fn any_text_parses_or_fails_cleanly(text in ".{0,200}") {
            let _ = Exposition::parse(&text);
        }

        /// A written series reads back.
        #[test]
        fn written_series_read_back(
            name in "[a-z_][a-z0-9_]{0,20}",
            key in "[a-z_][a-z0-9_]{0,10}",
            value in "[ -~]{0,20}",
            v in -1e12f64..1e12,
        ) {
            let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
            let text = format!("{name}{{{key}=\"{escaped}\"}} {v}\n");
            let e = Exposition::parse(&text).unwrap();
            prop_assert_eq!(e.series.len(), 1);
            prop_assert_eq!(e.series[0].label(&key), Some(value.as_str()));
            prop_assert_eq!(e.series[0].value, v);
        }
    }
}
