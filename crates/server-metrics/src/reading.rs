//! A node's CPU time and statement counters, read from its exposition:
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

use crate::exposition::{Exposition, Series};

/// Which server an endpoint belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Cassandra,
    Scylla,
}

impl Server {
    /// Its name, for people.
    pub fn name(self) -> &'static str {
        match self {
            Server::Cassandra => "Cassandra",
            Server::Scylla => "ScyllaDB",
        }
    }
}

/// Why an exposition gives no reading, or two readings no change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReadingError {
    #[error(
        "no CPU series: neither scylla_reactor_cpu_busy_ms (ScyllaDB), \
         cassandra_process_cpu_seconds_total nor process_cpu_seconds_total (Cassandra through \
         jmx_exporter)"
    )]
    NoCpuSeries,
    #[error(
        "the standalone jmx_exporter's process_cpu_seconds_total is its own JVM's, not \
         Cassandra's: add the cassandra_process_cpu_seconds_total rule of \
         deploy/grafana/cassandra-jmx-exporter.yaml, or load the exporter into Cassandra as a \
         javaagent"
    )]
    StandaloneExporter,
    #[error(
        "a ScyllaDB endpoint without scylla_reactor_cpu_busy_ms (ScyllaDB 3.0 or later exports it)"
    )]
    ScyllaWithoutBusy,
    #[error("the endpoint changed between two readings ({before} then {after})")]
    EndpointChanged {
        before: &'static str,
        after: &'static str,
    },
    #[error("{series} went back from {before} to {after}: did the node restart?")]
    WentBack {
        series: &'static str,
        before: f64,
        after: f64,
    },
    #[error("{series} is {value}, not a CPU time")]
    NotFinite { series: &'static str, value: f64 },
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
    pub fn from_exposition(e: &Exposition) -> Result<NodeReading, ReadingError> {
        if e.series.iter().any(|s| s.name.starts_with("scylla_")) {
            return Self::scylla(e);
        }
        let (cpu_series, cpu) = if let Some(v) = e.sum("cassandra_process_cpu_seconds_total") {
            ("cassandra_process_cpu_seconds_total", v)
        } else if let Some(v) = e.sum("process_cpu_seconds_total") {
            if jmx_exporter_kind(e).is_some_and(|k| k.contains("httpserver")) {
                return Err(ReadingError::StandaloneExporter);
            }
            ("process_cpu_seconds_total", v)
        } else {
            return Err(ReadingError::NoCpuSeries);
        };
        finite(cpu_series, cpu)?;
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

    fn scylla(e: &Exposition) -> Result<NodeReading, ReadingError> {
        let busy = e
            .sum("scylla_reactor_cpu_busy_ms")
            .ok_or(ReadingError::ScyllaWithoutBusy)?;
        finite("scylla_reactor_cpu_busy_ms", busy)?;
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
    pub fn since(&self, before: &NodeReading) -> Result<NodeDelta, ReadingError> {
        if self.server != before.server || self.cpu_series != before.cpu_series {
            return Err(ReadingError::EndpointChanged {
                before: before.cpu_series,
                after: self.cpu_series,
            });
        }
        let cpu = self.cpu_seconds - before.cpu_seconds;
        if cpu < 0.0 {
            return Err(ReadingError::WentBack {
                series: self.cpu_series,
                before: before.cpu_seconds,
                after: self.cpu_seconds,
            });
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

fn finite(series: &'static str, value: f64) -> Result<(), ReadingError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(ReadingError::NotFinite { series, value })
    }
}

/// The change of a node's figures between two readings.
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What the Prometheus JMX exporter 1.0.1, loaded into Cassandra 5.0.6 as a javaagent with
    /// `deploy/grafana/cassandra-jmx-exporter.yaml`, serves (an excerpt of a real scrape, its
    /// format exactly; the counts made up).
    pub(crate) const CASSANDRA_AGENT: &str = r#"# HELP cassandra_cql_preparedstatementsexecuted Attribute exposed for management org.apache.cassandra.metrics:name=PreparedStatementsExecuted,type=CQL,attribute=Count
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
    pub(crate) const SCYLLA: &str = r#"# HELP scylla_reactor_cpu_busy_ms Total cpu busy time in milliseconds
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
        let err =
            NodeReading::from_exposition(&Exposition::parse(&standalone).unwrap()).unwrap_err();
        assert_eq!(err, ReadingError::StandaloneExporter);
        assert!(err.to_string().contains("its own JVM"));
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
    fn a_cpu_time_that_is_not_a_number_is_refused() {
        let e = Exposition::parse("cassandra_process_cpu_seconds_total NaN\n").unwrap();
        assert!(matches!(
            NodeReading::from_exposition(&e),
            Err(ReadingError::NotFinite { .. })
        ));
        let e = Exposition::parse("scylla_reactor_cpu_busy_ms{shard=\"0\"} -Inf\n").unwrap();
        assert!(NodeReading::from_exposition(&e).is_err());
    }
}
