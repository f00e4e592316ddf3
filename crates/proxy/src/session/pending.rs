//! What an upstream stream id of a connection is pending for: the client request it forwards
//! (as sent, rewritten, or behind the proxy's own requests) or one of the proxy's own requests,
//! and what its answer needs.

use crate::rewrite;
use crate::topology;
use autoprep_protocol::envelope::Header;
use autoprep_protocol::message::RequestBody;

/// What an upstream stream id is in use for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// A client request forwarded as it was; `stream` is the client's own stream id.
    /// `use_keyspace` marks a `USE` whose Set_keyspace result the session tracks.
    Client { stream: i16, use_keyspace: bool },
    /// A client request forwarded as it was that may repeat (see
    /// [`autoprep_protocol::cql::idempotent::may_repeat`]), whose bytes the proxy had copied
    /// already to route it: kept, so that it goes again to a new home if the home fails with
    /// it in flight.
    Again { stream: i16, original: bytes::Bytes },
    /// A client QUERY the proxy sent as EXECUTE, or a BATCH it sent with prepared children.
    /// The original envelope is kept so that an UNPREPARED answer (the statement did not run)
    /// can be replayed as the request it was.
    Rewritten(RewrittenAnswer),
    /// A PREPARE of the proxy's own of a client's statement with literals inline (see
    /// [`crate::rewrite::literal_prepare`]), so that the server knows the id the proxy gave out; then
    /// the next of `rest`, then the client's request `original` as it was.
    Materialize {
        stream: i16,
        rest: Vec<std::sync::Arc<crate::rewrite::literal_prepare::Statement>>,
        original: bytes::Bytes,
        /// See `Pending::Prepare::exposed`.
        exposed: bool,
    },
    /// A client request reading the cluster topology (`system.local`, `system.peers[_v2]`),
    /// forwarded as it was; its answer is rewritten (see [`crate::topology`]).
    Topology {
        stream: i16,
        read: crate::topology::Read,
    },
    /// A client statement that may change the schema (`CREATE`, `ALTER`, `DROP`): a
    /// Schema_change answer is held until the schema agrees (see
    /// [`crate::schema_agreement`]).
    SchemaChange { stream: i16 },
    /// The proxy's own check of schema agreement, holding a client's answer.
    SchemaCheck(Box<crate::schema_agreement::Check>),
    /// The proxy's own PREPARE of a shape; its answer never reaches the client.
    Prepare {
        hash: autoprep_cache::ShapeHash,
        fingerprint: [u8; 16],
        text: String,
        keyspace: Option<String>,
        /// The epochs when it was sent (see [`crate::prepare_proof`]).
        epochs: Epochs,
        /// The server resolves its keyspace from the connection's (see
        /// `hold_use`): a client `USE` waits for its answer.
        exposed: bool,
        /// The client's PREPARE (of a statement with literals inline) this PREPARE of the
        /// shape stands in for: answered from the shape once it is prepared, or sent as it
        /// was (see [`crate::rewrite::literal_prepare`]).
        client: Option<Box<crate::rewrite::literal_prepare::ClientPrepare>>,
    },
    /// A read of the proxy's own for the cluster view (see [`crate::cluster`]).
    ClusterRead(crate::cluster::Part),
    /// A client's own PREPARE. Routing remembers its answer when `route` holds its text and
    /// keyspace; the answer loses Cassandra's once-per-connection warning about `USE` with
    /// prepared statements when the client was given it already (by the proxy: see
    /// [`crate::rewrite::literal_prepare`]), unless the PREPARE names its keyspace (v5: the server warns
    /// for each such PREPARE). `original` is the envelope as the client sent it: a PREPARE
    /// changes nothing but the node's cache, so one in flight on a home that fails goes again
    /// to the new home (PREPAREs are few: the copy costs nothing that counts).
    ClientPrepare {
        stream: i16,
        route: Option<(String, Option<String>)>,
        names_keyspace: bool,
        original: bytes::Bytes,
    },
}

