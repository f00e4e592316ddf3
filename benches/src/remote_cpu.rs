//! Server CPU read from each node's metrics endpoint (Prometheus text format over HTTP), so that
//! the savings benchmark can measure a cluster whose processes it cannot see in `/proc`: a
//! staging cluster, a managed one, nodes in containers or on other hosts.
//!
//! Two servers are understood, told apart by what the endpoint exports:
//!
//! - **Cassandra** through the Prometheus JMX exporter. CPU: `cassandra_process_cpu_seconds_total`
//!   (the rule in `deploy/grafana/cassandra-jmx-exporter.yaml`: the JVM's `ProcessCpuTime`,
//!   right whether the exporter runs as a javaagent inside Cassandra or as the standalone
//!   httpserver), else `process_cpu_seconds_total`, which the javaagent (and only it) exports
//!   for the JVM it runs in, Cassandra's. The standalone exporter's `process_cpu_seconds_total`
//!   is its own JVM's: an endpoint that says it is the httpserver and lacks the rule is refused.
//!   Statements: `cassandra_cql_regularstatementsexecuted`, `..._preparedstatementsexecuted`,
//!   `..._preparedstatementsevicted` when the rules export them.
//! - **ScyllaDB**'s own endpoint (port 9180). CPU: `scylla_reactor_cpu_busy_ms` summed over the
//!   shards (the reactors' busy time, what `scylla_reactor_utilization` is computed from);
//!   alongside, where the version exports them, `scylla_reactor_cpu_used_time_ms` (the reactor
//!   threads' CPU time, 2025.2+) and `scylla_scheduler_runtime_ms` summed over the scheduling
//!   groups. Requests: `scylla_transport_requests_served`, statements by kind from
//!   `scylla_transport_cql_requests_count{kind="QUERY"|"EXECUTE"}` (5.4+), statements parsed from
//!   `scylla_query_processor_statements_prepared`, prepared-cache evictions from
//!   `scylla_cql_prepared_cache_evictions`.
//!
//! No ScyllaDB runs where this was written: its part is unit-tested against an exposition
//! written from ScyllaDB's documented metric names and labels (`shard`, `kind`,
//! `scheduling_group_name`, `group`), not one captured from a live node.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One sample line of an exposition: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Series {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed Prometheus text exposition (format 0.0.4; the OpenMetrics text a client may be
/// sent instead parses the same way, its `# EOF` being a comment).
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    pub series: Vec<Series>,
}

impl Exposition {
    /// Parses the text; a line that is not a comment and does not parse is an error (an
    /// endpoint that is not Prometheus' should not read as one without the series).
    pub fn parse(text: &str) -> Result<Exposition> {
        let mut series = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            series.push(parse_line(line).with_context(|| format!("line {}: {line}", n + 1))?);
        }
        Ok(Exposition { series })
    }

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

fn parse_line(line: &str) -> Result<Series> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .context("no value")?;
    let name = &line[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        bail!("bad metric name {name:?}");
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(body)?;
        labels = parsed;
        rest = after;
    }
    // The value, then an optional timestamp.
    let value = rest.split_whitespace().next().context("no value")?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().with_context(|| format!("value {v:?}"))?,
    };
    Ok(Series {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Parses `k="v",k2="v2"}` (after the `{`), with the escapes of the format (`\\`, `\"`, `\n`);
/// returns the labels and what follows the `}`.
fn parse_labels(mut s: &str) -> Result<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = s.find('=').context("label without =")?;
        let key = s[..eq].trim().to_owned();
        s = s[eq + 1..].trim_start();
        s = s.strip_prefix('"').context("unquoted label value")?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            match chars.next() {
                None => bail!("unterminated label value"),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => bail!("unterminated escape"),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key, value));
        s = s[end + 1..].trim_start();
        s = s.strip_prefix(',').unwrap_or(s);
    }
}

/// Which server an endpoint belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Cassandra,
    Scylla,
}

impl Server {
    pub fn name(self) -> &'static str {
        match self {
            Server::Cassandra => "Cassandra",
            Server::Scylla => "ScyllaDB",
        }
    }
}

