//! The connection limit against the real server: a client beyond `max_client_connections`
//! gets an Overloaded ERROR naming autoprep and the limit in answer to its first request (in
//! its own protocol version, on its own stream), its connection is closed, the refusal is
//! counted, and a connection is admitted again once one closes.

use autoprep::config::Config;
use autoprep_protocol::envelope::{Opcode, ProtocolVersion};
use autoprep_protocol::message::error::code;
use autoprep_protocol::primitives::write_string_map;
use autoprep_tests::{proxy_ctx, upstream, Client, Response};
use std::time::{Duration, Instant};

fn startup_body() -> Vec<u8> {
    let mut body = Vec::new();
    write_string_map(&mut body, &[("CQL_VERSION", "3.0.0")]).unwrap();
    body
}

/// Connects without STARTUP and sends `opcode` first: the refusal it gets.
fn refused(addr: &str, version: ProtocolVersion, opcode: Opcode) -> (i16, Response) {
    let mut c = Client::connect_raw(addr, version).unwrap();
    let body = if opcode == Opcode::STARTUP {
        startup_body()
    } else {
        Vec::new()
    };
    let env = c.request(opcode, &body).unwrap();
    assert_eq!(env.header().version, version);
    let answer = (env.header().stream.0, c.decode(&env).unwrap());
    // Then the proxy closes the connection.
    let err = c.read_envelope().unwrap_err().to_string();
    assert!(err.contains("closed by peer"), "{err}");
    answer
}

#[test]
fn clients_beyond_the_limit_get_an_overloaded_error() {
    let mut cfg = Config::for_upstream(&upstream());
    cfg.max_client_connections = 2;
    let (addr, ctx) = proxy_ctx(cfg);
    let addr = addr.to_string();
    let mut first = Client::connect(&addr).unwrap();
    let mut second = Client::connect_with(&addr, ProtocolVersion::V5, None).unwrap();

    for (version, opcode) in [
        (ProtocolVersion::V4, Opcode::STARTUP),
        (ProtocolVersion::V5, Opcode::OPTIONS),
        (ProtocolVersion::V3, Opcode::STARTUP),
    ] {
        let (stream, answer) = refused(&addr, version, opcode);
        assert_eq!(stream, 1, "answered on the request's stream");
        let Response::Error { code: c, message } = answer else {
            panic!("{version:?} {opcode:?}: expected an ERROR, got {answer:?}");
        };
        assert_eq!(c, code::OVERLOADED);
        assert!(message.starts_with("autoprep: "), "{message}");
        assert!(message.contains("2 client connections"), "{message}");
        assert!(message.contains("max_client_connections"), "{message}");
    }
    assert_eq!(
        ctx.metrics
            .connections_refused
            .load(std::sync::atomic::Ordering::Relaxed),
        3
    );
    let metrics = autoprep::admin::metrics_text(&ctx);
    assert!(
        metrics.contains("\nautoprep_connections_refused_total 3\n"),
        "{metrics}"
    );

    // The admitted connections were never disturbed.
    first
        .query("SELECT release_version FROM system.local")
        .unwrap()
        .rows()
        .unwrap();
    second
        .query("SELECT release_version FROM system.local")
        .unwrap()
        .rows()
        .unwrap();

    // One leaves: a new client is admitted.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(60);
    while ctx.lifecycle.open() > 1 {
        assert!(
            Instant::now() < deadline,
            "the closed connection was never released"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut third = Client::connect(&addr).unwrap();
    third
        .query("SELECT release_version FROM system.local")
        .unwrap()
        .rows()
        .unwrap();
}
