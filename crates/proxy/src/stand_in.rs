//! A stand-in node for the unit tests that open a connection to one (a replica connection, a
//! new home): it accepts one connection, reports each request's opcode and body, and answers
//! each request with what the test makes of its header. The tests that need a real server use
//! one (tests/, tests/python/).

use autoprep_protocol::envelope::{
    Direction, Envelope, Flags, Header, Opcode, ProtocolVersion, StreamId,
};
use bytes::BytesMut;
use std::net::SocketAddr;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc::Receiver;

use crate::wire::FrameReader;

/// The largest frame the stand-in reads.
pub const MAX: usize = 1 << 20;

/// An answer frame of `opcode` with `body` on `stream`.
pub fn answer(version: ProtocolVersion, stream: i16, opcode: Opcode, body: &[u8]) -> BytesMut {
    let header = Header {
        version,
        direction: Direction::Response,
        flags: Flags(0),
        stream: StreamId(stream),
        opcode,
        length: 0,
    };
    Envelope::new(header, body).into_frame()
}

/// Starts a stand-in node answering each request with `reply(its header)`; its address, and
/// the requests' opcodes and bodies as it reads them.
pub async fn spawn(
    reply: impl Fn(&Header) -> BytesMut + Send + 'static,
) -> (SocketAddr, Receiver<(Opcode, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut frames = FrameReader::new(Direction::Request, MAX);
        loop {
            let env = loop {
                if let Some(env) = frames.decode().unwrap() {
                    break env;
                }
                if frames.read_from(&mut sock).await.unwrap_or(0) == 0 {
                    return;
                }
            };
            let h = *env.header();
            let _ = tx.send((h.opcode, env.body().to_vec())).await;
            sock.write_all(&reply(&h)).await.unwrap();
        }
    });
    (addr, rx)
}
