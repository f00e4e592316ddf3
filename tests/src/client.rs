//! A minimal blocking CQL client for tests: one request at a time, protocol v4 or v5, with
//! optional compression, TLS (rustls) and SASL PLAIN login. It is built on the protocol crate,
//! so it exercises it too.

use anyhow::{anyhow, bail, Context, Result};
use autoprep_protocol::compression::{self, Compression};
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, Flags, Header, Opcode, ProtocolVersion, StreamId,
};
use autoprep_protocol::message::error::ErrorView;
use autoprep_protocol::message::execute::encode_execute;
use autoprep_protocol::message::prepare::encode_prepare;
use autoprep_protocol::message::query::{encode_query, QueryParams, Values};
use autoprep_protocol::message::result::{ColumnSpecs, ResultView};
use autoprep_protocol::message::ResponseBody;
use autoprep_protocol::primitives::{write_string_map, write_value, Value};
use autoprep_protocol::segment::{FramedDecoder, SegmentDecoder, SegmentEncoder};
use autoprep_protocol::types::ColumnType;
use bytes::BytesMut;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConnection, RootCertStore, StreamOwned};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Consistency ONE.
pub const ONE: u16 = 0x0001;

/// A decoded response.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    Void,
    Rows(Rows),
    SetKeyspace(String),
    Prepared(Prepared),
    SchemaChange,
    /// READY, SUPPORTED, AUTHENTICATE ... (opcode and raw body).
    Other(u8, Vec<u8>),
    Error {
        code: i32,
        message: String,
    },
}

/// A Rows result with cells as raw bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    pub columns: Vec<(String, ColumnType)>,
    pub rows: Vec<Vec<Option<Vec<u8>>>>,
    pub paging_state: Option<Vec<u8>>,
}

/// A Prepared result.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub id: Vec<u8>,
    pub result_metadata_id: Option<Vec<u8>>,
    /// Bind variables: name and type.
    pub bind: Vec<(String, ColumnType)>,
    pub pk_indexes: Vec<u16>,
    /// Result columns.
    pub columns: Vec<(String, ColumnType)>,
}

impl Response {
    /// The rows, or an error describing what came instead.
    pub fn rows(self) -> Result<Rows> {
        match self {
            Response::Rows(r) => Ok(r),
            other => bail!("expected rows, got {other:?}"),
        }
    }

    /// The prepared result, or an error.
    pub fn prepared(self) -> Result<Prepared> {
        match self {
            Response::Prepared(p) => Ok(p),
            other => bail!("expected prepared, got {other:?}"),
        }
    }

    /// Fails on a server error.
    pub fn ok(self) -> Result<Response> {
        match self {
            Response::Error { code, message } => bail!("server error 0x{code:04x}: {message}"),
            other => Ok(other),
        }
    }
}

fn specs(c: Option<ColumnSpecs<'_>>) -> Result<Vec<(String, ColumnType)>> {
    let mut out = Vec::new();
    if let Some(c) = c {
        for s in c.iter() {
            out.push((s.name.to_owned(), s.column_type()?));
        }
    }
    Ok(out)
}

/// How a test client speaks TLS: the CA it trusts, its own certificate if any, and the name
/// the server's certificate must be valid for.
#[derive(Clone, Debug)]
pub struct TlsClient {
    config: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
}

impl TlsClient {
    /// Trusts the PEM CA certificates `ca_pem`; presents `identity` (PEM certificate chain,
    /// PEM private key) when the server asks for a client certificate.
    pub fn new(ca_pem: &str, identity: Option<(&str, &str)>, server_name: &str) -> Result<Self> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert?)?;
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
        let config = match identity {
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()?;
                builder
                    .with_client_auth_cert(chain, PrivateKeyDer::from_pem_slice(key.as_bytes())?)?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(TlsClient {
            config: Arc::new(config),
            server_name: ServerName::try_from(server_name.to_owned())?,
        })
    }
}

