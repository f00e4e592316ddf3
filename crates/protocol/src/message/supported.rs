//! SUPPORTED (spec section 4.2.4): a `[string multimap]` of server options.

use crate::error::DecodeError;
use crate::primitives::{read_string_multimap, StringList};

/// Calls `f` for every key of a SUPPORTED body with its values.
pub fn for_each_option<'a>(
    mut body: &'a [u8],
    f: impl FnMut(&'a str, &mut StringList<'a>),
) -> Result<(), DecodeError> {
    read_string_multimap(&mut body, f)
}
