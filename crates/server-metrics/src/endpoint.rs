//! Where a node's metrics endpoint is, and one reading of it.
//!
//! A [`UrlTemplate`] is what a user gives: `http://{host}:7070/metrics`, where `{host}` stands
//! for each node's address (from the cluster view), or a fixed URL for one endpoint. An
//! [`Endpoint`] is one node's resolved address and path.
//!
//! The GET is plain HTTP/1.1 written by hand over a tokio socket (`Connection: close`, identity
//! encoding, chunked or not): an HTTP client stack would be the largest dependency of the proxy
//! for one request every few seconds. Every reading is bounded in time and size, and what comes
//! back is checked before it is believed: a missing, slow or garbled endpoint is an error the
//! caller reports, never a figure.

use crate::exposition::{Exposition, ParseError};
use crate::reading::{NodeReading, ReadingError};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An exposition larger than this is refused (Cassandra's full jmx_exporter output is about
/// 1–3 MiB; the rules autoprep documents give a few KiB).
pub const MAX_BODY: usize = 16 << 20;

/// A URL as given, with `{host}` standing for each node's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlTemplate {
    /// `host:port` to connect to, perhaps with `{host}`.
    authority: String,
    path: String,
}

/// Why a URL is not one this reader can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("{url}: https is not supported; reach the endpoint over plain HTTP")]
    Https { url: String },
    #[error(
        "{url}: the URL needs a host (or {{host}}) and a port, as in http://{{host}}:7070/metrics"
    )]
    NoPort { url: String },
}

impl UrlTemplate {
    /// Parses `http://HOST:PORT[/PATH]` (the scheme may be left out; the path defaults to
    /// `/metrics`); HOST may be `{host}`.
    pub fn parse(url: &str) -> Result<UrlTemplate, UrlError> {
        let url = url.trim();
        if url.starts_with("https://") {
            return Err(UrlError::Https { url: url.into() });
        }
        let rest = url.strip_prefix("http://").unwrap_or(url);
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/metrics"),
        };
        if authority
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(UrlError::NoPort { url: url.into() });
        }
        Ok(UrlTemplate {
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }

    /// Whether `{host}` stands in it (one endpoint per node) or not (one endpoint).
    pub fn per_node(&self) -> bool {
        self.authority.contains("{host}")
    }

    /// The endpoint of the node at `addr` (its native-transport address; only the IP is used).
    pub fn for_node(&self, addr: SocketAddr) -> Endpoint {
        let host = match addr.ip() {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        };
        let authority = self.authority.replace("{host}", &host);
        Endpoint {
            name: authority.clone(),
            addr: authority,
            path: self.path.clone(),
        }
    }

    /// The endpoint when the template has no `{host}`.
    pub fn fixed(&self) -> Endpoint {
        Endpoint {
            name: self.authority.clone(),
            addr: self.authority.clone(),
            path: self.path.clone(),
        }
    }
}

impl std::fmt::Display for UrlTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.path)
    }
}

/// One node's metrics endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// What reports call it (by default `host:port`).
    pub name: String,
    /// `host:port` to connect to.
    pub addr: String,
    pub path: String,
}

/// Why a reading failed; [`ScrapeError::kind`] is a bounded label for metrics.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("GET http://{addr}{path}: {source}")]
    Io {
        addr: String,
        path: String,
        source: std::io::Error,
    },
    #[error("GET http://{addr}{path}: no answer within {timeout:?}")]
    Timeout {
        addr: String,
        path: String,
        timeout: Duration,
    },
    #[error("GET http://{addr}{path}: the answer is larger than {max} bytes")]
    TooLarge {
        addr: String,
        path: String,
        max: usize,
    },
    #[error("GET http://{addr}{path}: {reason}")]
    Http {
        addr: String,
        path: String,
        reason: String,
    },
    #[error("{name}: not a Prometheus exposition ({source})")]
    Exposition { name: String, source: ParseError },
    #[error("{name}: {source}")]
    Reading { name: String, source: ReadingError },
}

