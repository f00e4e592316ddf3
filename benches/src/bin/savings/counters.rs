//! The server's own counters, read over CQL from its virtual tables.

use anyhow::{bail, Context, Result};
use autoprep_benches::load::Conn;

/// `regular_statements_executed`, `prepared_statements_executed` and
/// `prepared_statements_evicted`, summed over the nodes.
pub async fn cql_metrics_sum(conns: &mut [Conn]) -> Result<(f64, f64, f64)> {
    let mut sum = (0.0, 0.0, 0.0);
    for c in conns {
        let (r, p, e) = cql_metrics(c).await?;
        sum = (sum.0 + r, sum.1 + p, sum.2 + e);
    }
    Ok(sum)
}

/// Messages the nodes sent to their peers so far (`sent_count` of
/// `system_views.internode_outbound`, each node read over its own connection), summed.
pub async fn internode_sent(conns: &mut [Conn]) -> Result<u64> {
    let mut sum = 0u64;
    for c in conns {
        for r in c
            .rows("SELECT sent_count FROM system_views.internode_outbound")
            .await?
        {
            if let Some(Some(v)) = r.first() {
                let v = <[u8; 8]>::try_from(v.as_slice())
                    .map(i64::from_be_bytes)
                    .context("internode_outbound.sent_count")?;
                sum += u64::try_from(v).unwrap_or(0);
            }
        }
    }
    Ok(sum)
}

/// Reads `regular_statements_executed`, `prepared_statements_executed` and
/// `prepared_statements_evicted` (0 where the server lacks it).
pub async fn cql_metrics(conn: &mut Conn) -> Result<(f64, f64, f64)> {
    let rows = conn
        .rows("SELECT name, value FROM system_views.cql_metrics")
        .await?;
    let (mut regular, mut prepared, mut evicted) = (f64::NAN, f64::NAN, 0.0);
    for r in rows {
        let (Some(Some(name)), Some(Some(v))) = (r.first(), r.get(1)) else {
            continue;
        };
        let Ok(v) = <[u8; 8]>::try_from(v.as_slice()).map(f64::from_be_bytes) else {
            continue;
        };
        match name.as_slice() {
            b"regular_statements_executed" => regular = v,
            b"prepared_statements_executed" => prepared = v,
            b"prepared_statements_evicted" => evicted = v,
            _ => {}
        }
    }
    if regular.is_nan() || prepared.is_nan() {
        bail!("system_views.cql_metrics lacks the executed-statement counters");
    }
    Ok((regular, prepared, evicted))
}