/// What one scrape of a node's endpoint says, in seconds and counts since the node started.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeReading {
    pub server: Server,
    /// The server's CPU time, seconds (the series below).
    pub cpu_seconds: f64,
    /// The series the CPU time was read from.
    pub cpu_series: &'static str,
    /// Statements executed from their text (Cassandra's regular statements, ScyllaDB's QUERY
    /// requests), where exported.
    pub regular: Option<f64>,
    /// Statements executed by prepared id (EXECUTE), where exported.
    pub prepared: Option<f64>,
    /// Statements evicted from the server's prepared cache, where exported.
    pub evicted: Option<f64>,
    /// ScyllaDB: CQL requests served (every kind).
    pub requests_served: Option<f64>,
    /// ScyllaDB: statements parsed (each QUERY's text, each PREPARE).
    pub statements_prepared: Option<f64>,
    /// ScyllaDB: the reactor threads' CPU time, seconds (2025.2+).
    pub cpu_used_seconds: Option<f64>,
    /// ScyllaDB: the scheduling groups' runtime, seconds, summed.
    pub scheduler_runtime_seconds: Option<f64>,
}

/// The jmx_exporter that serves the endpoint, from its `jmx_exporter_build_info` (`name` is
/// `jmx_prometheus_javaagent` or `jmx_prometheus_httpserver`).
fn jmx_exporter_kind(e: &Exposition) -> Option<&str> {
    e.series
        .iter()
        .find(|s| s.name == "jmx_exporter_build_info")
        .and_then(|s| s.label("name"))
}

impl NodeReading {
    /// Reads a node's figures from its exposition.
    pub fn from_exposition(e: &Exposition) -> Result<NodeReading> {
        if e.series.iter().any(|s| s.name.starts_with("scylla_")) {
            return Self::scylla(e);
        }
        let (cpu_series, cpu) = if let Some(v) = e.sum("cassandra_process_cpu_seconds_total") {
            ("cassandra_process_cpu_seconds_total", v)
        } else if let Some(v) = e.sum("process_cpu_seconds_total") {
            if jmx_exporter_kind(e).is_some_and(|k| k.contains("httpserver")) {
                bail!(
                    "the standalone jmx_exporter's process_cpu_seconds_total is its own JVM's, \
                     not Cassandra's: add the cassandra_process_cpu_seconds_total rule of \
                     deploy/grafana/cassandra-jmx-exporter.yaml, or load the exporter into \
                     Cassandra as a javaagent"
                );
            }
            ("process_cpu_seconds_total", v)
        } else {
            bail!(
                "no CPU series: neither scylla_reactor_cpu_busy_ms (ScyllaDB), \
                 cassandra_process_cpu_seconds_total nor process_cpu_seconds_total (Cassandra \
                 through jmx_exporter)"
            );
        };
        Ok(NodeReading {
            server: Server::Cassandra,
            cpu_seconds: cpu,
            cpu_series,
            regular: e.sum("cassandra_cql_regularstatementsexecuted"),
            prepared: e.sum("cassandra_cql_preparedstatementsexecuted"),
            evicted: e.sum("cassandra_cql_preparedstatementsevicted"),
            requests_served: None,
            statements_prepared: None,
            cpu_used_seconds: None,
            scheduler_runtime_seconds: None,
        })
    }

    fn scylla(e: &Exposition) -> Result<NodeReading> {
        let busy = e.sum("scylla_reactor_cpu_busy_ms").context(
            "a ScyllaDB endpoint without scylla_reactor_cpu_busy_ms (ScyllaDB 3.0 or later \
             exports it)",
        )?;
        let kind = |k: &'static str| move |s: &Series| s.label("kind") == Some(k);
        Ok(NodeReading {
            server: Server::Scylla,
            cpu_seconds: busy / 1000.0,
            cpu_series: "scylla_reactor_cpu_busy_ms",
            regular: e.sum_where("scylla_transport_cql_requests_count", kind("QUERY")),
            prepared: e.sum_where("scylla_transport_cql_requests_count", kind("EXECUTE")),
            evicted: e.sum("scylla_cql_prepared_cache_evictions"),
            requests_served: e.sum("scylla_transport_requests_served"),
            statements_prepared: e.sum("scylla_query_processor_statements_prepared"),
            cpu_used_seconds: e
                .sum("scylla_reactor_cpu_used_time_ms")
                .map(|ms| ms / 1000.0),
            scheduler_runtime_seconds: e.sum("scylla_scheduler_runtime_ms").map(|ms| ms / 1000.0),
        })
    }

