//! Numbers: `tinyint`, `smallint`, `int`, `bigint`, `counter`, `varint`, `decimal`, `float`,
//! `double`.
//!
//! Mirrors Java's `Byte/Short/Integer/Long.parseLong` (range-checked), `new BigInteger(text)`,
//! `new BigDecimal(text)` (scale exactly as written) and `Float.parseFloat` /
//! `Double.valueOf` (correctly rounded, like Rust's `str::parse`). NaN is canonical.

use super::{kind_mismatch, out_of_range, rejected, unsupported, EncodeError, Encoded};
use crate::cql::literal::Literal;
use crate::types::ColumnType;

/// Varint and decimal literals longer than this are refused: the decimal-to-binary
/// conversion is quadratic and such literals are not worth the CPU.
const MAX_DIGITS: usize = 10_000;

pub(super) fn encode<'l>(
    lit: &'l Literal<'_>,
    ty: &ColumnType,
) -> Result<Encoded<'l>, EncodeError> {
    match (ty, lit) {
        (ColumnType::Tinyint, Literal::Integer(t)) => {
            let v = parse_int_in(t, ty, i8::MIN.into(), i8::MAX.into())?;
            Ok(Encoded::fixed((v as i8).to_be_bytes()))
        }
        (ColumnType::Smallint, Literal::Integer(t)) => {
            let v = parse_int_in(t, ty, i16::MIN.into(), i16::MAX.into())?;
            Ok(Encoded::fixed((v as i16).to_be_bytes()))
        }
        (ColumnType::Int, Literal::Integer(t)) => {
            let v = parse_int_in(t, ty, i32::MIN.into(), i32::MAX.into())?;
            Ok(Encoded::fixed((v as i32).to_be_bytes()))
        }
        // Constants.Literal converts counters with LongType.
        (ColumnType::Bigint | ColumnType::Counter, Literal::Integer(t)) => {
            let v = parse_int_in(t, ty, i64::MIN, i64::MAX)?;
            Ok(Encoded::fixed(v.to_be_bytes()))
        }
        (ColumnType::Varint, Literal::Integer(t)) => {
            let d = DecimalText::parse(t, false).ok_or_else(|| rejected(ty, "not an integer"))?;
            Ok(unscaled_bytes(&d, None, ty)?)
        }
        (ColumnType::Decimal, Literal::Integer(t)) => {
            let d = DecimalText::parse(t, false).ok_or_else(|| rejected(ty, "not an integer"))?;
            Ok(unscaled_bytes(&d, Some(0), ty)?)
        }
        (ColumnType::Decimal, Literal::Float(t)) => {
            let (d, _) = float_token(t, ty)?;
            let scale = d
                .scale()
                .ok_or_else(|| rejected(ty, "scale out of range"))?;
            Ok(unscaled_bytes(&d, Some(scale), ty)?)
        }
        (ColumnType::Decimal, Literal::NaN | Literal::Infinity { .. }) => {
            Err(rejected(ty, "NaN and Infinity are not decimals"))
        }
        (ColumnType::Float, Literal::Integer(t)) => {
            check_integer_token(t, ty)?;
            Ok(f32_bytes(parse_f32(t, ty)?))
        }
        (ColumnType::Float, Literal::Float(t)) => {
            float_token(t, ty)?;
            Ok(f32_bytes(parse_f32(t, ty)?))
        }
        (ColumnType::Double, Literal::Integer(t)) => {
            check_integer_token(t, ty)?;
            Ok(f64_bytes(parse_f64(t, ty)?))
        }
        (ColumnType::Double, Literal::Float(t)) => Ok(f64_bytes(double_value(t, ty)?)),
        (ColumnType::Float, Literal::NaN) => Ok(f32_bytes(f32::NAN)),
        (ColumnType::Double, Literal::NaN) => Ok(f64_bytes(f64::NAN)),
        (ColumnType::Float, Literal::Infinity { negative }) => Ok(f32_bytes(if *negative {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        })),
        (ColumnType::Double, Literal::Infinity { negative }) => Ok(f64_bytes(if *negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        })),
        _ => Err(kind_mismatch(ty, lit)),
    }
}

/// `-?[0-9]+`, the INTEGER token; anything else came from a broken lexer and is refused.
fn check_integer_token(t: &str, ty: &ColumnType) -> Result<(), EncodeError> {
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(unsupported(ty, "malformed integer token"));
    }
    Ok(())
}

