//! autoprep-routing: the pure logic of token-aware routing. Given the bound values of a
//! prepared statement, which nodes hold the partition, and (on ScyllaDB) which shard of each.
//! No I/O and no async: the proxy feeds it the cluster's metadata and asks it questions.
//!
//! # What routing needs
//! 1. The partition-key values of a request: PREPARED reports the bind-marker indexes of the
//!    partition-key columns (`pk_indexes`), EXECUTE carries the values.
//! 2. The routing key those values make ([`partition_key`]) and its Murmur3 token
//!    ([`murmur3`]).
//! 3. The ring: every node's tokens, datacenter and rack, from `system.local` and
//!    `system.peers` ([`ring`]).
//! 4. The keyspace's replication strategy from `system_schema.keyspaces.replication`
//!    ([`replication`]), precomputed per ring range ([`replica_map`]).
//! 5. On ScyllaDB, the shard count and ignored bits from SUPPORTED, to pick the shard and the
//!    source port that reaches it ([`shard`]).
//!
//! # Where the numbers come from
//! - Tokens: Apache Cassandra `utils/MurmurHash.java` (`hash3_x64_128`, with its sign-extended
//!   tail bytes) and `dht/Murmur3Partitioner.java` (seed 0, first half, `normalize`). Checked
//!   against vectors published by the DataStax Python and C# drivers, and against a real
//!   server's `token()` in `tests/server_tokens.rs`.
//! - Routing keys: Cassandra's `CompositeType` layout (2-byte length, value, 0) for composite
//!   partition keys, the value itself for a single column.
//! - Placement: Cassandra 5.0 `locator/TokenMetadata.java` (`firstTokenIndex`,
//!   `ringIterator`), `locator/SimpleStrategy.java` and `locator/NetworkTopologyStrategy.java`
//!   (`calculateNaturalReplicas`), `locator/ReplicationFactor.java` (`"n/t"` factors).
//! - Shards: ScyllaDB `dht/token-sharding.cc` (biased-token-round-robin) and
//!   `docs/dev/protocol-extensions.md` (shard-aware port); vectors from scylla-rust-driver and
//!   ScyllaDB's python-driver.
//!
//! # Layout
//! - [`token`](mod@token): the [`Token`] type.
//! - [`murmur3`]: Cassandra's MurmurHash3 and [`token()`].
//! - [`partition_key`]: routing keys from bound values, [`partition_token`].
//! - [`ring`]: the token ring, [`Ring::primary`].
//! - [`replication`]: strategies and [`replicas`].
//! - [`replica_map`]: [`ReplicaMap`], replicas per ring range for binary-search lookups.
//! - [`shard`]: [`shard_of`] and shard-aware source ports.
#![forbid(unsafe_code)]

pub mod murmur3;
pub mod partition_key;
pub mod replica_map;
pub mod replication;
pub mod ring;
pub mod shard;
pub mod token;

pub use murmur3::token;
pub use partition_key::{partition_token, routing_key, split_composite, RoutingKeyError};
pub use replica_map::ReplicaMap;
pub use replication::{parse_factor, replicas, ReplicationError, ReplicationStrategy};
pub use ring::{Node, NodeId, Ring, RingError};
pub use shard::{shard_of, shard_of_port, source_port, source_ports};
pub use token::Token;