impl ScrapeError {
    /// A label for `autoprep_server_metrics_errors_total{reason}`.
    pub fn kind(&self) -> &'static str {
        match self {
            ScrapeError::Io { .. } => "unreachable",
            ScrapeError::Timeout { .. } => "timeout",
            ScrapeError::TooLarge { .. } => "too large",
            ScrapeError::Http { .. } => "http",
            ScrapeError::Exposition { .. } => "not an exposition",
            ScrapeError::Reading { .. } => "no cpu series",
        }
    }
}

impl Endpoint {
    /// Parses `[NAME=]http://HOST:PORT[/PATH]`.
    pub fn parse(spec: &str) -> Result<Endpoint, UrlError> {
        let spec = spec.trim();
        let (name, url) = match spec.split_once('=') {
            Some((n, u)) if !n.contains('/') && !n.contains(':') => (Some(n.trim()), u.trim()),
            _ => (None, spec),
        };
        let t = UrlTemplate::parse(url)?;
        let mut e = t.fixed();
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            e.name = n.to_owned();
        }
        Ok(e)
    }

    /// GETs the exposition within `timeout`, refusing more than `max` bytes.
    pub async fn scrape(&self, timeout: Duration, max: usize) -> Result<String, ScrapeError> {
        let io = |source| ScrapeError::Io {
            addr: self.addr.clone(),
            path: self.path.clone(),
            source,
        };
        let fetch = async {
            let mut sock = tokio::net::TcpStream::connect(&self.addr)
                .await
                .map_err(io)?;
            let request = format!(
                "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: text/plain;version=0.0.4\r\n\
                 Accept-Encoding: identity\r\nConnection: close\r\n\r\n",
                self.path, self.addr
            );
            sock.write_all(request.as_bytes()).await.map_err(io)?;
            let mut raw = Vec::new();
            let mut limited = (&mut sock).take(max as u64 + 1);
            limited.read_to_end(&mut raw).await.map_err(io)?;
            if raw.len() > max {
                return Err(ScrapeError::TooLarge {
                    addr: self.addr.clone(),
                    path: self.path.clone(),
                    max,
                });
            }
            Ok(raw)
        };
        let raw =
            tokio::time::timeout(timeout, fetch)
                .await
                .map_err(|_| ScrapeError::Timeout {
                    addr: self.addr.clone(),
                    path: self.path.clone(),
                    timeout,
                })??;
        http_body(&raw).map_err(|reason| ScrapeError::Http {
            addr: self.addr.clone(),
            path: self.path.clone(),
            reason,
        })
    }

    /// Scrapes and reads the node's figures.
    pub async fn read(&self, timeout: Duration, max: usize) -> Result<NodeReading, ScrapeError> {
        let text = self.scrape(timeout, max).await?;
        let e = Exposition::parse(&text).map_err(|source| ScrapeError::Exposition {
            name: self.name.clone(),
            source,
        })?;
        NodeReading::from_exposition(&e).map_err(|source| ScrapeError::Reading {
            name: self.name.clone(),
            source,
        })
    }
}

