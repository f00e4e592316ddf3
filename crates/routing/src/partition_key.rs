//! The routing key: the bytes the partitioner hashes, built from the bound values of the
//! partition-key columns.
//!
//! A single-column partition key is hashed as the column's serialized value, unchanged. A
//! composite partition key is hashed in Cassandra's `CompositeType` form (the same bytes the
//! native protocol spec, section 4.1.4 / 4.2.5.4, calls the routing key): for each component,
//! in partition-key order, a 2-byte big-endian length, the value, and an end-of-component byte
//! 0. The components come from the PREPARED metadata's `pk_indexes` applied to the EXECUTE
//! values.
//!
//! A null or unset component means no routing key: the server rejects such a write, and a read
//! cannot name one partition, so there is nothing to route by.

use crate::murmur3;
use crate::token::Token;
use thiserror::Error;

/// The longest component a composite key can carry: its length is a 2-byte field. (The server
/// refuses any partition key longer than this, single or composite.)
pub const MAX_COMPONENT_LEN: usize = u16::MAX as usize;

/// Why a routing key cannot be built, or a composite key cannot be split.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RoutingKeyError {
    /// No components were given: a table always has at least one partition-key column.
    #[error("a routing key needs at least one partition-key component")]
    NoComponents,
    /// A component of a composite key does not fit its 2-byte length.
    #[error("partition-key component {index} is {len} bytes, more than the {max} a composite key can carry")]
    ComponentTooLong {
        index: usize,
        len: usize,
        max: usize,
    },
    /// A composite key ended inside a component or lacked its end-of-component byte.
    #[error("malformed composite key at byte {offset}: {reason}")]
    Malformed { offset: usize, reason: &'static str },
}

/// Builds the routing key from the partition-key components in partition-key order (`None` for
/// a null or unset value). `Ok(None)` when a component is null or unset.
pub fn routing_key(components: &[Option<&[u8]>]) -> Result<Option<Vec<u8>>, RoutingKeyError> {
    if !all_present(components)? {
        return Ok(None);
    }
    if let [Some(single)] = components {
        return Ok(Some(single.to_vec()));
    }
    let mut out = Vec::with_capacity(composite_len(components)?);
    write_composite(components, &mut out);
    Ok(Some(out))
}

/// The token of the partition named by the components, without copying a single-column key.
/// `Ok(None)` when a component is null or unset.
pub fn partition_token(components: &[Option<&[u8]>]) -> Result<Option<Token>, RoutingKeyError> {
    if !all_present(components)? {
        return Ok(None);
    }
    if let [Some(single)] = components {
        return Ok(Some(murmur3::token(single)));
    }
    let mut key = Vec::with_capacity(composite_len(components)?);
    write_composite(components, &mut key);
    Ok(Some(murmur3::token(&key)))
}

/// Splits a composite routing key back into its components (the inverse of [`routing_key`] for
/// two or more components).
pub fn split_composite(key: &[u8]) -> Result<Vec<&[u8]>, RoutingKeyError> {
    let mut out = Vec::new();
    let mut rest = key;
    while !rest.is_empty() {
        let offset = key.len() - rest.len();
        let [hi, lo, tail @ ..] = rest else {
            return Err(RoutingKeyError::Malformed {
                offset,
                reason: "truncated component length",
            });
        };
        let len = usize::from(u16::from_be_bytes([*hi, *lo]));
        if tail.len() < len + 1 {
            return Err(RoutingKeyError::Malformed {
                offset,
                reason: "component longer than the key",
            });
        }
        let (value, after) = tail.split_at(len);
        if after[0] != 0 {
            return Err(RoutingKeyError::Malformed {
                offset: offset + 2 + len,
                reason: "end-of-component byte is not 0",
            });
        }
        out.push(value);
        rest = &after[1..];
    }
    Ok(out)
}

/// True when no component is null or unset.
fn all_present(components: &[Option<&[u8]>]) -> Result<bool, RoutingKeyError> {
    if components.is_empty() {
        return Err(RoutingKeyError::NoComponents);
    }
    Ok(components.iter().all(Option::is_some))
}

/// The composite form's length, checking that every component fits its length field.
fn composite_len(components: &[Option<&[u8]>]) -> Result<usize, RoutingKeyError> {
    let mut total = 0usize;
    for (index, c) in components.iter().flatten().enumerate() {
        if c.len() > MAX_COMPONENT_LEN {
            return Err(RoutingKeyError::ComponentTooLong {
                index,
                len: c.len(),
                max: MAX_COMPONENT_LEN,
            });
        }
        total += 2 + c.len() + 1;
    }
    Ok(total)
}

