//! A prepared statement as the server described it.

use autoprep_protocol::types::ColumnType;
use bytes::Bytes;

/// What PREPARE returned for a shape, plus the shape it was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedEntry {
    /// The canonical text that was prepared.
    pub text: String,
    /// The statement is conditional (`IF ...`: see
    /// [`autoprep_protocol::cql::conditional`]), read once from `text`: only then does a
    /// request's serial consistency matter to the server, and to routing.
    pub conditional: bool,
    /// The statement may repeat: it is idempotent by its form, or conditional and otherwise
    /// so (see [`autoprep_protocol::cql::idempotent::may_repeat`]), read once from `text`: a
    /// request in flight on a node that failed is sent again.
    pub repeatable: bool,
    /// MD5 of keyspace and text (`Shape::fingerprint`), computed once when the shape was
    /// prepared; the cache files the entry under the faster [`crate::key::ShapeHash`].
    pub fingerprint: [u8; 16],
    /// The keyspace it was prepared in (connection keyspace or v5 PREPARE keyspace).
    pub keyspace: Option<String>,
    /// The prepared id.
    pub id: Bytes,
    /// v5: the result metadata id to send in EXECUTE.
    pub result_metadata_id: Option<Bytes>,
    /// The type of every bind variable, in order.
    pub bind_types: Vec<ColumnType>,
    /// Partition key indexes among the bind variables.
    pub pk_indexes: Vec<u16>,
    /// The raw result metadata (kept for v5 metadata-change handling).
    pub result_metadata: Bytes,
    /// Every (keyspace, table) the statement touches, as the PREPARED answer proved them: a
    /// schema change of one of them drops the entry (see [`crate::PreparedCache::schema_changed`]).
    pub tables: Vec<(String, String)>,
    /// The PREPARED message the server answered (result kind onward), from which the answer
    /// to a client's PREPARE of a statement of this shape with literals inline is built;
    /// empty where unknown.
    pub prepared_message: Bytes,
}

impl PreparedEntry {
    /// Approximate memory held by the entry, for the byte bound of the cache.
    pub fn weight(&self) -> usize {
        // What an entry costs beyond its variable parts: the struct, its `Arc`, the LRU's node
        // and map slot, and the allocator's rounding of its heap parts. Measured: 1,000
        // statements of one table prepared through autoprep grew its anonymous memory by 1,241
        // bytes an entry, where this sum with 160 here counted 437 (the book's footprint page,
        // "Memory per statement").
        const FIXED: usize = 960;
        FIXED
            + self.fingerprint.len()
            + self.text.len()
            + self.keyspace.as_ref().map_or(0, String::len)
            + self.id.len()
            + self.result_metadata_id.as_ref().map_or(0, Bytes::len)
            + self.bind_types.len() * 48
            + self.pk_indexes.len() * 2
            + self.result_metadata.len()
            + self.prepared_message.len()
            + self
                .tables
                .iter()
                .map(|(k, t)| 48 + k.len() + t.len())
                .sum::<usize>()
    }

    /// Whether a schema change of `keyspace` (and of `table` in it, when given) concerns this
    /// statement.
    pub fn touches(&self, keyspace: &str, table: Option<&str>) -> bool {
        self.tables
            .iter()
            .any(|(k, t)| k == keyspace && !matches!(table, Some(n) if n != t))
    }
}
