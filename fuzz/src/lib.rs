//! Helpers shared by the fuzz targets (not a target itself): CQL types written the ways the
//! server writes them ([`types`]), a checker of encoded values against their type
//! ([`value`]), and small builders of protocol messages ([`wire`]).
//!
//! They are the fuzz targets' own reading of the protocol spec, written independently of the
//! code under test, so that a target can check what the crates produce instead of only
//! running them.
#![forbid(unsafe_code)]

pub mod types;
pub mod value;
pub mod wire;
