//! Benchmarks of autoprep: criterion micro-benchmarks under `benches/`, and the end-to-end
//! load generator ([`load`]) used by the `e2e` binary.

pub mod fixtures;
pub mod load;
