//! Server CPU read from each node's metrics endpoint (Prometheus text format over HTTP), so that
//! the savings benchmark can measure a cluster whose processes it cannot see in `/proc`: a
//! staging cluster, a managed one, nodes in containers or on other hosts. The reading itself
//! (Cassandra through jmx_exporter, ScyllaDB's own endpoint) is the `autoprep-server-metrics`
//! crate's, the one autoprep's estimate of server CPU saved uses: the benchmark that validates
//! that estimate reads the nodes the same way.

use anyhow::{bail, Context, Result};
use autoprep_server_metrics::endpoint::MAX_BODY;
use autoprep_server_metrics::Server;
pub use autoprep_server_metrics::{total, Endpoint, NodeDelta, NodeReading};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one reading of an endpoint may take.
const TIMEOUT: Duration = Duration::from_secs(10);

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
            .map(|s| Endpoint::parse(s).map_err(anyhow::Error::from))
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
            .map(|e| tokio::spawn(async move { e.read(TIMEOUT, MAX_BODY).await }))
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
        after
            .iter()
            .zip(before)
            .map(|(a, b)| a.since(b).map_err(anyhow::Error::from))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_lists() {
        assert!(RemoteCpu::parse(&["a=h:1".into(), "b=h:2".into()]).is_ok());
        assert!(RemoteCpu::parse(&["a=h:1".into(), "a=h:2".into()]).is_err());
        assert!(RemoteCpu::parse(&[]).is_err());
    }
}