/// The client's socket.
enum Sock {
    Tcp(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Sock {
    fn tcp(&self) -> &TcpStream {
        match self {
            Sock::Tcp(s) => s,
            Sock::Tls(s) => s.get_ref(),
        }
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(buf),
            Sock::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.write(buf),
            Sock::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sock::Tcp(s) => s.flush(),
            Sock::Tls(s) => s.flush(),
        }
    }
}

/// A blocking connection.
pub struct Client {
    sock: Sock,
    version: ProtocolVersion,
    compression: Option<Compression>,
    framed: Option<(SegmentEncoder, FramedDecoder)>,
    buf: BytesMut,
    next_stream: i16,
}

impl Client {
    /// Connects with protocol v4, no compression, and sends STARTUP.
    pub fn connect(addr: &str) -> Result<Client> {
        Self::connect_with(addr, ProtocolVersion::V4, None)
    }

    /// Connects with the given version and compression, and sends STARTUP.
    pub fn connect_with(
        addr: &str,
        version: ProtocolVersion,
        compression: Option<Compression>,
    ) -> Result<Client> {
        let mut c = Self::connect_raw(addr, version)?;
        let resp = c.startup(compression, &[])?;
        if resp.header().opcode != Opcode::READY {
            bail!("STARTUP answered with opcode {:?}", resp.header().opcode);
        }
        Ok(c)
    }

    /// Connects (over TLS when `tls` is set), sends STARTUP with protocol v4 and logs in with
    /// SASL PLAIN as `user` / `password`. Fails unless the server answers AUTH_SUCCESS.
    pub fn connect_login(
        addr: &str,
        tls: Option<&TlsClient>,
        user: &str,
        password: &str,
    ) -> Result<Client> {
        let mut c = match tls {
            Some(t) => Self::connect_raw_tls(addr, ProtocolVersion::V4, t)?,
            None => Self::connect_raw(addr, ProtocolVersion::V4)?,
        };
        let resp = c.startup(None, &[])?;
        if resp.header().opcode != Opcode::AUTHENTICATE {
            bail!(
                "STARTUP answered with opcode {:?}, not AUTHENTICATE",
                resp.header().opcode
            );
        }
        match c.login(user, password)? {
            Response::Other(op, _) if op == Opcode::AUTH_SUCCESS.0 => Ok(c),
            other => bail!("login answered with {other:?}"),
        }
    }

    /// Sends STARTUP (CQL_VERSION, the compression, and `extra` options such as DRIVER_NAME)
    /// and returns the server's answer (READY or AUTHENTICATE). v5 framing starts after it.
    pub fn startup(
        &mut self,
        compression: Option<Compression>,
        extra: &[(&str, &str)],
    ) -> Result<Envelope> {
        let version = self.version;
        let mut opts = vec![("CQL_VERSION", "3.0.0")];
        match compression {
            Some(Compression::Lz4) => opts.push(("COMPRESSION", "lz4")),
            Some(Compression::Snappy) => opts.push(("COMPRESSION", "snappy")),
            None => {}
        }
        opts.extend_from_slice(extra);
        let mut body = Vec::new();
        write_string_map(&mut body, &opts)?;
        // With v4 compression the server already compresses its READY.
        self.compression = compression;
        let resp = self.request(Opcode::STARTUP, &body)?;
        if version >= ProtocolVersion::V5 {
            self.framed = Some((
                SegmentEncoder::new(compression.is_some()),
                FramedDecoder::new(
                    SegmentDecoder::new(compression.is_some()),
                    EnvelopeDecoder::new(Direction::Response, 256 << 20),
                ),
            ));
        }
        Ok(resp)
    }

    /// Answers AUTHENTICATE with a SASL PLAIN token for `user` / `password`; returns the
    /// server's answer (AUTH_SUCCESS as `Response::Other`, or the error).
    pub fn login(&mut self, user: &str, password: &str) -> Result<Response> {
        let mut token = vec![0u8];
        token.extend_from_slice(user.as_bytes());
        token.push(0);
        token.extend_from_slice(password.as_bytes());
        let mut body = Vec::new();
        write_value(&mut body, Value::Bytes(&token))?;
        let e = self.request(Opcode::AUTH_RESPONSE, &body)?;
        self.decode(&e)
    }

    /// Connects without sending anything.
    pub fn connect_raw(addr: &str, version: ProtocolVersion) -> Result<Client> {
        let sock = TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
        sock.set_read_timeout(Some(Duration::from_secs(30)))?;
        sock.set_nodelay(true)?;
        Ok(Self::over(Sock::Tcp(sock), version))
    }

