//! Benchmarks of autoprep: criterion micro-benchmarks under `benches/`, the closed-loop load
//! generator ([`load`]) used by the `e2e` and `savings` binaries, the legacy time-series
//! workload ([`legacy`]), /proc CPU accounting ([`procfs`]), CPU pinning ([`affinity`]), the
//! savings chart ([`chart`]), the inputs the micro-benchmarks share ([`fixtures`]), the
//! byte-splice forwarder the proxy is measured against ([`splice`]), the local cluster of
//! `scripts/cluster.sh` ([`cluster`]) and the benchmark's own token-aware client
//! ([`token_aware`]).

pub mod affinity;
pub mod chart;
pub mod cluster;
pub mod fixtures;
pub mod legacy;
pub mod load;
pub mod procfs;
pub mod splice;
pub mod token_aware;
