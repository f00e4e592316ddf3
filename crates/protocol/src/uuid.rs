//! UUIDs in their 8-4-4-4-12 hex form, decoded eight digits at a time (SIMD within a
//! register): the lexer uses it to recognise an unquoted UUID, the encoder to convert one.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The 16 bytes of the UUID written in `b` (36 bytes, any case), or `None` if `b` is not one.
#[inline]
pub(crate) fn parse(b: &[u8]) -> Option<[u8; 16]> {
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    // The 32 hex digits as four runs of eight (the middle groups are four and four).
    let le = |at: usize, n: usize| -> u64 {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&b[at..at + n]);
        u64::from_le_bytes(w)
    };
    let runs = [
        le(0, 8),
        le(9, 4) | le(14, 4) << 32,
        le(19, 4) | le(24, 4) << 32,
        le(28, 8),
    ];
    let mut out = [0u8; 16];
    for (o, run) in out.chunks_exact_mut(4).zip(runs) {
        o.copy_from_slice(&hex8(run)?);
    }
    Some(out)
}

/// True if `b` is a UUID in the 8-4-4-4-12 hex form (any case): exactly when [`parse`] gives
/// `Some`, without decoding it (the lexer only needs the shape).
#[inline]
pub(crate) fn is_uuid(b: &[u8]) -> bool {
    let Ok(b) = <&[u8; 36]>::try_from(b) else {
        return false;
    };
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    // Bytes 8 and 13 are byte 0 and byte 5 of the word at 8; 18 and 23 are bytes 2 and 7 of
    // the word at 16. Those must be dashes; they are checked as hex digits after being
    // replaced by `0`.
    const DASHES_8: u64 = 0x0000_FF00_0000_00FF;
    const DASHES_16: u64 = 0xFF00_0000_00FF_0000;
    const DASH: u64 = 0x2D2D_2D2D_2D2D_2D2D;
    const ZERO: u64 = 0x3030_3030_3030_3030;
    let (w8, w16) = (word(8), word(16));
    let dashes = (w8 & DASHES_8) == (DASH & DASHES_8) && (w16 & DASHES_16) == (DASH & DASHES_16);
    let w8 = (w8 & !DASHES_8) | (ZERO & DASHES_8);
    let w16 = (w16 & !DASHES_16) | (ZERO & DASHES_16);
    dashes
        && hex_bytes(word(0))
            & hex_bytes(w8)
            & hex_bytes(w16)
            & hex_bytes(word(24))
            & hex_bytes(word(28))
            == HIGH
}

/// The high bit of each byte of `x` set where the byte is an ASCII hex digit.
#[inline(always)]
fn hex_bytes(x: u64) -> u64 {
    // The high bit of each byte below 0x80 set where lo <= byte <= hi (no carries between
    // bytes: each sum stays below 0x100).
    let in_range = |v: u64, lo: u8, hi: u8| {
        v.wrapping_add(ONES * u64::from(0x80 - lo)) & !v.wrapping_add(ONES * u64::from(0x7F - hi))
    };
    let low7 = x & !HIGH;
    // Setting bit 5 maps `A..=F` onto `a..=f` and no other byte into that range.
    let hex = in_range(low7, b'0', b'9') | in_range(low7 | (ONES * 0x20), b'a', b'f');
    hex & !x & HIGH
}

/// Eight ASCII hex digits (first digit in the low byte) to four bytes, or `None` if one is not
/// a hex digit (SIMD within a register).
fn hex8(x: u64) -> Option<[u8; 4]> {
    if hex_bytes(x) != HIGH {
        return None;
    }
    // A digit's value is its low nibble; a letter's is its low nibble plus 9 (bit 6 set).
    let nibbles = (x & (ONES * 0x0F)) + 9 * ((x >> 6) & ONES);
    // Byte i becomes nibble i << 4 | nibble i+1; keep the even bytes and close the gaps.
    let pairs = ((nibbles << 4) | (nibbles >> 8)) & 0x00FF_00FF_00FF_00FF;
    let pairs = (pairs | (pairs >> 8)) & 0x0000_FFFF_0000_FFFF;
    let pairs = (pairs | (pairs >> 16)) & 0xFFFF_FFFF;
    Some((pairs as u32).to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ASCII hex digit values; 0x80 marks a non-digit.
    const HEX: [u8; 256] = {
        let mut t = [0x80u8; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'a' as usize + i] = 10 + i as u8;
            t[b'A' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    };

    /// The byte-table decoding, as reference for [`hex8`].
    fn hex8_reference(digits: [u8; 8]) -> Option<[u8; 4]> {
        let mut out = [0u8; 4];
        for (o, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
            let (hi, lo) = (HEX[usize::from(pair[0])], HEX[usize::from(pair[1])]);
            if (hi | lo) & 0x80 != 0 {
                return None;
            }
            *o = (hi << 4) | lo;
        }
        Some(out)
    }

    #[test]
    fn hex8_matches_the_byte_table_for_every_byte_in_every_place() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut digits = *b"09afAF5c";
                digits[at] = b;
                assert_eq!(
                    hex8(u64::from_le_bytes(digits)),
                    hex8_reference(digits),
                    "{b:#x} at {at}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn hex8_matches_the_byte_table(digits in proptest::array::uniform8(proptest::prelude::any::<u8>())) {
            proptest::prop_assert_eq!(hex8(u64::from_le_bytes(digits)), hex8_reference(digits));
        }
    }

    #[test]
    fn is_uuid_matches_parse_for_every_byte_in_every_place() {
        let valid = *b"6BA7B810-9dad-11d1-80b4-00c04fd430c8";
        for b in 0..=255u8 {
            for at in 0..36 {
                let mut text = valid;
                text[at] = b;
                assert_eq!(is_uuid(&text), parse(&text).is_some(), "{b:#x} at {at}");
            }
        }
        for len in 0..40 {
            let text: Vec<u8> = valid.iter().copied().cycle().take(len).collect();
            assert_eq!(is_uuid(&text), parse(&text).is_some(), "length {len}");
        }
    }

    proptest::proptest! {
        #[test]
        fn is_uuid_matches_parse(
            text in "[0-9a-fA-FgG-]{8}-?[0-9a-fA-F-]{4}-?[0-9a-fA-F]{4}[-_]?[0-9a-fA-F]{4}-?[0-9a-fA-F.]{12,13}"
        ) {
            proptest::prop_assert_eq!(is_uuid(text.as_bytes()), parse(text.as_bytes()).is_some());
        }
    }

    #[test]
    fn uuid_shapes() {
        assert_eq!(
            parse(b"6BA7B810-9dad-11d1-80b4-00c04fd430c8"),
            Some([
                0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4,
                0x30, 0xc8
            ])
        );
        assert_eq!(parse(b"6ba7b810-9dad-11d1-80b4-00c04fd430cg"), None);
        assert_eq!(parse(b"6ba7b810-9dad-11d1-80b4-00c04fd430c"), None);
        assert_eq!(parse(b"6ba7b8109-dad-11d1-80b4-00c04fd430c8"), None);
    }
}
