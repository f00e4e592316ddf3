//! The local multi-node cluster of `scripts/cluster.sh`, as a benchmark measures it: every
//! node's number, native address, datacenter and JVM pid, from `scripts/cluster.sh info` (which
//! reads each node's pid file and checks that the pid is that node's CassandraDaemon). The
//! script's `AUTOPREP_CLUSTER_*` variables pass through the environment, so a cluster on other
//! addresses or with another prefix is found the same way.

use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::process::Command;

/// A running node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// 1-based, as the script numbers nodes (node 1 is the seed).
    pub number: u32,
    /// Native transport address.
    pub addr: SocketAddr,
    pub datacenter: String,
    pub rack: String,
    pub pid: u32,
}

/// Runs `script info` and returns the nodes, in node order; every node must be running.
pub fn nodes(script: &str) -> Result<Vec<ClusterNode>> {
    let out = Command::new(script)
        .arg("info")
        .output()
        .with_context(|| format!("run {script} info"))?;
    if !out.status.success() {
        bail!(
            "{script} info: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_info(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("the output of {script} info"))
}

/// Parses the node table of `cluster.sh info`: a tab-separated header line starting with
/// `node`, then one line per node (the settings lines before the header are skipped).
pub fn parse_info(text: &str) -> Result<Vec<ClusterNode>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with("node\t"));
    let header: Vec<&str> = lines.next().context("no node table")?.split('\t').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .with_context(|| format!("no {name} column"))
    };
    let (number, address, dc, rack, port, pid) = (
        col("node")?,
        col("address")?,
        col("dc")?,
        col("rack")?,
        col("native_port")?,
        col("pid")?,
    );
    let mut nodes = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let get = |i: usize| f.get(i).copied().context("short line");
        let n: u32 = get(number)?.parse().context("node number")?;
        let Ok(pid) = get(pid)?.parse::<u32>() else {
            bail!("node {n} is not running (scripts/cluster.sh start)");
        };
        let addr = format!("{}:{}", get(address)?, get(port)?)
            .parse()
            .with_context(|| format!("node {n}'s address"))?;
        nodes.push(ClusterNode {
            number: n,
            addr,
            datacenter: get(dc)?.to_owned(),
            rack: get(rack)?.to_owned(),
            pid,
        });
    }
    if nodes.is_empty() {
        bail!("no node listed");
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "cluster_name\tautoprep-cluster\nseed\t127.0.0.51:7000\n\
        node\tname\taddress\tdc\track\tnative_port\tstorage_port\tjmx_port\tpid\tdir\n\
        1\tb-n1\t127.0.0.51\tdc1\tr1\t9042\t7000\t7451\t22470\t/x/b-n1\n\
        2\tb-n2\t127.0.0.52\tdc1\tr2\t9042\t7000\t7452\t23756\t/x/b-n2\n\
        3\tb-n3\t127.0.0.53\tdc2\tr1\t9042\t7000\t7453\t25244\t/x/b-n3\n";

    #[test]
    fn reads_the_node_table() {
        let nodes = parse_info(INFO).unwrap();
        assert_eq!(nodes.len(), 3);
        assert_eq!(nodes[2].number, 3);
        assert_eq!(nodes[2].addr, "127.0.0.53:9042".parse().unwrap());
        assert_eq!(nodes[2].datacenter, "dc2");
        assert_eq!(nodes[1].rack, "r2");
        assert_eq!(nodes[0].pid, 22470);
    }

    #[test]
    fn a_stopped_node_is_an_error() {
        let info = INFO.replace("\t23756\t", "\t-\t");
        let err = parse_info(&info).unwrap_err();
        assert!(
            format!("{err:#}").contains("node 2 is not running"),
            "{err:#}"
        );
        assert!(parse_info("cluster_name\tx\n").is_err());
    }
}
