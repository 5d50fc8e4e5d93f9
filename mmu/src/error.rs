//! Errors of the MMU crate.
//!
//! Configuration problems name the offending key and the reason, so that the binary can report
//! "file, key and why" as `DESIGN.md` asks.

use thiserror::Error;

/// Everything that can go wrong when building an [`crate::Mmu`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MmuError {
    /// A configuration key has a value the MMU cannot work with.
    #[error("invalid mmu config `{key}`: {reason}")]
    Config {
        /// The configuration key (dotted path for nested keys, e.g. `ecn.k_min_bytes`).
        key: String,
        /// Why the value is rejected, with the numbers involved.
        reason: String,
    },
}

impl MmuError {
    pub(crate) fn config(key: impl Into<String>, reason: impl Into<String>) -> Self {
        MmuError::Config {
            key: key.into(),
            reason: reason.into(),
        }
    }
}
