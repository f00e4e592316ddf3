//! autoprep's admin endpoint: fetches `/metrics` and `/shapes` over plain HTTP/1.0 (so the
//! answer is neither chunked nor kept alive) and reads what the driver test checks.

use std::collections::{BTreeMap, HashMap};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One scrape of `/metrics`: sample name with labels → value.
#[derive(Debug, Default, Clone)]
pub struct Metrics(pub BTreeMap<String, f64>);

impl Metrics {
    /// The value of one sample, `name{labels}` exactly as exposed; 0 when absent.
    pub fn get(&self, sample: &str) -> f64 {
        self.0.get(sample).copied().unwrap_or(0.0)
    }

    /// QUERYs autoprep rewrote into EXECUTEs.
    pub fn rewritten(&self) -> f64 {
        self.get(r#"autoprep_queries_total{outcome="rewritten",reason=""}"#)
    }

    /// Client connections open now.
    pub fn client_connections(&self) -> f64 {
        self.get("autoprep_client_connections")
    }

    /// Every `autoprep_queries_total` sample that grew since `before`, with its growth.
    pub fn query_outcomes_since(&self, before: &Metrics) -> Vec<(String, f64)> {
        self.0
            .iter()
            .filter(|(k, _)| k.starts_with("autoprep_queries_total{"))
            .map(|(k, v)| (k.clone(), v - before.get(k)))
            .filter(|(_, d)| *d > 0.0)
            .collect()
    }
}

/// GET http://`admin`/metrics.
pub async fn scrape(admin: &str) -> Result<Metrics, String> {
    Ok(parse(&get(admin, "/metrics").await?))
}

/// The tracked statement shapes (autoprep tracks at most 1000): (keyspace, text) → QUERYs of
/// the shape rewritten.
pub type Shapes = HashMap<(Option<String>, String), f64>;

/// GET http://`admin`/shapes.
pub async fn shapes(admin: &str) -> Result<Shapes, String> {
    let body = get(admin, "/shapes?limit=1000").await?;
    let doc: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("admin {admin}/shapes: {e}"))?;
    let list = doc["shapes"]
        .as_array()
        .ok_or_else(|| format!("admin {admin}/shapes: no \"shapes\" list"))?;
    Ok(list
        .iter()
        .map(|s| {
            let keyspace = s["keyspace"].as_str().map(str::to_string);
            let text = s["text"].as_str().unwrap_or_default().to_string();
            ((keyspace, text), s["rewritten"].as_f64().unwrap_or(0.0))
        })
        .collect())
}

/// What autoprep has counted at one moment.
pub struct Snapshot {
    pub metrics: Metrics,
    pub shapes: Shapes,
}

impl Snapshot {
    /// Scrapes `/metrics` and `/shapes`.
    pub async fn take(admin: &str) -> Result<Snapshot, String> {
        Ok(Snapshot {
            metrics: scrape(admin).await?,
            shapes: shapes(admin).await?,
        })
    }

    /// What autoprep rewrote since `before`: QUERYs of the shapes tracked in `keyspace` (the
    /// workload's own statements; a driver's system queries have none), and BATCH messages
    /// (not tracked as shapes: the total less every shape's QUERYs).
    pub fn rewrites_since(&self, before: &Snapshot, keyspace: &str) -> (f64, f64) {
        let mut workload = 0.0;
        let mut all_shapes = 0.0;
        for (key, n) in &self.shapes {
            let d = n - before.shapes.get(key).copied().unwrap_or(0.0);
            all_shapes += d;
            if key.0.as_deref() == Some(keyspace) {
                workload += d;
            }
        }
        let total = self.metrics.rewritten() - before.metrics.rewritten();
        (workload, total - all_shapes)
    }
}

/// GET http://`admin``path`: the body of a 200 answer.
async fn get(admin: &str, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(admin)
        .await
        .map_err(|e| format!("admin {admin}: {e}"))?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: autoprep\r\n\r\n").as_bytes())
        .await
        .map_err(|e| format!("admin {admin}: {e}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .await
        .map_err(|e| format!("admin {admin}: {e}"))?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("admin {admin}: no HTTP header in the answer"))?;
    let status = head.split_whitespace().nth(1);
    if !head.starts_with("HTTP/1.") || status != Some("200") {
        return Err(format!(
            "admin {admin}{path}: {}",
            head.lines().next().unwrap_or("")
        ));
    }
    Ok(body.to_string())
}

fn parse(body: &str) -> Metrics {
    let mut samples = BTreeMap::new();
    for line in body.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some((name, value)) = line.rsplit_once(' ') {
            if let Ok(v) = value.parse::<f64>() {
                samples.insert(name.to_string(), v);
            }
        }
    }
    Metrics(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_prometheus_samples() {
        let m = parse(
            "# HELP x\n# TYPE autoprep_client_connections gauge\nautoprep_client_connections 3\n\
             autoprep_queries_total{outcome=\"rewritten\",reason=\"\"} 17\n",
        );
        assert_eq!(m.client_connections(), 3.0);
        assert_eq!(m.rewritten(), 17.0);
        assert_eq!(m.get("absent"), 0.0);
    }
}