/// Parses an INTEGER token as Java's `Long.parseLong` would, then checks `[min, max]`.
pub(super) fn parse_int_in(
    t: &str,
    ty: &ColumnType,
    min: i64,
    max: i64,
) -> Result<i64, EncodeError> {
    let b = t.as_bytes();
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() {
        return Err(unsupported(ty, "malformed integer token"));
    }
    // Leading zeros never overflow; a magnitude past u64 is out of every range.
    let mut mag: u64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return Err(unsupported(ty, "malformed integer token"));
        }
        mag = mag
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(d)))
            .ok_or_else(|| out_of_range(ty))?;
    }
    let v = if neg {
        -i128::from(mag)
    } else {
        i128::from(mag)
    };
    if v < i128::from(min) || v > i128::from(max) {
        return Err(out_of_range(ty));
    }
    // In range of i64 by the check above.
    i64::try_from(v).map_err(|_| out_of_range(ty))
}

/// Checks what the server's parser requires of every FLOAT token before any conversion:
/// `Constants.Type.FLOAT.getPreferedTypeFor` builds a `BigDecimal` from the text and compares
/// it with its `double` value, so a token whose exponent or scale overflows an `int`, or whose
/// double value is infinite, fails for every target type.
/// Returns the token split as a decimal and its double value.
fn float_token<'t>(t: &'t str, ty: &ColumnType) -> Result<(DecimalText<'t>, f64), EncodeError> {
    if !t.bytes().any(|c| c == b'e' || c == b'E') {
        // Without an exponent the scale is the fraction length: always valid. Only the shape
        // needs checking before the (correctly rounded) parse.
        let digits = t.strip_prefix('-').unwrap_or(t);
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty()
            || !int.bytes().all(|c| c.is_ascii_digit())
            || !frac.bytes().all(|c| c.is_ascii_digit())
        {
            return Err(unsupported(ty, "malformed float token"));
        }
        let d = DecimalText {
            negative: t.starts_with('-'),
            int_digits: int,
            frac_digits: frac,
            exponent: 0,
            exponent_overflow: false,
        };
        return match t.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok((d, v)),
            _ => Err(rejected(ty, "float literal overflows a double")),
        };
    }
    let d = DecimalText::parse(t, true).ok_or_else(|| unsupported(ty, "malformed float token"))?;
    if d.exponent_overflow || d.scale().is_none() {
        return Err(rejected(ty, "exponent out of range"));
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok((d, v)),
        _ => Err(rejected(ty, "float literal overflows a double")),
    }
}

/// The `double` a FLOAT token converts to, as `(Double, Float(t))` above.
#[inline]
pub(super) fn double_value(t: &str, ty: &ColumnType) -> Result<f64, EncodeError> {
    match plain_decimal(t) {
        Some(v) => Ok(v),
        None => Ok(float_token(t, ty)?.1),
    }
}

/// The value of `-?digits.digits` with at most 15 digits in all: the digits as an integer
/// (below 2^53, so exact) divided by a power of ten up to 10^15 (exact too), which IEEE
/// division rounds correctly: the same value as the decimal-to-binary conversion (Clinger's
/// fast path, which `str::parse` takes for these as well). `None` for any other text.
fn plain_decimal(t: &str) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let (negative, rest) = match t.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    let dot = rest.iter().position(|&b| b == b'.')?;
    if dot == 0 || rest.len() > 16 {
        return None;
    }
    let mut m: u64 = 0;
    for (i, &b) in rest.iter().enumerate() {
        if i == dot {
            continue;
        }
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        m = m * 10 + u64::from(d);
    }
    let v = m as f64 / POW10[rest.len() - dot - 1];
    Some(if negative { -v } else { v })
}

fn parse_f32(t: &str, ty: &ColumnType) -> Result<f32, EncodeError> {
    t.parse::<f32>()
        .map_err(|_| unsupported(ty, "malformed number token"))
}

fn parse_f64(t: &str, ty: &ColumnType) -> Result<f64, EncodeError> {
    t.parse::<f64>()
        .map_err(|_| unsupported(ty, "malformed number token"))
}

/// Java's `floatToIntBits`: every NaN becomes 0x7FC00000.
fn f32_bytes(v: f32) -> Encoded<'static> {
    let bits = if v.is_nan() { 0x7FC0_0000 } else { v.to_bits() };
    Encoded::fixed(bits.to_be_bytes())
}

/// Java's `doubleToLongBits`: every NaN becomes 0x7FF8000000000000.
pub(super) fn f64_bits(v: f64) -> u64 {
    if v.is_nan() {
        0x7FF8_0000_0000_0000
    } else {
        v.to_bits()
    }
}

fn f64_bytes(v: f64) -> Encoded<'static> {
    Encoded::fixed(f64_bits(v).to_be_bytes())
}

