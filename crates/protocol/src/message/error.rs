//! ERROR (spec section 9): an `[int]` code, a `[string]` message and code-specific fields.

use crate::envelope::ProtocolVersion;
use crate::error::DecodeError;
use crate::primitives::{
    read_int, read_raw, read_short, read_short_bytes, read_string, read_u8, write_string,
    EncodeLenError, StringList,
};
use bytes::BufMut;

/// Error codes (spec section 9).
pub mod code {
    pub const SERVER_ERROR: i32 = 0x0000;
    pub const PROTOCOL_ERROR: i32 = 0x000A;
    pub const AUTH_ERROR: i32 = 0x0100;
    pub const UNAVAILABLE: i32 = 0x1000;
    pub const OVERLOADED: i32 = 0x1001;
    pub const IS_BOOTSTRAPPING: i32 = 0x1002;
    pub const TRUNCATE_ERROR: i32 = 0x1003;
    pub const WRITE_TIMEOUT: i32 = 0x1100;
    pub const READ_TIMEOUT: i32 = 0x1200;
    pub const READ_FAILURE: i32 = 0x1300;
    pub const FUNCTION_FAILURE: i32 = 0x1400;
    pub const WRITE_FAILURE: i32 = 0x1500;
    pub const CDC_WRITE_FAILURE: i32 = 0x1600;
    pub const CAS_WRITE_UNKNOWN: i32 = 0x1700;
    pub const SYNTAX_ERROR: i32 = 0x2000;
    pub const UNAUTHORIZED: i32 = 0x2100;
    pub const INVALID: i32 = 0x2200;
    pub const CONFIG_ERROR: i32 = 0x2300;
    pub const ALREADY_EXISTS: i32 = 0x2400;
    pub const UNPREPARED: i32 = 0x2500;
}

/// Code-specific fields of an error.
#[derive(Debug, Clone)]
pub enum ErrorDetail<'a> {
    /// Codes without extra fields.
    None,
    Unavailable {
        consistency: u16,
        required: i32,
        alive: i32,
    },
    WriteTimeout {
        consistency: u16,
        received: i32,
        block_for: i32,
        write_type: &'a str,
        /// v5, CAS writes only.
        contentions: Option<u16>,
    },
    ReadTimeout {
        consistency: u16,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    /// Read or write failure: failures as a count (v4) or per-node reasons (v5, kept raw).
    Failure {
        consistency: u16,
        received: i32,
        block_for: i32,
        failures: i32,
        reason_map: Option<&'a [u8]>,
        data_present: Option<bool>,
        write_type: Option<&'a str>,
    },
    FunctionFailure {
        keyspace: &'a str,
        function: &'a str,
        arg_types: StringList<'a>,
    },
    CasWriteUnknown {
        consistency: u16,
        received: i32,
        block_for: i32,
    },
    AlreadyExists {
        keyspace: &'a str,
        table: &'a str,
    },
    Unprepared {
        id: &'a [u8],
    },
}

/// An ERROR body.
#[derive(Debug, Clone)]
pub struct ErrorView<'a> {
    pub code: i32,
    pub message: &'a str,
    pub detail: ErrorDetail<'a>,
}

fn read_reason_map<'a>(buf: &mut &'a [u8]) -> Result<(i32, &'a [u8]), DecodeError> {
    let n = read_int(buf)?;
    let start = *buf;
    for _ in 0..n.max(0) {
        let len = read_u8(buf)?;
        read_raw(buf, len.into())?;
        read_short(buf)?;
    }
    Ok((n, &start[..start.len() - buf.len()]))
}

