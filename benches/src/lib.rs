//! Benchmarks of autoprep: criterion micro-benchmarks under `benches/`, the closed-loop load
//! generator ([`load`]) used by the `e2e` and `savings` binaries, the legacy time-series
//! workload ([`legacy`]), /proc CPU accounting ([`procfs`]), CPU pinning ([`affinity`]), the
//! savings chart ([`chart`]) and the inputs the micro-benchmarks share ([`fixtures`]).

pub mod affinity;
pub mod chart;
pub mod fixtures;
pub mod legacy;
pub mod load;
pub mod procfs;