/// A number token split as `BigDecimal(String)` sees it:
/// `-? int_digits [. frac_digits] [e|E [+-] exp_digits]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecimalText<'t> {
    negative: bool,
    int_digits: &'t str,
    frac_digits: &'t str,
    /// The exponent, when it fits an `i32` (Java: "Exponent overflow" otherwise).
    exponent: i64,
    exponent_overflow: bool,
}

impl<'t> DecimalText<'t> {
    /// Parses an INTEGER (`allow_float == false`) or FLOAT token.
    pub(crate) fn parse(t: &'t str, allow_float: bool) -> Option<Self> {
        let (negative, rest) = match t.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, t),
        };
        let int_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int_digits, mut rest) = rest.split_at(int_end);
        if int_digits.is_empty() {
            return None;
        }
        let mut frac_digits = "";
        let mut exponent = 0i64;
        let mut exponent_overflow = false;
        if allow_float {
            if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
                frac_digits = &r[..end];
                rest = &r[end..];
            }
            if let Some(r) = rest.strip_prefix(['e', 'E']) {
                let (eneg, r) = match r.as_bytes().first() {
                    Some(b'-') => (true, &r[1..]),
                    Some(b'+') => (false, &r[1..]),
                    _ => (false, r),
                };
                if r.is_empty() || !r.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                // Significant digits beyond 10 cannot fit an int (Java refuses them too).
                let sig = r.trim_start_matches('0');
                if sig.len() > 10 {
                    exponent_overflow = true;
                } else {
                    let mut e: i64 = 0;
                    for b in sig.bytes() {
                        e = e * 10 + i64::from(b - b'0');
                    }
                    let e = if eneg { -e } else { e };
                    if i32::try_from(e).is_err() {
                        exponent_overflow = true;
                    }
                    exponent = e;
                }
                rest = "";
            }
        }
        if !rest.is_empty() {
            return None;
        }
        Some(DecimalText {
            negative,
            int_digits,
            frac_digits,
            exponent,
            exponent_overflow,
        })
    }

    /// `BigDecimal.scale()`: fraction digits minus the exponent, when it fits an `i32`.
    pub(crate) fn scale(&self) -> Option<i32> {
        if self.exponent_overflow {
            return None;
        }
        let frac = i64::try_from(self.frac_digits.len()).ok()?;
        i32::try_from(frac - self.exponent).ok()
    }

    /// The unscaled digits without leading zeros (possibly empty for zero).
    fn significant_digits(&self) -> impl Iterator<Item = u8> + '_ {
        self.int_digits
            .bytes()
            .chain(self.frac_digits.bytes())
            .skip_while(|b| *b == b'0')
            .map(|b| b - b'0')
    }

    fn significant_len(&self) -> usize {
        self.significant_digits().count()
    }
}

/// Builds a varint (`scale == None`) or a decimal `[int scale][varint unscaled]`.
fn unscaled_bytes<'l>(
    d: &DecimalText<'_>,
    scale: Option<i32>,
    ty: &ColumnType,
) -> Result<Encoded<'l>, EncodeError> {
    let n = d.significant_len();
    if n > MAX_DIGITS {
        return Err(unsupported(ty, "too many digits"));
    }
    if n <= 38 {
        // Fits i128 (10^38 - 1 < 2^127): the allocation-free path.
        let mut mag: i128 = 0;
        for digit in d.significant_digits() {
            mag = mag * 10 + i128::from(digit);
        }
        let v = if d.negative { -mag } else { mag };
        let bytes = v.to_be_bytes();
        let start = minimal_start(&bytes);
        let mut buf = [0u8; 20];
        let mut len = 0;
        if let Some(s) = scale {
            buf[..4].copy_from_slice(&s.to_be_bytes());
            len = 4;
        }
        let body = &bytes[start..];
        buf[len..len + body.len()].copy_from_slice(body);
        len += body.len();
        return Ok(Encoded::inline(&buf[..len]));
    }
    let mut out = Vec::with_capacity(4 + n / 2 + 2);
    if let Some(s) = scale {
        out.extend_from_slice(&s.to_be_bytes());
    }
    big_twos_complement(d, &mut out);
    Ok(Encoded::Owned(out))
}

/// Index of the first byte of the minimal two's complement form of a big-endian value
/// (`BigInteger.toByteArray`): drop leading 0x00 (0xFF) bytes while the next byte keeps the
/// sign bit clear (set). Zero keeps one byte.
pub(crate) fn minimal_start(bytes: &[u8]) -> usize {
    let mut i = 0;
    while i + 1 < bytes.len() {
        let (b, next) = (bytes[i], bytes[i + 1]);
        if (b == 0x00 && next & 0x80 == 0) || (b == 0xFF && next & 0x80 != 0) {
            i += 1;
        } else {
            break;
        }
    }
    i
}

