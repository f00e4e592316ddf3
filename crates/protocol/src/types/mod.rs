//! CQL data types as the protocol reports them (spec section 6, "[option]" type ids) and the
//! encoding of CQL literals into the exact bytes the server would have produced.

pub mod column_type;
pub mod encode;

pub use column_type::ColumnType;
pub use encode::{encode_in_list, encode_literal, EncodeError, EncodeOptions, UtcOffset};