/// A rewritten request that references statements the client prepared with literals inline
/// (see [`crate::rewrite::literal_prepare`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiteralRequest {
    /// The client sent an EXECUTE: a v5 answer keeps its metadata-changed flag, which compares
    /// with the result metadata id the client sent.
    pub execute: bool,
    /// On UNPREPARED these are prepared on the server before the request is sent as it was.
    pub statements: Vec<std::sync::Arc<crate::rewrite::literal_prepare::Statement>>,
}

impl Pending {
    /// A plain forwarded client request.
    pub fn client(stream: i16) -> Pending {
        Pending::Client {
            stream,
            use_keyspace: false,
        }
    }

    /// A client's `USE`, whose answer sets the connection's keyspace.
    pub fn is_use(&self) -> bool {
        matches!(
            self,
            Pending::Client {
                use_keyspace: true,
                ..
            }
        )
    }

    /// A PREPARE of the proxy's whose keyspace the server takes from the connection: a `USE`
    /// waits for its answer (see `Conn::hold_use`).
    pub fn is_exposed_prepare(&self) -> bool {
        matches!(
            self,
            Pending::Prepare { exposed: true, .. } | Pending::Materialize { exposed: true, .. }
        )
    }

    /// The client's stream id of a plain forwarded request (its answer goes back as it is).
    pub fn plain_client(&self) -> Option<i16> {
        match self {
            Pending::Client {
                stream,
                use_keyspace: false,
            }
            | Pending::Again { stream, .. } => Some(*stream),
            _ => None,
        }
    }
}

/// What the answer to a rewritten request needs (see `Pending::Rewritten`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewrittenAnswer {
    /// The client's stream id.
    pub stream: i16,
    /// What the client sent.
    pub original: bytes::Bytes,
    pub used: crate::rewrite::Used,
    /// Set when the QUERY read the topology: its answer is rewritten too.
    pub topology: Option<crate::topology::Read>,
    /// Set when the request references statements prepared with literals inline (boxed:
    /// rare, and a pending entry stays small).
    pub literals: Option<Box<LiteralRequest>>,
}

/// The cache's and the connection's epochs when a PREPARE of the proxy's was sent: its answer is
/// used only if neither moved (see [`crate::prepare_proof`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epochs {
    pub(super) keyspace: u64,
    pub(super) schema: u64,
}

/// The pending entry of a request that goes upstream as the client sent it.
pub(super) fn as_sent(
    stream: i16,
    use_keyspace: bool,
    topology: Option<topology::Read>,
    schema_change: bool,
) -> Pending {
    match topology {
        Some(read) => Pending::Topology { stream, read },
        None if schema_change => Pending::SchemaChange { stream },
        None => Pending::Client {
            stream,
            use_keyspace,
        },
    }
}

/// The pending entry of a client's PREPARE of a statement whose answer routing should
/// remember (`None`: an ordinary client request; a v4 PREPARE while a USE is in flight,
/// whose keyspace is not known).
pub(super) fn client_prepare(
    stream: i16,
    header: &Header,
    body: Option<&[u8]>,
    ks: rewrite::ConnKeyspace<'_>,
    original: &[u8],
) -> Option<Pending> {
    let rb = RequestBody::parse(header, body?).ok()?;
    let p =
        autoprep_protocol::message::prepare::PrepareView::parse(rb.message, header.version).ok()?;
    let keyspace = match p.keyspace {
        Some(k) => Some(k.to_owned()),
        None if ks.settled => ks.name.map(str::to_owned),
        None => return None,
    };
    Some(Pending::ClientPrepare {
        stream,
        route: Some((std::str::from_utf8(p.query).ok()?.to_owned(), keyspace)),
        names_keyspace: p.keyspace.is_some(),
        original: bytes::Bytes::copy_from_slice(original),
    })
}
