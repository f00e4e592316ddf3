//! Test support: a real Cassandra, the autoprep binary, and a minimal blocking CQL client.
