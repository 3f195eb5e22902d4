//! What a sort of Arrow columns can fail with.

use arrow::datatypes::DataType;

/// A failed sort of Arrow columns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Arrow itself refused (a cast, a gather, a batch whose columns disagree).
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    /// The GPU (or the CPU engine) failed.
    #[error(transparent)]
    Sort(#[from] gpusort_core::Error),
    /// A key type the packed words do not take ([`crate::keys::supported`] says which do).
    #[error("GPU sort of {0} keys")]
    Unsupported(DataType),
    /// More rows in one sorted run than a u32 permutation indexes.
    #[error("{0} rows in one sorted run (the GPU sort indexes rows with u32)")]
    TooManyRows(usize),
    /// The caller's columns do not fit together (a key of another length, no keys).
    #[error("{0}")]
    Invalid(String),
}

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
