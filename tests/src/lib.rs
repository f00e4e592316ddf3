//! Test support for autoprep's integration tests: a real Cassandra (started by the project's
//! own script unless `AUTOPREP_TEST_UPSTREAM` names one), autoprep itself run in-process, and a
//! minimal blocking CQL client built on the protocol crate.

pub mod client;
pub mod proxy;
pub mod server;

pub use client::{Client, Response, TlsClient};
pub use proxy::{proxy, proxy_ctx, proxy_with};
pub use server::{repo_root, upstream};
