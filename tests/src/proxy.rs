//! autoprep itself, run in-process on a shared runtime for the tests.

use autoprep::config::Config;
use autoprep::context::Context;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("test runtime")
    })
}

/// Starts a proxy in front of `upstream` on an ephemeral port and returns its address.
pub fn proxy(upstream: &str) -> String {
    proxy_with(Config::for_upstream(upstream)).to_string()
}

/// Starts a proxy with a given configuration.
pub fn proxy_with(cfg: Config) -> SocketAddr {
    proxy_ctx(cfg).0
}

/// Starts a proxy and also returns its shared state (cache, metrics) for assertions.
pub fn proxy_ctx(cfg: Config) -> (SocketAddr, Arc<Context>) {
    runtime()
        .block_on(autoprep::server::spawn(cfg))
        .expect("start autoprep")
}
