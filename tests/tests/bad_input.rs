//! Malformed input over a raw socket gets a protocol ERROR (where the protocol allows one) and
//! that connection closed, while another connection through the same proxy keeps working.
//! Also: an upstream that refuses or drops connections closes the client's promptly.

use autoprep_protocol::envelope::{Direction, EnvelopeDecoder, Opcode, ProtocolVersion};
use autoprep_protocol::message::error::{code, ErrorView};
use autoprep_protocol::primitives::write_string_map;
use autoprep_tests::{proxy, proxy_with, upstream, Client};
use bytes::BytesMut;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn raw(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn header(version: u8, stream: i16, opcode: u8, len: i32) -> Vec<u8> {
    let mut v = vec![version, 0];
    v.extend_from_slice(&stream.to_be_bytes());
    v.push(opcode);
    v.extend_from_slice(&len.to_be_bytes());
    v
}

/// Reads until the peer closes; returns everything read. Fails if the peer keeps it open.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .expect("the proxy must close the connection");
    out
}

/// Parses one v3+ response envelope holding a protocol error; returns (version byte, stream, message).
fn protocol_error(bytes: &[u8]) -> (u8, i16, String) {
    let d = EnvelopeDecoder::new(Direction::Response, 1 << 20);
    let mut buf = BytesMut::from(bytes);
    let e = d.decode(&mut buf).unwrap().expect("a whole ERROR envelope");
    assert_eq!(e.header().opcode, Opcode::ERROR);
    let err = ErrorView::parse(e.body(), e.header().version).unwrap();
    assert_eq!(err.code, code::PROTOCOL_ERROR, "{}", err.message);
    (bytes[0], e.header().stream.0, err.message.to_owned())
}

fn still_works(c: &mut Client) {
    c.query("SELECT key FROM system.local")
        .unwrap()
        .rows()
        .unwrap();
}

