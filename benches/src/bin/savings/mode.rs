//! The modes a run measures: what each sends, and to what.

use anyhow::{bail, Result};
use autoprep_benches::legacy::Form;

/// One way of sending the workload (see the crate's documentation for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    DirectUnprepared,
    Autoprep,
    DirectPrepared,
    Passthrough,
    ProxiedPrepared,
    SpliceUnprepared,
    SplicePrepared,
    AutoprepUnrouted,
    DirectTokenAware,
    DirectPrepareEach,
    AutoprepPrepareEach,
}

impl Mode {
    /// The mode of its `--modes` name.
    pub fn parse(s: &str) -> Result<Mode> {
        Ok(match s.trim() {
            "direct-unprepared" => Mode::DirectUnprepared,
            "autoprep" => Mode::Autoprep,
            "direct-prepared" => Mode::DirectPrepared,
            "passthrough" => Mode::Passthrough,
            "proxied-prepared" => Mode::ProxiedPrepared,
            "splice-unprepared" => Mode::SpliceUnprepared,
            "splice-prepared" => Mode::SplicePrepared,
            "autoprep-unrouted" => Mode::AutoprepUnrouted,
            "direct-token-aware" => Mode::DirectTokenAware,
            "direct-prepare-each" => Mode::DirectPrepareEach,
            "autoprep-prepare-each" => Mode::AutoprepPrepareEach,
            m => bail!(
                "unknown mode {m:?} (direct-unprepared, autoprep, direct-prepared, passthrough, \
                 proxied-prepared, splice-unprepared, splice-prepared, autoprep-unrouted, \
                 direct-token-aware, direct-prepare-each, autoprep-prepare-each)"
            ),
        })
    }

    /// Its `--modes` name, as the output names it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::DirectUnprepared => "direct-unprepared",
            Mode::Autoprep => "autoprep",
            Mode::DirectPrepared => "direct-prepared",
            Mode::Passthrough => "passthrough",
            Mode::ProxiedPrepared => "proxied-prepared",
            Mode::SpliceUnprepared => "splice-unprepared",
            Mode::SplicePrepared => "splice-prepared",
            Mode::AutoprepUnrouted => "autoprep-unrouted",
            Mode::DirectTokenAware => "direct-token-aware",
            Mode::DirectPrepareEach => "direct-prepare-each",
            Mode::AutoprepPrepareEach => "autoprep-prepare-each",
        }
    }

    /// How the mode writes each operation: as literal QUERYs, as EXECUTEs of the prepared
    /// `ids`, or as a PREPARE of each statement and its EXECUTE (`bind_value`: with the value
    /// bound, see `--prepare-each-bind-value`).
    pub fn form(self, ids: &[Vec<u8>; 3], bind_value: bool) -> Form {
        match self {
            Mode::DirectPrepared
            | Mode::ProxiedPrepared
            | Mode::SplicePrepared
            | Mode::DirectTokenAware => Form::Prepared(ids.clone()),
            Mode::DirectPrepareEach | Mode::AutoprepPrepareEach => Form::PrepareEach { bind_value },
            _ => Form::Literal,
        }
    }

    /// Whether the mode sends EXECUTEs of the ids the benchmark prepared on the server (they
    /// are prepared again before each of its phases, in case the server evicted them).
    pub fn executes_prepared_ids(self) -> bool {
        matches!(
            self,
            Mode::DirectPrepared | Mode::ProxiedPrepared | Mode::DirectTokenAware
        )
    }
}