/// The body of a raw HTTP response, which must be a 200.
pub fn http_body(raw: &[u8]) -> Result<String, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of the HTTP header")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let body = &raw[split + 4..];
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("status {status:?}"));
    }
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    if header("content-encoding").is_some_and(|e| !e.eq_ignore_ascii_case("identity")) {
        return Err("the endpoint compressed its answer though asked not to".into());
    }
    let body = if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    String::from_utf8(body).map_err(|_| "the exposition is not UTF-8".into())
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("chunk size {size_text:?}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size.saturating_add(2) {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::tests::SCYLLA;
    use crate::reading::Server;
    use proptest::prelude::*;

    #[test]
    fn endpoints() {
        let e = Endpoint::parse("n1=http://10.0.0.5:9180/metrics").unwrap();
        assert_eq!(
            e,
            Endpoint {
                name: "n1".into(),
                addr: "10.0.0.5:9180".into(),
                path: "/metrics".into()
            }
        );
        let e = Endpoint::parse("127.0.0.34:7435").unwrap();
        assert_eq!(
            (e.name.as_str(), e.path.as_str()),
            ("127.0.0.34:7435", "/metrics")
        );
        let e = Endpoint::parse("http://[::1]:9180/x?y=1").unwrap();
        assert_eq!((e.addr.as_str(), e.path.as_str()), ("[::1]:9180", "/x?y=1"));
        assert!(Endpoint::parse("https://a:1/metrics").is_err());
        assert!(Endpoint::parse("http://nohost/metrics").is_err());
    }

    #[test]
    fn templates_stand_for_each_node() {
        let t = UrlTemplate::parse("http://{host}:7070/metrics").unwrap();
        assert!(t.per_node());
        let e = t.for_node("127.0.0.52:9042".parse().unwrap());
        assert_eq!(
            (e.addr.as_str(), e.path.as_str()),
            ("127.0.0.52:7070", "/metrics")
        );
        let e = t.for_node("[::1]:9042".parse().unwrap());
        assert_eq!(e.addr, "[::1]:7070");
        assert_eq!(t.to_string(), "http://{host}:7070/metrics");
        let fixed = UrlTemplate::parse("localhost:9180").unwrap();
        assert!(!fixed.per_node());
        assert_eq!(fixed.fixed().addr, "localhost:9180");
        assert!(matches!(
            UrlTemplate::parse("http://{host}/metrics"),
            Err(UrlError::NoPort { .. })
        ));
    }

    #[test]
    fn http_bodies() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\na 1\n";
        assert_eq!(http_body(plain).unwrap(), "a 1\n");
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\na 1\n\r\n4;x=y\r\nb 2\n\r\n0\r\n\r\n";
        assert_eq!(http_body(chunked).unwrap(), "a 1\nb 2\n");
        assert!(http_body(b"HTTP/1.1 404 Not Found\r\n\r\n").is_err());
        assert!(http_body(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\nxx").is_err());
        assert!(http_body(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffff\r\nx"
        )
        .is_err());
    }

    proptest! {
        /// Whatever an endpoint answers, reading it never panics.
        #[test]
        fn any_answer_is_read_or_refused(raw in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = http_body(&raw);
            let mut with_head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            with_head.extend_from_slice(&raw);
            let _ = http_body(&with_head);
        }
    }

    /// Serves `answer` once on a fresh port; returns the address and the request it read.
    async fn one_shot(answer: Vec<u8>) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = vec![0u8; 1024];
            let n = s.read(&mut req).await.unwrap();
            let _ = s.write_all(&answer).await;
            String::from_utf8_lossy(&req[..n]).into_owned()
        });
        (addr, server)
    }

    /// A scrape over a real socket, from a one-shot server answering in chunks.
    #[tokio::test]
    async fn scrapes_over_http() {
        let body = SCYLLA;
        let resp = format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            body.len()
        );
        let (addr, server) = one_shot(resp.into_bytes()).await;
        let e = Endpoint::parse(&format!("node=http://{addr}/metrics")).unwrap();
        let r = e.read(Duration::from_secs(5), MAX_BODY).await.unwrap();
        assert_eq!(r.server, Server::Scylla);
        let req = server.await.unwrap();
        assert!(req.starts_with("GET /metrics HTTP/1.1\r\n"), "{req}");
    }

    /// Garbage, an oversize answer and silence are errors of their own kind.
    #[tokio::test]
    async fn bad_endpoints_are_errors_of_their_kind() {
        let t = Duration::from_secs(5);
        let (addr, _s) = one_shot(b"HTTP/1.1 200 OK\r\n\r\n<html>hello</html>\n".to_vec()).await;
        let err = Endpoint::parse(&addr)
            .unwrap()
            .read(t, MAX_BODY)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "not an exposition", "{err}");
        let (addr, _s) = one_shot(b"HTTP/1.1 200 OK\r\n\r\njvm_threads 4\n".to_vec()).await;
        let err = Endpoint::parse(&addr)
            .unwrap()
            .read(t, MAX_BODY)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "no cpu series", "{err}");
        let (addr, _s) = one_shot(vec![b'x'; 5000]).await;
        let err = Endpoint::parse(&addr)
            .unwrap()
            .read(t, 1000)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "too large", "{err}");
        // A listener that never answers.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let err = Endpoint::parse(&addr)
            .unwrap()
            .read(Duration::from_millis(200), MAX_BODY)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "timeout", "{err}");
        drop(silent);
        let err = Endpoint::parse(&addr)
            .unwrap()
            .read(t, MAX_BODY)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unreachable", "{err}");
    }
}
