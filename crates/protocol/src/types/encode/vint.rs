//! Cassandra's variable-length integers (`VIntCoding`), used by `duration` values and by
//! vectors of variable-size elements.
//!
//! Not protobuf varints: the number of leading one bits in the first byte says how many bytes
//! follow, and the value is big-endian in the remaining bits (9 bytes: `0xFF` then 8 bytes).

/// Writes `value` as an unsigned vint into `buf`, returning the number of bytes used (1..=9).
pub(crate) fn write_unsigned(value: u64, buf: &mut [u8; 9]) -> usize {
    let size = unsigned_size(value);
    if size == 9 {
        buf[0] = 0xFF;
        buf[1..9].copy_from_slice(&value.to_be_bytes());
        return 9;
    }
    let be = value.to_be_bytes();
    buf[..size].copy_from_slice(&be[8 - size..]);
    // size - 1 leading one bits; the value's own high bits there are zero by construction.
    buf[0] |= !(0xFFu8 >> (size - 1));
    size
}

/// Writes `value` zig-zag encoded as a signed vint.
pub(crate) fn write_signed(value: i64, buf: &mut [u8; 9]) -> usize {
    write_unsigned(((value << 1) ^ (value >> 63)) as u64, buf)
}

/// `VIntCoding.computeUnsignedVIntSize`: 7 value bits in one byte, 7 more per extra byte, all
/// 64 bits in 9 bytes.
pub(crate) fn unsigned_size(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    if bits > 56 {
        9
    } else {
        bits.div_ceil(7)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> String {
        let mut b = [0u8; 9];
        let n = write_unsigned(v, &mut b);
        hex::encode(&b[..n])
    }

    #[test]
    fn unsigned_vints() {
        assert_eq!(enc(0), "00");
        assert_eq!(enc(127), "7f");
        assert_eq!(enc(128), "8080");
        assert_eq!(enc(16383), "bfff");
        assert_eq!(enc(16384), "c04000");
        assert_eq!(enc((1 << 56) - 1), "feffffffffffffff");
        assert_eq!(enc(1 << 56), "ff0100000000000000");
        assert_eq!(enc(u64::MAX), "ffffffffffffffffff");
    }

    #[test]
    fn signed_vints() {
        let mut b = [0u8; 9];
        let n = write_signed(-1, &mut b);
        assert_eq!(hex::encode(&b[..n]), "01");
        let n = write_signed(1, &mut b);
        assert_eq!(hex::encode(&b[..n]), "02");
        let n = write_signed(i64::MIN, &mut b);
        assert_eq!(hex::encode(&b[..n]), "ffffffffffffffffff");
    }

    proptest::proptest! {
        #[test]
        fn size_matches_java_formula(v in proptest::prelude::any::<u64>()) {
            // (639 - magnitude * 9) >> 6 with magnitude = clz(v | 1)
            let magnitude = (v | 1).leading_zeros() as usize;
            proptest::prop_assert_eq!(unsigned_size(v), (639 - magnitude * 9) >> 6);
            // Decoding gives the value back.
            let mut b = [0u8; 9];
            let n = write_unsigned(v, &mut b);
            let extra = b[0].leading_ones() as usize;
            proptest::prop_assert_eq!(extra + 1, n);
            let mut x: u64 = if n == 9 { 0 } else { u64::from(b[0] & (0xFFu8 >> extra.min(7))) };
            for byte in &b[1..n] {
                x = (x << 8) | u64::from(*byte);
            }
            proptest::prop_assert_eq!(x, v);
        }
    }
}