    /// What changed from `before` to `self` (a later reading of the same node). A counter that
    /// went back means the node restarted in between: an error, not a negative figure.
    pub fn since(&self, before: &NodeReading) -> Result<NodeDelta> {
        if self.server != before.server || self.cpu_series != before.cpu_series {
            bail!("the endpoint changed between two readings");
        }
        let cpu = self.cpu_seconds - before.cpu_seconds;
        if cpu < 0.0 {
            bail!(
                "{} went back from {} to {}: did the node restart?",
                self.cpu_series,
                before.cpu_seconds,
                self.cpu_seconds
            );
        }
        let d = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| (a - b).max(0.0));
        Ok(NodeDelta {
            cpu_seconds: cpu,
            regular: d(self.regular, before.regular),
            prepared: d(self.prepared, before.prepared),
            evicted: d(self.evicted, before.evicted),
            requests_served: d(self.requests_served, before.requests_served),
            statements_prepared: d(self.statements_prepared, before.statements_prepared),
            cpu_used_seconds: d(self.cpu_used_seconds, before.cpu_used_seconds),
            scheduler_runtime_seconds: d(
                self.scheduler_runtime_seconds,
                before.scheduler_runtime_seconds,
            ),
        })
    }
}

/// The change of a node's figures over a phase.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeDelta {
    pub cpu_seconds: f64,
    pub regular: Option<f64>,
    pub prepared: Option<f64>,
    pub evicted: Option<f64>,
    pub requests_served: Option<f64>,
    pub statements_prepared: Option<f64>,
    pub cpu_used_seconds: Option<f64>,
    pub scheduler_runtime_seconds: Option<f64>,
}

/// Sums the nodes' changes; an optional figure is summed only when every node has it.
pub fn total(deltas: &[NodeDelta]) -> NodeDelta {
    let all = |f: fn(&NodeDelta) -> Option<f64>| -> Option<f64> {
        if deltas.is_empty() {
            return None;
        }
        deltas.iter().map(f).sum()
    };
    NodeDelta {
        cpu_seconds: deltas.iter().map(|d| d.cpu_seconds).sum(),
        regular: all(|d| d.regular),
        prepared: all(|d| d.prepared),
        evicted: all(|d| d.evicted),
        requests_served: all(|d| d.requests_served),
        statements_prepared: all(|d| d.statements_prepared),
        cpu_used_seconds: all(|d| d.cpu_used_seconds),
        scheduler_runtime_seconds: all(|d| d.scheduler_runtime_seconds),
    }
}

/// A node's metrics endpoint: `[NAME=]http://HOST:PORT[/PATH]` (the path defaults to
/// `/metrics`; the name, to the host and port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    /// `host:port` to connect to.
    pub addr: String,
    pub path: String,
}

