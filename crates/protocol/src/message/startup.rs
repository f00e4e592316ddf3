//! STARTUP (spec section 4.1.1): a `[string map]` of options.

use crate::compression::Compression;
use crate::error::DecodeError;
use crate::primitives::read_string_map;

/// The STARTUP options the proxy cares about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartupView<'a> {
    /// `CQL_VERSION`.
    pub cql_version: Option<&'a str>,
    /// `COMPRESSION`, as sent.
    pub compression_name: Option<&'a str>,
    /// `DRIVER_NAME`.
    pub driver_name: Option<&'a str>,
    /// `DRIVER_VERSION`.
    pub driver_version: Option<&'a str>,
}

impl<'a> StartupView<'a> {
    /// Reads a STARTUP body.
    pub fn parse(mut body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut v = StartupView::default();
        read_string_map(&mut body, |k, val| match k {
            "CQL_VERSION" => v.cql_version = Some(val),
            "COMPRESSION" => v.compression_name = Some(val),
            "DRIVER_NAME" => v.driver_name = Some(val),
            "DRIVER_VERSION" => v.driver_version = Some(val),
            _ => {}
        })?;
        Ok(v)
    }

    /// The negotiated compression, if the client asked for one the proxy knows.
    pub fn compression(&self) -> Option<Compression> {
        self.compression_name
            .and_then(Compression::from_startup_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primitives::write_string_map;

    #[test]
    fn reads_options() {
        let mut b = Vec::new();
        write_string_map(&mut b, &[("CQL_VERSION", "3.0.0"), ("COMPRESSION", "lz4")]).unwrap();
        let v = StartupView::parse(&b).unwrap();
        assert_eq!(v.cql_version, Some("3.0.0"));
        assert_eq!(v.compression(), Some(Compression::Lz4));
    }
}