#[test]
fn malformed_input_is_answered_and_closed_while_others_carry_on() {
    let proxy_addr = proxy(&upstream());
    let mut healthy = Client::connect(&proxy_addr).unwrap();
    still_works(&mut healthy);

    // Length above the maximum: refused from the header alone, no body is waited for.
    let mut s = raw(&proxy_addr);
    s.write_all(&header(4, 3, 0x05, 0x7fff_ffff)).unwrap();
    let (v, stream, msg) = protocol_error(&read_to_close(&mut s));
    assert_eq!((v, stream), (0x84, 3));
    assert!(msg.contains("too big"), "{msg}");
    still_works(&mut healthy);

    // Negative length.
    let mut s = raw(&proxy_addr);
    s.write_all(&header(4, 3, 0x05, -1)).unwrap();
    protocol_error(&read_to_close(&mut s));

    // Unknown version byte (garbage), answered as Cassandra does with its highest version.
    let mut s = raw(&proxy_addr);
    s.write_all(&header(0x45, 0, 0x05, 0)).unwrap();
    let (v, _, msg) = protocol_error(&read_to_close(&mut s));
    assert_eq!(v, 0x85);
    assert!(msg.contains("unsupported protocol version (69)"), "{msg}");

    // Plain garbage: an HTTP request.
    let mut s = raw(&proxy_addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let (_, _, msg) = protocol_error(&read_to_close(&mut s));
    assert!(msg.contains("unsupported protocol version"), "{msg}");
    still_works(&mut healthy);

    // A v2 client gets a v2-shaped answer (8-byte header), as Cassandra gives it.
    let mut s = raw(&proxy_addr);
    s.write_all(&[0x02, 0, 1, 0x05, 0, 0, 0, 0]).unwrap();
    let got = read_to_close(&mut s);
    assert_eq!(&got[..4], &[0x82, 0x00, 0x00, 0x00]);
    let len = u32::from_be_bytes([got[4], got[5], got[6], got[7]]) as usize;
    assert_eq!(got.len(), 8 + len);

    // The response direction bit on a request.
    let mut s = raw(&proxy_addr);
    s.write_all(&header(0x84, 7, 0x05, 0)).unwrap();
    let (_, stream, msg) = protocol_error(&read_to_close(&mut s));
    assert_eq!(stream, 7);
    assert!(msg.contains("direction"), "{msg}");

    // Truncated body: the client half-closes in the middle of a frame and still gets told.
    let mut s = raw(&proxy_addr);
    let mut partial = header(4, 9, 0x07, 100);
    partial.extend_from_slice(b"only ten b");
    s.write_all(&partial).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let (_, stream, msg) = protocol_error(&read_to_close(&mut s));
    assert_eq!(stream, 9);
    assert!(msg.contains("truncated"), "{msg}");
    still_works(&mut healthy);
}

#[test]
fn v5_crc_mismatch_is_answered_framed_and_closed() {
    let proxy_addr = proxy(&upstream());
    let mut healthy = Client::connect_with(&proxy_addr, ProtocolVersion::V5, None).unwrap();
    for payload_crc in [false, true] {
        let mut c = Client::connect_with(&proxy_addr, ProtocolVersion::V5, None).unwrap();
        // A valid segment holding an OPTIONS, then one bit flipped.
        let mut seg = BytesMut::new();
        let mut enc = autoprep_protocol::segment::SegmentEncoder::new(false);
        enc.push(&header(5, 1, 0x05, 0), &mut seg);
        enc.finish(&mut seg);
        let at = if payload_crc { 8 } else { 1 };
        seg[at] ^= 0x01;
        c.send_raw(&seg).unwrap();
        let e = c.read_envelope().expect("a framed ERROR before the close");
        assert_eq!(e.header().opcode, Opcode::ERROR);
        let err = ErrorView::parse(e.body(), ProtocolVersion::V5).unwrap();
        assert_eq!(err.code, code::PROTOCOL_ERROR);
        assert!(err.message.contains("CRC"), "{}", err.message);
        assert!(c.read_envelope().is_err(), "connection must be closed");
    }
    still_works(&mut healthy);
}

#[test]
fn unknown_opcode_gets_the_servers_answer_and_the_connection_stays_usable() {
    let direct = upstream();
    let proxy_addr = proxy(&direct);
    let mut a = Client::connect(&direct).unwrap();
    let mut b = Client::connect(&proxy_addr).unwrap();
    let ra = a.request(Opcode(0x42), &[]).unwrap();
    let rb = b.request(Opcode(0x42), &[]).unwrap();
    assert_eq!(ra.header().opcode, rb.header().opcode);
    assert_eq!(ra.header().stream, rb.header().stream);
    assert_eq!(ra.body(), rb.body());
    // Directly, Cassandra keeps answering "Unknown opcode" on that connection from now on;
    // through the proxy the connection stays usable.
    still_works(&mut b);
}

#[test]
fn refused_upstream_closes_the_client_promptly() {
    // A port nobody listens on: bind, read the port, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let proxy_addr = proxy(&format!("127.0.0.1:{port}")).to_string();
    let started = Instant::now();
    let mut s = raw(&proxy_addr);
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
    assert!(started.elapsed() < Duration::from_secs(5));
    // The proxy itself keeps serving.
    let mut s = raw(&proxy_addr);
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
}

#[test]
fn dropped_upstream_closes_the_client_and_the_proxy_carries_on() {
    // An upstream that accepts, reads one request and hangs up.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let up = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in listener.incoming().take(2) {
            let mut s = s.unwrap();
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
            drop(s);
        }
    });
    let mut cfg = autoprep::config::Config::for_upstream(&up);
    cfg.connect_timeout_ms = 2000;
    let proxy_addr = proxy_with(cfg).to_string();
    for _ in 0..2 {
        let mut s = raw(&proxy_addr);
        let mut body = Vec::new();
        write_string_map(&mut body, &[("CQL_VERSION", "3.0.0")]).unwrap();
        let mut frame = header(4, 1, 0x01, body.len() as i32);
        frame.extend_from_slice(&body);
        s.write_all(&frame).unwrap();
        let started = Instant::now();
        assert!(read_to_close(&mut s).is_empty());
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
