//! What a table job reports: where its time went, and (`gpusort sql`) DataFusion's errors as the
//! CLI's.

#[cfg(feature = "sql")]
use datafusion::error::DataFusionError;

use crate::error::CliError;

/// gpusort-arrow's failures: while working (exit 1).
pub(super) fn arrow_side(e: gpusort_arrow::Error) -> CliError {
    CliError::runtime(e.to_string().replace('\n', " "))
}

/// A DataFusion error as the CLI reports it: plans that cannot be made (a column that is not
/// there, bad SQL, a file that is not what its name says) are the user's to fix, exit 2.
#[cfg(feature = "sql")]
pub(super) fn classify(e: DataFusionError) -> CliError {
    let inner = e.find_root();
    let line = inner.to_string().replace('\n', " ");
    // a failure while working (a full disk under a spill, a read error) is not the user's to fix
    let io = match inner {
        DataFusionError::IoError(_)
        | DataFusionError::ResourcesExhausted(_)
        | DataFusionError::ObjectStore(_)
        | DataFusionError::External(_) => true,
        DataFusionError::ArrowError(a, _) => matches!(
            **a,
            datafusion::arrow::error::ArrowError::IoError(..)
                | datafusion::arrow::error::ArrowError::ExternalError(_)
        ),
        DataFusionError::ParquetError(p) => {
            matches!(**p, datafusion::parquet::errors::ParquetError::External(_))
        }
        _ => false,
    };
    if io {
        return CliError::runtime(line);
    }
    match inner {
        DataFusionError::Plan(_)
        | DataFusionError::SQL(..)
        | DataFusionError::SchemaError(..)
        | DataFusionError::ParquetError(_)
        | DataFusionError::ArrowError(..)
        | DataFusionError::NotImplemented(_) => CliError::usage(line),
        _ => CliError::runtime(line),
    }
}

/// Where a table job's time went (`--timings`).
pub(super) struct TableTimes {
    pub(super) rows: u64,
    /// Until the first row arrived: reading, and for a sort the whole sort.
    pub(super) first_row_s: f64,
    /// From then until the file was written.
    pub(super) write_s: f64,
    /// Handing it to the final step (its flush started).
    pub(super) commit_s: f64,
}

impl TableTimes {
    pub(super) fn split(&self) -> String {
        format!(
            "time: read and sort {:.3} s, write {:.3} s, {} {:.3} s",
            self.first_row_s,
            self.write_s,
            gpusort_files::finish_words(),
            self.commit_s
        )
    }
}