/// Converts the decimal digits to binary with base-1e9 chunks into 32-bit limbs, then appends
/// the minimal big-endian two's complement form.
fn big_twos_complement(d: &DecimalText<'_>, out: &mut Vec<u8>) {
    let digits: Vec<u8> = d.significant_digits().collect();
    // Little-endian 32-bit limbs of the magnitude.
    let mut limbs: Vec<u32> = Vec::with_capacity(digits.len() / 9 + 1);
    let first = digits.len() % 9;
    let mut chunks: Vec<&[u8]> = Vec::with_capacity(digits.len() / 9 + 1);
    if first > 0 {
        chunks.push(&digits[..first]);
    }
    chunks.extend(digits[first..].chunks(9));
    for chunk in chunks {
        let mut mul: u64 = 1;
        let mut add: u64 = 0;
        for &digit in chunk {
            mul *= 10;
            add = add * 10 + u64::from(digit);
        }
        let mut carry = add;
        for limb in limbs.iter_mut() {
            let v = u64::from(*limb) * mul + carry;
            *limb = v as u32; // low 32 bits
            carry = v >> 32;
        }
        if carry > 0 {
            limbs.push(carry as u32); // carry < 2^32 since mul, add < 2^30
        }
    }
    // Big-endian magnitude with one extra zero byte so the sign bit is free.
    let mut mag = Vec::with_capacity(limbs.len() * 4 + 1);
    mag.push(0u8);
    for limb in limbs.iter().rev() {
        mag.extend_from_slice(&limb.to_be_bytes());
    }
    if d.negative {
        // Two's complement: invert and add one.
        let mut carry = true;
        for b in mag.iter_mut().rev() {
            let (v, c) = (!*b).overflowing_add(u8::from(carry));
            *b = v;
            carry = c;
        }
    }
    let start = minimal_start(&mag);
    out.extend_from_slice(&mag[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        #[test]
        fn plain_decimals_convert_as_the_general_parser(t in "-?[0-9]{1,10}\\.[0-9]{0,10}") {
            if let Some(v) = plain_decimal(&t) {
                prop_assert_eq!(v.to_bits(), t.parse::<f64>().unwrap().to_bits(), "{}", t);
            }
        }
    }

    #[test]
    fn plain_decimal_shapes() {
        assert_eq!(plain_decimal("21.5"), Some(21.5));
        assert_eq!(
            plain_decimal("-0.0").map(f64::to_bits),
            Some((-0.0f64).to_bits())
        );
        assert_eq!(plain_decimal("1."), Some(1.0));
        assert_eq!(plain_decimal("0.1"), Some(0.1));
        assert_eq!(plain_decimal("123456789012345.6"), None);
        assert_eq!(plain_decimal(".5"), None);
        assert_eq!(plain_decimal("1e5"), None);
    }

    fn enc(lit: Literal<'_>, ty: ColumnType) -> Result<Vec<u8>, EncodeError> {
        let mut v = Vec::new();
        encode(&lit, &ty)?.write(&mut v);
        Ok(v)
    }

    #[test]
    fn integers_range_checked() {
        assert_eq!(
            enc(Literal::Integer("-128"), ColumnType::Tinyint).unwrap(),
            [0x80]
        );
        assert_eq!(
            enc(
                Literal::Integer("00000000000000000127"),
                ColumnType::Tinyint
            )
            .unwrap(),
            [0x7f]
        );
        assert!(matches!(
            enc(Literal::Integer("128"), ColumnType::Tinyint),
            Err(EncodeError::OutOfRange { .. })
        ));
        assert_eq!(
            enc(Literal::Integer("-0"), ColumnType::Int).unwrap(),
            [0, 0, 0, 0]
        );
        assert_eq!(
            enc(Literal::Integer("-9223372036854775808"), ColumnType::Bigint).unwrap(),
            [0x80, 0, 0, 0, 0, 0, 0, 0]
        );
        assert!(enc(Literal::Integer("9223372036854775808"), ColumnType::Bigint).is_err());
        assert!(enc(
            Literal::Integer("99999999999999999999999999999999999999999"),
            ColumnType::Bigint
        )
        .is_err());
        assert_eq!(
            enc(Literal::Integer("5"), ColumnType::Counter).unwrap(),
            [0, 0, 0, 0, 0, 0, 0, 5]
        );
    }

    #[test]
    fn varint_minimal() {
        for (t, hex) in [
            ("0", "00"),
            ("-0", "00"),
            ("127", "7f"),
            ("128", "0080"),
            ("255", "00ff"),
            ("-128", "80"),
            ("-129", "ff7f"),
            ("-1", "ff"),
            ("-256", "ff00"),
            ("18446744073709551616", "010000000000000000"),
            (
                "-170141183460469231731687303715884105728",
                "80000000000000000000000000000000",
            ),
        ] {
            assert_eq!(
                hex::encode(enc(Literal::Integer(t), ColumnType::Varint).unwrap()),
                hex,
                "{t}"
            );
        }
    }

    #[test]
    fn big_varint_matches_small_path() {
        // 40-digit numbers go through the limb conversion; compare with i128 arithmetic on
        // values that still fit.
        let d = DecimalText::parse("-0000000000170141183460469231731687303715884105728", false)
            .unwrap();
        let mut v = Vec::new();
        big_twos_complement(&d, &mut v);
        assert_eq!(hex::encode(v), "80000000000000000000000000000000");
        let d = DecimalText::parse("340282366920938463463374607431768211456", false).unwrap();
        let mut v = Vec::new();
        big_twos_complement(&d, &mut v);
        assert_eq!(hex::encode(v), "0100000000000000000000000000000000");
    }

    #[test]
    fn decimal_scale_as_written() {
        for (lit, hex) in [
            (Literal::Float("1.50"), "00000002 0096"),
            (Literal::Float("1e3"), "fffffffd01"),
            (Literal::Float("-0.000"), "0000000300"),
            (Literal::Float("1."), "0000000001"),
            (Literal::Float("-1.5e-3"), "00000004f1"),
            (Literal::Integer("-0"), "0000000000"),
            (Literal::Integer("007"), "0000000007"),
        ] {
            let want = hex.replace(' ', "");
            assert_eq!(
                hex::encode(enc(lit.clone(), ColumnType::Decimal).unwrap()),
                want,
                "{lit:?}"
            );
        }
        assert!(enc(Literal::NaN, ColumnType::Decimal)
            .unwrap_err()
            .server_rejects());
        assert!(enc(Literal::Float("1e2147483648"), ColumnType::Decimal)
            .unwrap_err()
            .server_rejects());
        assert!(enc(Literal::Float("1e-2147483648"), ColumnType::Decimal)
            .unwrap_err()
            .server_rejects());
        assert!(enc(Literal::Float("1e400"), ColumnType::Decimal)
            .unwrap_err()
            .server_rejects());
    }

    #[test]
    fn floats_and_doubles() {
        assert_eq!(
            hex::encode(enc(Literal::NaN, ColumnType::Float).unwrap()),
            "7fc00000"
        );
        assert_eq!(
            hex::encode(enc(Literal::NaN, ColumnType::Double).unwrap()),
            "7ff8000000000000"
        );
        assert_eq!(
            hex::encode(enc(Literal::Integer("-0"), ColumnType::Float).unwrap()),
            "80000000"
        );
        assert_eq!(
            hex::encode(enc(Literal::Float("1e40"), ColumnType::Float).unwrap()),
            "7f800000"
        );
        assert_eq!(
            hex::encode(enc(Literal::Float("1.e5"), ColumnType::Float).unwrap()),
            "47c35000"
        );
        assert_eq!(
            hex::encode(enc(Literal::Float("1e-400"), ColumnType::Double).unwrap()),
            "0000000000000000"
        );
        assert!(enc(Literal::Float("1e400"), ColumnType::Double)
            .unwrap_err()
            .server_rejects());
        assert!(enc(Literal::Float("1e400"), ColumnType::Float)
            .unwrap_err()
            .server_rejects());
        let big = format!("1{}", "0".repeat(400));
        assert_eq!(
            hex::encode(enc(Literal::Integer(&big), ColumnType::Double).unwrap()),
            "7ff0000000000000"
        );
        assert_eq!(
            hex::encode(enc(Literal::Infinity { negative: true }, ColumnType::Double).unwrap()),
            "fff0000000000000"
        );
    }

    #[test]
    fn wrong_kinds_rejected() {
        assert!(enc(Literal::String("5".into()), ColumnType::Int)
            .unwrap_err()
            .server_rejects());
        assert!(enc(Literal::Hex("0001"), ColumnType::Int)
            .unwrap_err()
            .server_rejects());
        assert!(enc(Literal::Float("1.5"), ColumnType::Int)
            .unwrap_err()
            .server_rejects());
        assert!(enc(Literal::NaN, ColumnType::Varint)
            .unwrap_err()
            .server_rejects());
    }
}