impl Endpoint {
    pub fn parse(spec: &str) -> Result<Endpoint> {
        let spec = spec.trim();
        let (name, url) = match spec.split_once('=') {
            Some((n, u)) if !n.contains('/') && !n.contains(':') => (Some(n.trim()), u.trim()),
            _ => (None, spec),
        };
        if url.starts_with("https://") {
            bail!(
                "{url}: https is not supported; reach the endpoint over plain HTTP (a port \
                 forward such as `kubectl port-forward` or `ssh -L`)"
            );
        }
        let rest = url.strip_prefix("http://").unwrap_or(url);
        let (addr, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/metrics"),
        };
        if addr
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            bail!(
                "{spec}: the endpoint needs a host and a port, as in http://10.0.0.5:9180/metrics"
            );
        }
        Ok(Endpoint {
            name: name.filter(|n| !n.is_empty()).unwrap_or(addr).to_owned(),
            addr: addr.to_owned(),
            path: path.to_owned(),
        })
    }

    /// GETs the exposition (HTTP/1.1, `Connection: close`, chunked or not), within 10 s.
    pub async fn scrape(&self) -> Result<String> {
        let fetch = async {
            let mut sock = tokio::net::TcpStream::connect(&self.addr).await?;
            let host = &self.addr;
            let request = format!(
                "GET {} HTTP/1.1\r\nHost: {host}\r\nAccept: text/plain;version=0.0.4\r\n\
                 Accept-Encoding: identity\r\nConnection: close\r\n\r\n",
                self.path
            );
            sock.write_all(request.as_bytes()).await?;
            let mut raw = Vec::new();
            sock.read_to_end(&mut raw).await?;
            anyhow::Ok(raw)
        };
        let raw = tokio::time::timeout(Duration::from_secs(10), fetch)
            .await
            .map_err(|_| anyhow::anyhow!("no answer within 10 s"))?
            .with_context(|| format!("GET http://{}{}", self.addr, self.path))?;
        http_body(&raw).with_context(|| format!("GET http://{}{}", self.addr, self.path))
    }

    /// Scrapes and reads the node's figures.
    pub async fn read(&self) -> Result<NodeReading> {
        let text = self.scrape().await?;
        let e = Exposition::parse(&text)
            .with_context(|| format!("{}: not a Prometheus exposition", self.name))?;
        NodeReading::from_exposition(&e).with_context(|| self.name.clone())
    }
}

