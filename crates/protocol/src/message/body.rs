//! The prefix a header's flags put in front of a body: on responses the tracing id (0x02),
//! warnings (0x08) and custom payload (0x04), in that order; on requests the custom payload.

use crate::envelope::{Flags, Header};
use crate::error::DecodeError;
use crate::primitives::{read_bytes_map, read_raw, StringList};

/// A response body with its prefix split off.
#[derive(Debug, Clone)]
pub struct ResponseBody<'a> {
    /// The tracing session id, when the tracing flag is set.
    pub tracing_id: Option<&'a [u8]>,
    /// The warnings, when the warning flag is set.
    pub warnings: Option<StringList<'a>>,
    /// The raw custom payload `[bytes map]`, when that flag is set.
    pub custom_payload: Option<&'a [u8]>,
    /// The message itself.
    pub message: &'a [u8],
}

fn bytes_map<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let start = *buf;
    read_bytes_map(buf, |_, _| {})?;
    Ok(&start[..start.len() - buf.len()])
}

impl<'a> ResponseBody<'a> {
    /// Splits the prefix of an (uncompressed) response body.
    pub fn parse(header: &Header, mut body: &'a [u8]) -> Result<Self, DecodeError> {
        let tracing_id = if header.flags.has(Flags::TRACING) {
            Some(read_raw(&mut body, 16)?)
        } else {
            None
        };
        let warnings = if header.flags.has(Flags::WARNING) {
            Some(StringList::read(&mut body)?)
        } else {
            None
        };
        let custom_payload = if header.flags.has(Flags::CUSTOM_PAYLOAD) {
            Some(bytes_map(&mut body)?)
        } else {
            None
        };
        Ok(ResponseBody {
            tracing_id,
            warnings,
            custom_payload,
            message: body,
        })
    }
}

/// A request body with its prefix split off.
#[derive(Debug, Clone, Copy)]
pub struct RequestBody<'a> {
    /// The raw custom payload `[bytes map]`, when that flag is set.
    pub custom_payload: Option<&'a [u8]>,
    /// The message itself.
    pub message: &'a [u8],
}

impl<'a> RequestBody<'a> {
    /// Splits the prefix of an (uncompressed) request body.
    pub fn parse(header: &Header, mut body: &'a [u8]) -> Result<Self, DecodeError> {
        let custom_payload = if header.flags.has(Flags::CUSTOM_PAYLOAD) {
            Some(bytes_map(&mut body)?)
        } else {
            None
        };
        Ok(RequestBody {
            custom_payload,
            message: body,
        })
    }
}
