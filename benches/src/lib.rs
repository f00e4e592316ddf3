//! Benchmarks of autoprep: criterion micro-benchmarks under `benches/`, the closed-loop load
//! generator ([`load`]) used by the `e2e` and `savings` binaries, the legacy time-series
//! workload ([`legacy`]), /proc CPU accounting ([`procfs`]), CPU pinning ([`affinity`]), the
//! savings chart ([`chart`]), the inputs the micro-benchmarks share ([`fixtures`]), the
//! byte-splice forwarder the proxy is measured against ([`splice`]), the local cluster of
//! `scripts/cluster.sh` ([`cluster`]), the benchmark's own token-aware client
//! ([`token_aware`]), server CPU read from the nodes' metrics endpoints ([`remote_cpu`]) and the
//! check that the benchmark's keyspace is its own before it writes ([`bench_keyspace`]), the
//! check of autoprep's estimate of server CPU saved against the measured saving ([`estimate_check`]),
//! and a stand-in node that answers at once, for counting the proxy's own instructions
//! ([`standin`]).

pub mod affinity;
pub mod bench_keyspace;
pub mod chart;
pub mod cluster;
pub mod estimate_check;
pub mod fixtures;
pub mod legacy;
pub mod load;
pub mod procfs;
pub mod remote_cpu;
pub mod splice;
pub mod standin;
pub mod token_aware;
