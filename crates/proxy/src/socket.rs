//! A connection's socket, plain TCP or TLS, and its read and write halves.
//!
//! Each is a [`tokio_util::either::Either`] of the plain and the TLS kind rather than a boxed
//! trait object: the plain-TCP path costs one predictable branch per read or write, and TCP
//! halves stay tokio's lock-free owned halves. A TLS stream is split with [`tokio::io::split`]
//! (its reader and writer share the TLS state).

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;
use tokio_util::either::Either;

/// A connected socket, either side of the proxy. The TLS stream is boxed: it is large and the
/// plain variant should not pay for it.
pub type Socket = Either<TcpStream, Box<TlsStream<TcpStream>>>;

/// The read half of a [`Socket`].
pub type ReadHalf = Either<OwnedReadHalf, tokio::io::ReadHalf<TlsStream<TcpStream>>>;

/// The write half of a [`Socket`].
pub type WriteHalf = Either<OwnedWriteHalf, tokio::io::WriteHalf<TlsStream<TcpStream>>>;

/// A plain TCP socket.
pub fn plain(s: TcpStream) -> Socket {
    Either::Left(s)
}

/// A TLS socket.
pub fn tls(s: TlsStream<TcpStream>) -> Socket {
    Either::Right(Box::new(s))
}

/// The address of the other end.
pub fn peer_addr(s: &Socket) -> Option<std::net::SocketAddr> {
    match s {
        Either::Left(s) => s.peer_addr().ok(),
        Either::Right(s) => s.get_ref().0.peer_addr().ok(),
    }
}

/// Splits a socket into halves that can be used from two tasks.
pub fn into_split(s: Socket) -> (ReadHalf, WriteHalf) {
    match s {
        Either::Left(s) => {
            let (r, w) = s.into_split();
            (Either::Left(r), Either::Left(w))
        }
        Either::Right(s) => {
            let (r, w) = tokio::io::split(*s);
            (Either::Right(r), Either::Right(w))
        }
    }
}