/// Appends the composite form of components already checked by [`all_present`] and
/// [`composite_len`].
fn write_composite(components: &[Option<&[u8]>], out: &mut Vec<u8>) {
    for c in components.iter().flatten() {
        let len = u16::try_from(c.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(c);
        out.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn single_component_is_unchanged() {
        let k = [0, 0, 0, 42];
        assert_eq!(routing_key(&[Some(&k)]).unwrap(), Some(k.to_vec()));
        assert_eq!(
            partition_token(&[Some(&k)]).unwrap(),
            Some(murmur3::token(&k))
        );
    }

    #[test]
    fn composite_layout() {
        let key = routing_key(&[Some(&[0, 0, 0, 1]), Some(b"ab"), Some(b"")])
            .unwrap()
            .unwrap();
        assert_eq!(
            key,
            [
                0, 4, 0, 0, 0, 1, 0, // int 1
                0, 2, b'a', b'b', 0, // text "ab"
                0, 0, 0, // empty value
            ]
        );
        assert_eq!(
            partition_token(&[Some(&[0, 0, 0, 1]), Some(b"ab"), Some(b"")]).unwrap(),
            Some(murmur3::token(&key))
        );
    }

    #[test]
    fn null_or_unset_means_no_key() {
        assert_eq!(routing_key(&[None]).unwrap(), None);
        assert_eq!(routing_key(&[Some(b"a"), None]).unwrap(), None);
        assert_eq!(partition_token(&[None, Some(b"a")]).unwrap(), None);
    }

    #[test]
    fn refuses_nothing_and_oversized_components() {
        assert_eq!(routing_key(&[]), Err(RoutingKeyError::NoComponents));
        let big = vec![7u8; MAX_COMPONENT_LEN + 1];
        assert_eq!(
            routing_key(&[Some(b"a"), Some(&big)]),
            Err(RoutingKeyError::ComponentTooLong {
                index: 1,
                len: MAX_COMPONENT_LEN + 1,
                max: MAX_COMPONENT_LEN
            })
        );
        // A single component has no length field: hashed as it is.
        assert!(routing_key(&[Some(&big)]).unwrap().is_some());
        let max = vec![7u8; MAX_COMPONENT_LEN];
        assert!(routing_key(&[Some(&max), Some(b"")]).unwrap().is_some());
    }

    #[test]
    fn split_refuses_malformed_keys() {
        assert!(matches!(
            split_composite(&[0]),
            Err(RoutingKeyError::Malformed { offset: 0, .. })
        ));
        assert!(matches!(
            split_composite(&[0, 3, 1, 2, 3]),
            Err(RoutingKeyError::Malformed { offset: 0, .. })
        ));
        assert!(matches!(
            split_composite(&[0, 1, 9, 0, 0, 1, 9, 1]),
            Err(RoutingKeyError::Malformed { offset: 7, .. })
        ));
        assert_eq!(split_composite(&[]).unwrap(), Vec::<&[u8]>::new());
    }

    proptest! {
        #[test]
        fn composite_round_trips(parts in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..300), 2..6)
        ) {
            let comps: Vec<Option<&[u8]>> = parts.iter().map(|p| Some(p.as_slice())).collect();
            let key = routing_key(&comps).unwrap().unwrap();
            prop_assert_eq!(key.len(), parts.iter().map(|p| p.len() + 3).sum::<usize>());
            let back = split_composite(&key).unwrap();
            prop_assert_eq!(back, parts.iter().map(Vec::as_slice).collect::<Vec<_>>());
            prop_assert_eq!(partition_token(&comps).unwrap(), Some(murmur3::token(&key)));
        }

        #[test]
        fn any_null_component_gives_no_key(
            parts in proptest::collection::vec(
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)), 1..6)
        ) {
            let comps: Vec<Option<&[u8]>> = parts.iter().map(|p| p.as_deref()).collect();
            let has_null = comps.iter().any(Option::is_none);
            prop_assert_eq!(routing_key(&comps).unwrap().is_none(), has_null);
            prop_assert_eq!(partition_token(&comps).unwrap().is_none(), has_null);
        }

        #[test]
        fn split_never_panics(key in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = split_composite(&key);
        }
    }
}