    /// Connects and completes a TLS handshake, without sending any CQL. With TLS 1.3 a server
    /// that refuses the client's certificate says so only at the first read.
    pub fn connect_raw_tls(
        addr: &str,
        version: ProtocolVersion,
        tls: &TlsClient,
    ) -> Result<Client> {
        let mut sock = TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
        sock.set_read_timeout(Some(Duration::from_secs(30)))?;
        sock.set_nodelay(true)?;
        let mut conn = ClientConnection::new(tls.config.clone(), tls.server_name.clone())?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)
                .with_context(|| format!("TLS handshake with {addr}"))?;
        }
        Ok(Self::over(
            Sock::Tls(Box::new(StreamOwned::new(conn, sock))),
            version,
        ))
    }

    fn over(sock: Sock, version: ProtocolVersion) -> Client {
        Client {
            sock,
            version,
            compression: None,
            framed: None,
            buf: BytesMut::with_capacity(64 * 1024),
            next_stream: 0,
        }
    }

    /// The local address of the connection (the proxy logs it as the peer).
    pub fn local_addr(&self) -> Result<std::net::SocketAddr> {
        Ok(self.sock.tcp().local_addr()?)
    }

    /// The protocol version in use.
    pub fn version(&self) -> ProtocolVersion {
        self.version
    }

    /// Sends one request and waits for its response (events on stream -1 are skipped).
    /// The returned envelope's body is decompressed.
    pub fn request(&mut self, opcode: Opcode, body: &[u8]) -> Result<Envelope> {
        self.next_stream = (self.next_stream + 1) % 32000;
        let stream = StreamId(self.next_stream);
        let v4_compress =
            self.framed.is_none() && opcode != Opcode::STARTUP && opcode != Opcode::OPTIONS;
        let (flags, body) = match (self.compression, v4_compress) {
            (Some(alg), true) => {
                let mut out = Vec::new();
                compression::compress(alg, body, &mut out);
                (Flags(Flags::COMPRESSION), out)
            }
            _ => (Flags(0), body.to_vec()),
        };
        let env = Envelope::new(
            Header {
                version: self.version,
                direction: Direction::Request,
                flags,
                stream,
                opcode,
                length: 0,
            },
            &body,
        );
        let mut out = BytesMut::new();
        match &mut self.framed {
            Some((enc, _)) => {
                enc.push(env.as_bytes(), &mut out);
                enc.finish(&mut out);
            }
            None => out.extend_from_slice(env.as_bytes()),
        }
        self.sock.write_all(&out)?;
        self.sock.flush()?;
        loop {
            let e = self.read_envelope()?;
            if e.header().stream == stream {
                return Ok(e);
            }
        }
    }

    /// Reads the next envelope from the server, decompressing a v4 body.
    pub fn read_envelope(&mut self) -> Result<Envelope> {
        let dec = EnvelopeDecoder::new(Direction::Response, 256 << 20);
        loop {
            let got = match &mut self.framed {
                Some((_, fd)) => fd.decode(&mut self.buf).map_err(|e| anyhow!("{e}"))?,
                None => dec.decode(&mut self.buf)?,
            };
            if let Some(e) = got {
                if e.header().flags.has(Flags::COMPRESSION) && self.framed.is_none() {
                    let alg = self
                        .compression
                        .ok_or_else(|| anyhow!("unexpected compression"))?;
                    let body = compression::decompress(alg, e.body(), 256 << 20)?;
                    let mut h = *e.header();
                    h.flags = Flags(h.flags.0 & !Flags::COMPRESSION);
                    return Ok(Envelope::new(h, &body));
                }
                return Ok(e);
            }
            let mut chunk = [0u8; 65536];
            let n = self.sock.read(&mut chunk)?;
            if n == 0 {
                bail!("connection closed by peer");
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Decodes a response envelope.
    pub fn decode(&self, e: &Envelope) -> Result<Response> {
        let body = ResponseBody::parse(e.header(), e.body())?;
        let v = self.version;
        Ok(match e.header().opcode {
            Opcode::ERROR => {
                let err = ErrorView::parse(body.message, v)?;
                Response::Error {
                    code: err.code,
                    message: err.message.to_owned(),
                }
            }
            Opcode::RESULT => match ResultView::parse(body.message, v)? {
                ResultView::Void => Response::Void,
                ResultView::SetKeyspace(k) => Response::SetKeyspace(k.to_owned()),
                ResultView::SchemaChange(_) => Response::SchemaChange,
                ResultView::Rows(r) => {
                    let mut rows = Vec::new();
                    for row in r.rows() {
                        rows.push(row?.into_iter().map(|c| c.map(<[u8]>::to_vec)).collect());
                    }
                    Response::Rows(Rows {
                        columns: specs(r.metadata.columns)?,
                        rows,
                        paging_state: r.metadata.paging_state.map(<[u8]>::to_vec),
                    })
                }
                ResultView::Prepared(p) => Response::Prepared(Prepared {
                    id: p.id.to_vec(),
                    result_metadata_id: p.result_metadata_id.map(<[u8]>::to_vec),
                    bind: specs(Some(p.bind.columns))?,
                    pk_indexes: p.bind.pk_indexes().collect(),
                    columns: specs(p.result.columns)?,
                }),
            },
            other => Response::Other(other.0, body.message.to_vec()),
        })
    }

    /// Runs a QUERY with consistency ONE and no values.
    pub fn query(&mut self, cql: &str) -> Result<Response> {
        self.query_with(cql, &[], None)
    }

    /// Runs a QUERY with positional values and an optional page size.
    pub fn query_with(
        &mut self,
        cql: &str,
        values: &[Option<&[u8]>],
        page_size: Option<i32>,
    ) -> Result<Response> {
        let raw = encode_values(values)?;
        let params = QueryParams {
            consistency: ONE,
            values: (!values.is_empty()).then_some(Values {
                count: u16::try_from(values.len())?,
                named: false,
                raw: &raw,
            }),
            page_size,
            ..Default::default()
        };
        let mut body = Vec::new();
        encode_query(self.version, cql.as_bytes(), &params, &mut body)?;
        let e = self.request(Opcode::QUERY, &body)?;
        self.decode(&e)
    }

    /// Prepares a statement.
    pub fn prepare(&mut self, cql: &str) -> Result<Response> {
        let mut body = Vec::new();
        encode_prepare(self.version, cql.as_bytes(), None, &mut body)?;
        let e = self.request(Opcode::PREPARE, &body)?;
        self.decode(&e)
    }

    /// Executes a prepared statement with positional values.
    pub fn execute(&mut self, p: &Prepared, values: &[Option<&[u8]>]) -> Result<Response> {
        self.execute_raw(p, &encode_values(values)?, values.len())
    }

    /// Executes a prepared statement with values already encoded as a sequence of `[value]`s.
    pub fn execute_raw(
        &mut self,
        p: &Prepared,
        raw_values: &[u8],
        count: usize,
    ) -> Result<Response> {
        let params = QueryParams {
            consistency: ONE,
            values: (count > 0).then_some(Values {
                count: u16::try_from(count)?,
                named: false,
                raw: raw_values,
            }),
            ..Default::default()
        };
        let mut body = Vec::new();
        let rmid = p.result_metadata_id.as_deref().unwrap_or(&[]);
        encode_execute(self.version, &p.id, rmid, &params, &mut body)?;
        let e = self.request(Opcode::EXECUTE, &body)?;
        self.decode(&e)
    }

    /// Writes raw bytes to the socket (for malformed-input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.sock.write_all(bytes)?;
        self.sock.flush()?;
        Ok(())
    }

    /// Sets the read timeout.
    pub fn set_read_timeout(&self, d: Duration) -> Result<()> {
        self.sock.tcp().set_read_timeout(Some(d))?;
        Ok(())
    }
}

/// Encodes positional values as a sequence of `[value]`s.
pub fn encode_values(values: &[Option<&[u8]>]) -> Result<Vec<u8>> {
    let mut raw = Vec::new();
    for v in values {
        write_value(&mut raw, v.map_or(Value::Null, Value::Bytes))?;
    }
    Ok(raw)
}
