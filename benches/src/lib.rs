//! Benchmarks of autoprep.