/// The body of a raw HTTP response, which must be a 200.
fn http_body(raw: &[u8]) -> Result<String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of the HTTP header")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let body = &raw[split + 4..];
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("{status}");
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
        bail!("the endpoint compressed its answer though asked not to");
    }
    let body = if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    String::from_utf8(body).context("the exposition is not UTF-8")
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("truncated chunk size")?;
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .with_context(|| format!("chunk size {size_text:?}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            bail!("truncated chunk");
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// The metrics endpoints of every node of the cluster measured.
#[derive(Debug, Clone)]
pub struct RemoteCpu {
    pub endpoints: Vec<Endpoint>,
}

impl RemoteCpu {
    /// From `--metrics-url` values (each `[NAME=]URL`); names must differ.
    pub fn parse(specs: &[String]) -> Result<RemoteCpu> {
        let endpoints = specs
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| Endpoint::parse(s))
            .collect::<Result<Vec<_>>>()?;
        let mut names = BTreeMap::new();
        for e in &endpoints {
            if names.insert(e.name.clone(), ()).is_some() {
                bail!("two metrics endpoints named {}", e.name);
            }
        }
        if endpoints.is_empty() {
            bail!("no metrics endpoint");
        }
        Ok(RemoteCpu { endpoints })
    }

    /// Reads every node, concurrently (so that the readings of a phase are close in time).
    pub async fn read(&self) -> Result<Vec<NodeReading>> {
        let tasks: Vec<_> = self
            .endpoints
            .iter()
            .cloned()
            .map(|e| tokio::spawn(async move { e.read().await }))
            .collect();
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            out.push(t.await.context("metrics reader task")??);
        }
        let servers: Vec<Server> = out.iter().map(|r| r.server).collect();
        if servers.windows(2).any(|w| w[0] != w[1]) {
            bail!("the metrics endpoints belong to different servers: {servers:?}");
        }
        Ok(out)
    }

    /// The change of every node's figures between two readings of [`RemoteCpu::read`].
    pub fn deltas(before: &[NodeReading], after: &[NodeReading]) -> Result<Vec<NodeDelta>> {
        if before.len() != after.len() {
            bail!("readings of different node counts");
        }
        after.iter().zip(before).map(|(a, b)| a.since(b)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the Prometheus JMX exporter 1.0.1, loaded into Cassandra 5.0.6 as a javaagent with
    /// `deploy/grafana/cassandra-jmx-exporter.yaml`, serves (an excerpt of a real scrape, its
    /// format exactly; the counts made up).
    const CASSANDRA_AGENT: &str = r#"# HELP cassandra_cql_preparedstatementsexecuted Attribute exposed for management org.apache.cassandra.metrics:name=PreparedStatementsExecuted,type=CQL,attribute=Count
# TYPE cassandra_cql_preparedstatementsexecuted untyped
cassandra_cql_preparedstatementsexecuted 1520331.0
# HELP cassandra_cql_regularstatementsexecuted Attribute exposed for management org.apache.cassandra.metrics:name=RegularStatementsExecuted,type=CQL,attribute=Count
# TYPE cassandra_cql_regularstatementsexecuted untyped
cassandra_cql_regularstatementsexecuted 2874112.0
# HELP cassandra_cql_preparedstatementsevicted Attribute exposed for management org.apache.cassandra.metrics:name=PreparedStatementsEvicted,type=CQL,attribute=Count
# TYPE cassandra_cql_preparedstatementsevicted untyped
cassandra_cql_preparedstatementsevicted 0.0
# HELP cassandra_process_cpu_seconds_total java.lang:name=null,type=OperatingSystem,attribute=ProcessCpuTime
# TYPE cassandra_process_cpu_seconds_total counter
cassandra_process_cpu_seconds_total 1234.56
# HELP jmx_exporter_build_info JMX Exporter build information
# TYPE jmx_exporter_build_info gauge
jmx_exporter_build_info{name="jmx_prometheus_javaagent",version="1.0.1"} 1
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1234.5
# HELP jvm_memory_used_bytes Used bytes of a given JVM memory area.
# TYPE jvm_memory_used_bytes gauge
jvm_memory_used_bytes{area="heap"} 3.95851024E8
jvm_memory_used_bytes{area="nonheap"} 7.3183144E7
"#;

    /// A ScyllaDB endpoint (port 9180), written from ScyllaDB's documented metric names and
    /// labels (two shards, the scheduling groups of 5.4+ and 2025.x), not captured from a node:
    /// none runs here.
    const SCYLLA: &str = r#"# HELP scylla_reactor_cpu_busy_ms Total cpu busy time in milliseconds
# TYPE scylla_reactor_cpu_busy_ms counter
scylla_reactor_cpu_busy_ms{shard="0"} 812345
scylla_reactor_cpu_busy_ms{shard="1"} 790012
# HELP scylla_reactor_cpu_used_time_ms Total reactor thread CPU time (from CLOCK_THREAD_CPUTIME)
# TYPE scylla_reactor_cpu_used_time_ms counter
scylla_reactor_cpu_used_time_ms{shard="0"} 700000
scylla_reactor_cpu_used_time_ms{shard="1"} 690000
# HELP scylla_reactor_utilization CPU utilization
# TYPE scylla_reactor_utilization gauge
scylla_reactor_utilization{shard="0"} 41.250000
scylla_reactor_utilization{shard="1"} 39.875000
# HELP scylla_scheduler_runtime_ms Accumulated runtime of this task queue; an increment rate of 1000ms per second indicates full utilization
# TYPE scylla_scheduler_runtime_ms counter
scylla_scheduler_runtime_ms{group="main",shard="0"} 100000
scylla_scheduler_runtime_ms{group="sl:default",shard="0"} 600000
scylla_scheduler_runtime_ms{group="compaction",shard="0"} 50000
scylla_scheduler_runtime_ms{group="main",shard="1"} 90000
scylla_scheduler_runtime_ms{group="sl:default",shard="1"} 610000
# HELP scylla_transport_requests_served Counts a number of served requests.
# TYPE scylla_transport_requests_served counter
scylla_transport_requests_served{scheduling_group_name="sl:default",shard="0"} 5000000
scylla_transport_requests_served{scheduling_group_name="sl:default",shard="1"} 4900000
# HELP scylla_transport_cql_requests_count Counts the total number of CQL messages of a specific kind.
# TYPE scylla_transport_cql_requests_count counter
scylla_transport_cql_requests_count{kind="QUERY",scheduling_group_name="sl:default",shard="0"} 3000000
scylla_transport_cql_requests_count{kind="QUERY",scheduling_group_name="sl:default",shard="1"} 2900000
scylla_transport_cql_requests_count{kind="EXECUTE",scheduling_group_name="sl:default",shard="0"} 1999000
scylla_transport_cql_requests_count{kind="EXECUTE",scheduling_group_name="sl:default",shard="1"} 1999500
scylla_transport_cql_requests_count{kind="PREPARE",scheduling_group_name="sl:default",shard="0"} 1000
scylla_transport_cql_requests_count{kind="PREPARE",scheduling_group_name="sl:default",shard="1"} 500
# HELP scylla_query_processor_statements_prepared Counts the total number of parsed CQL requests.
# TYPE scylla_query_processor_statements_prepared counter
scylla_query_processor_statements_prepared{shard="0"} 3001000
scylla_query_processor_statements_prepared{shard="1"} 2900500
# HELP scylla_cql_prepared_cache_evictions Counts the number of prepared statements cache entries evictions.
# TYPE scylla_cql_prepared_cache_evictions counter
scylla_cql_prepared_cache_evictions{shard="0"} 3
scylla_cql_prepared_cache_evictions{shard="1"} 4
"#;

    /// The same node a phase later: per shard, 2 s of busy time more and 10 000 + 10 000
    /// requests, all EXECUTEs.
    fn scylla_later() -> String {
        SCYLLA
            .replace("812345", "813345")
            .replace("790012", "791012")
            .replace("5000000", "5010000")
            .replace("4900000", "4910000")
            .replace("1999000", "2009000")
            .replace("1999500", "2009500")
    }

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
        assert!(Exposition::parse("<html>").is_err());
        assert!(Exposition::parse("a{b=\"c} 1").is_err());
        assert!(Exposition::parse("a{b=c} 1").is_err());
    }

    #[test]
    fn cassandra_through_the_javaagent() {
        let e = Exposition::parse(CASSANDRA_AGENT).unwrap();
        let r = NodeReading::from_exposition(&e).unwrap();
        assert_eq!(r.server, Server::Cassandra);
        // The rule's series is preferred over the agent's own (the same process here).
        assert_eq!(r.cpu_series, "cassandra_process_cpu_seconds_total");
        assert_eq!(r.cpu_seconds, 1234.56);
        assert_eq!(r.regular, Some(2_874_112.0));
        assert_eq!(r.prepared, Some(1_520_331.0));
        assert_eq!(r.evicted, Some(0.0));
        assert_eq!(r.requests_served, None);
    }

    #[test]
    fn cassandra_agent_without_the_rule_uses_the_agents_process_cpu() {
        let text: String = CASSANDRA_AGENT
            .lines()
            .filter(|l| !l.contains("cassandra_process_cpu"))
            .map(|l| format!("{l}\n"))
            .collect();
        let r = NodeReading::from_exposition(&Exposition::parse(&text).unwrap()).unwrap();
        assert_eq!(r.cpu_series, "process_cpu_seconds_total");
        assert_eq!(r.cpu_seconds, 1234.5);
        // The standalone exporter's own process CPU is not Cassandra's: refused.
        let standalone = text.replace("jmx_prometheus_javaagent", "jmx_prometheus_httpserver");
        let err = NodeReading::from_exposition(&Exposition::parse(&standalone).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("its own JVM"), "{err}");
        // Nothing to read at all.
        let none = Exposition::parse("jvm_threads_current 40\n").unwrap();
        assert!(NodeReading::from_exposition(&none).is_err());
    }

    #[test]
    fn scylla_sums_the_shards() {
        let r = NodeReading::from_exposition(&Exposition::parse(SCYLLA).unwrap()).unwrap();
        assert_eq!(r.server, Server::Scylla);
        assert_eq!(r.cpu_series, "scylla_reactor_cpu_busy_ms");
        assert!((r.cpu_seconds - 1602.357).abs() < 1e-9, "{}", r.cpu_seconds);
        assert_eq!(r.regular, Some(5_900_000.0));
        assert_eq!(r.prepared, Some(3_998_500.0));
        assert_eq!(r.evicted, Some(7.0));
        assert_eq!(r.requests_served, Some(9_900_000.0));
        assert_eq!(r.statements_prepared, Some(5_901_500.0));
        assert_eq!(r.cpu_used_seconds, Some(1390.0));
        assert_eq!(r.scheduler_runtime_seconds, Some(1450.0));
    }

    #[test]
    fn scylla_phase_delta_gives_cpu_per_request() {
        let before = NodeReading::from_exposition(&Exposition::parse(SCYLLA).unwrap()).unwrap();
        let after =
            NodeReading::from_exposition(&Exposition::parse(&scylla_later()).unwrap()).unwrap();
        let d = after.since(&before).unwrap();
        assert!((d.cpu_seconds - 2.0).abs() < 1e-9);
        assert_eq!(d.requests_served, Some(20_000.0));
        assert_eq!(d.prepared, Some(20_000.0));
        assert_eq!(d.regular, Some(0.0));
        assert_eq!(d.statements_prepared, Some(0.0));
        // 2 s over 20 000 requests: 100 µs per request.
        let us = d.cpu_seconds * 1e6 / d.requests_served.unwrap();
        assert!((us - 100.0).abs() < 1e-6);
        // A restart between the readings is an error, not a negative CPU time.
        assert!(before.since(&after).is_err());
    }

    #[test]
    fn older_scylla_lacks_the_optional_series() {
        // ScyllaDB before 5.4 (no cql_requests_count) and before 2025.2 (no cpu_used_time_ms).
        let old: String = SCYLLA
            .lines()
            .filter(|l| !l.contains("cql_requests_count") && !l.contains("cpu_used_time"))
            .map(|l| format!("{l}\n"))
            .collect();
        let r = NodeReading::from_exposition(&Exposition::parse(&old).unwrap()).unwrap();
        assert_eq!(
            (r.regular, r.prepared, r.cpu_used_seconds),
            (None, None, None)
        );
        assert!(r.requests_served.is_some());
        let no_busy: String = old
            .lines()
            .filter(|l| !l.contains("cpu_busy_ms"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(NodeReading::from_exposition(&Exposition::parse(&no_busy).unwrap()).is_err());
    }

    #[test]
    fn totals_need_every_node() {
        let a = NodeDelta {
            cpu_seconds: 1.0,
            regular: Some(10.0),
            prepared: Some(5.0),
            ..Default::default()
        };
        let b = NodeDelta {
            cpu_seconds: 2.0,
            regular: Some(1.0),
            prepared: None,
            ..Default::default()
        };
        let t = total(&[a, b]);
        assert_eq!(t.cpu_seconds, 3.0);
        assert_eq!(t.regular, Some(11.0));
        assert_eq!(t.prepared, None);
        assert_eq!(total(&[]).regular, None);
    }

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
        assert!(RemoteCpu::parse(&["a=h:1".into(), "a=h:2".into()]).is_err());
        assert!(RemoteCpu::parse(&[]).is_err());
    }

    #[test]
    fn http_bodies() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\na 1\n";
        assert_eq!(http_body(plain).unwrap(), "a 1\n");
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\na 1\n\r\n4;x=y\r\nb 2\n\r\n0\r\n\r\n";
        assert_eq!(http_body(chunked).unwrap(), "a 1\nb 2\n");
        assert!(http_body(b"HTTP/1.1 404 Not Found\r\n\r\n").is_err());
        assert!(http_body(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\nxx").is_err());
    }

    /// A scrape over a real socket, from a one-shot server answering in chunks.
    #[tokio::test]
    async fn scrapes_over_http() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = vec![0u8; 1024];
            let n = s.read(&mut req).await.unwrap();
            let req = String::from_utf8_lossy(&req[..n]).into_owned();
            let body = SCYLLA;
            let resp = format!(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            );
            s.write_all(resp.as_bytes()).await.unwrap();
            req
        });
        let rc = RemoteCpu::parse(&[format!("node=http://{addr}/metrics")]).unwrap();
        let r = rc.read().await.unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].server, Server::Scylla);
        let req = server.await.unwrap();
        assert!(req.starts_with("GET /metrics HTTP/1.1\r\n"), "{req}");
    }
}
