//! autoprep: the proxy.
#![forbid(unsafe_code)]
