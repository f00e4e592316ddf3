//! The usual timestamp layout in one straight pass: `yyyy-MM-dd(T| )HH:mm:ss[.f{1,9}]`
//! followed by `Z`, `±HHMM`, `±HH:MM`, or nothing when the server's zone is configured.
//!
//! It answers only when the value is plainly valid (a real calendar day, hours up to 23); every
//! other text, and every case the general parser would clamp, refuse or reject, is left to it
//! (`None`). Where it answers, the millisecond value is the general parser's (checked by a
//! property test in `temporal.rs`).

use super::super::EncodeOptions;
use super::{days_from_civil, days_in_month, MAX_OFFSET, MILLIS_PER_DAY};

/// The value of the ASCII digit at `i`, or `None`.
#[inline(always)]
fn digit(s: &[u8], i: usize) -> Option<u32> {
    let d = u32::from(s.get(i)?.wrapping_sub(b'0'));
    (d < 10).then_some(d)
}

/// The two-digit number at `i`.
#[inline(always)]
fn two(s: &[u8], i: usize) -> Option<u32> {
    Some(digit(s, i)? * 10 + digit(s, i + 1)?)
}

/// Epoch milliseconds of `s` in the usual layout, or `None` for the general parser.
pub(super) fn timestamp(s: &[u8], opts: &EncodeOptions) -> Option<i64> {
    if s.len() < 19
        || s[4] != b'-'
        || s[7] != b'-'
        || !matches!(s[10], b' ' | b'T')
        || s[13] != b':'
        || s[16] != b':'
    {
        return None;
    }
    let year = two(s, 0)? * 100 + two(s, 2)?;
    let (month, day) = (two(s, 5)?, two(s, 8)?);
    let (hour, minute, second) = (two(s, 11)?, two(s, 14)?, two(s, 17)?);
    let year = i64::from(year);
    if year == 0
        || !(1..=12).contains(&month)
        || day == 0
        || u64::from(day) > days_in_month(year, u64::from(month))
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    // A fraction of 1 to 9 digits, floored to milliseconds.
    let mut i = 19;
    let mut millis = 0;
    if s.get(i) == Some(&b'.') {
        let mut n = 0;
        while let Some(d) = digit(s, i + 1 + n) {
            if n < 3 {
                millis = millis * 10 + d;
            }
            n += 1;
        }
        if n == 0 || n > 9 {
            return None;
        }
        millis *= [100, 10, 1][n.min(3) - 1];
        i += 1 + n;
    }
    let offset = match s.get(i..)? {
        [] => opts.server_time_zone?.seconds(),
        b"Z" => 0,
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let mm = match rest.len() {
                4 => two(rest, 2)?,
                5 if rest[2] == b':' => two(rest, 3)?,
                _ => return None,
            };
            let hh = two(rest, 0)?;
            if hh > 18 || mm > 59 {
                return None;
            }
            let secs = (hh * 3600 + mm * 60) as i32;
            if secs > MAX_OFFSET {
                return None;
            }
            if *sign == b'-' {
                -secs
            } else {
                secs
            }
        }
        _ => return None,
    };
    let in_day = i64::from(((hour * 60 + minute) * 60 + second) * 1000 + millis);
    let days = days_from_civil(year, u64::from(month), u64::from(day));
    Some(days * MILLIS_PER_DAY + in_day - i64::from(offset) * 1000)
}