impl<'a> ErrorView<'a> {
    /// Reads an ERROR message.
    pub fn parse(mut body: &'a [u8], version: ProtocolVersion) -> Result<Self, DecodeError> {
        let b = &mut body;
        let code = read_int(b)?;
        let message = read_string(b)?;
        let v5 = version >= ProtocolVersion::V5;
        let detail = match code {
            code::UNAVAILABLE => ErrorDetail::Unavailable {
                consistency: read_short(b)?,
                required: read_int(b)?,
                alive: read_int(b)?,
            },
            code::WRITE_TIMEOUT => {
                let consistency = read_short(b)?;
                let received = read_int(b)?;
                let block_for = read_int(b)?;
                let write_type = read_string(b)?;
                let contentions = if v5 && write_type == "CAS" && !b.is_empty() {
                    Some(read_short(b)?)
                } else {
                    None
                };
                ErrorDetail::WriteTimeout {
                    consistency,
                    received,
                    block_for,
                    write_type,
                    contentions,
                }
            }
            code::READ_TIMEOUT => ErrorDetail::ReadTimeout {
                consistency: read_short(b)?,
                received: read_int(b)?,
                block_for: read_int(b)?,
                data_present: read_u8(b)? != 0,
            },
            code::READ_FAILURE | code::WRITE_FAILURE => {
                let consistency = read_short(b)?;
                let received = read_int(b)?;
                let block_for = read_int(b)?;
                let (failures, reason_map) = if v5 {
                    let (n, raw) = read_reason_map(b)?;
                    (n, Some(raw))
                } else {
                    (read_int(b)?, None)
                };
                let (data_present, write_type) = if code == code::READ_FAILURE {
                    (Some(read_u8(b)? != 0), None)
                } else {
                    (None, Some(read_string(b)?))
                };
                ErrorDetail::Failure {
                    consistency,
                    received,
                    block_for,
                    failures,
                    reason_map,
                    data_present,
                    write_type,
                }
            }
            code::FUNCTION_FAILURE => ErrorDetail::FunctionFailure {
                keyspace: read_string(b)?,
                function: read_string(b)?,
                arg_types: StringList::read(b)?,
            },
            code::CAS_WRITE_UNKNOWN => ErrorDetail::CasWriteUnknown {
                consistency: read_short(b)?,
                received: read_int(b)?,
                block_for: read_int(b)?,
            },
            code::ALREADY_EXISTS => ErrorDetail::AlreadyExists {
                keyspace: read_string(b)?,
                table: read_string(b)?,
            },
            code::UNPREPARED => ErrorDetail::Unprepared {
                id: read_short_bytes(b)?,
            },
            _ => ErrorDetail::None,
        };
        Ok(ErrorView {
            code,
            message,
            detail,
        })
    }
}

/// Writes an ERROR body with no code-specific fields (protocol, server, syntax errors ...).
pub fn encode_error(code: i32, message: &str, out: &mut impl BufMut) -> Result<(), EncodeLenError> {
    out.put_i32(code);
    write_string(out, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn unprepared_carries_its_id() {
        let mut b = Vec::new();
        encode_error(code::UNPREPARED, "Unprepared", &mut b).unwrap();
        crate::primitives::write_short_bytes(&mut b, &[0xAB; 16]).unwrap();
        let e = ErrorView::parse(&b, ProtocolVersion::V4).unwrap();
        assert_eq!(e.code, code::UNPREPARED);
        assert!(matches!(e.detail, ErrorDetail::Unprepared { id } if id == [0xAB; 16]));
    }

    proptest! {
        #[test]
        fn parse_is_total(code in prop_oneof![Just(0x1000), Just(0x1100), Just(0x1200), Just(0x1300), Just(0x1400), Just(0x1500), Just(0x1700), Just(0x2400), Just(0x2500), any::<i32>()],
                          rest in proptest::collection::vec(any::<u8>(), 0..60), v5 in any::<bool>()) {
            let mut b = Vec::new();
            encode_error(code, "m", &mut b).unwrap();
            b.extend_from_slice(&rest);
            let v = if v5 { ProtocolVersion::V5 } else { ProtocolVersion::V4 };
            let _ = ErrorView::parse(&b, v);
        }
    }
}
