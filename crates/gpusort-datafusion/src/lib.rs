//! gpusort-datafusion: `ORDER BY` on the GPU for Apache DataFusion, and through it Ballista.
//!
//! - [`GpuSortExec`]: a sort operator that packs the sort keys of each row into one or a few
//!   unsigned words ([`keys`], from gpusort-arrow), argsorts them with gpusort, and gathers every column with
//!   Arrow's `take`; inputs larger than the memory pool spill as sorted runs through
//!   DataFusion's own spill and merge machinery.
//! - [`GpuSortRule`]: a physical optimizer rule putting it in for `SortExec` wherever every key
//!   is supported; `EXPLAIN` shows `GpuSortExec` where it ran.
//! - [`GpuSortConfig`]: its settings, under `gpusort.*` (`SET gpusort.min_rows = 0`).
//! - [`GpuSortCodec`]: ships the operator in serialized plans (Ballista's scheduler to its
//!   executors).
//!
//! ```no_run
//! use datafusion::execution::SessionStateBuilder;
//! use datafusion::prelude::SessionContext;
//!
//! # async fn run() -> datafusion::common::Result<()> {
//! let state = gpusort_datafusion::with_gpu_sort(SessionStateBuilder::new().with_default_features())
//!     .build();
//! let ctx = SessionContext::new_with_state(state);
//! ctx.sql("SELECT * FROM t ORDER BY a DESC NULLS LAST, b").await?.show().await?;
//! # Ok(())
//! # }
//! ```
//!
//! Results are DataFusion's: the same rows in the same order for every distinct key (NaN and
//! nulls placed as DataFusion places them); rows with equal keys keep their input order.

#[cfg(feature = "codec")]
pub mod codec;
pub mod exec;
pub mod rule;

pub use gpusort_arrow::{engine, keys};

use std::sync::Arc;

use datafusion::common::config::ConfigExtension;
use datafusion::common::extensions_options;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::SessionConfig;

#[cfg(feature = "codec")]
pub use codec::GpuSortCodec;
pub use exec::GpuSortExec;
pub use gpusort_arrow::SortEngine;
pub use rule::GpuSortRule;

extensions_options! {
    /// The GPU sort's settings, `gpusort.*` in DataFusion's configuration.
    pub struct GpuSortConfig {
        /// Put GpuSortExec in for SortExec.
        pub enabled: bool, default = true
        /// Sorts of fewer rows stay on DataFusion's CPU kernel: a GPU job's transfers and launch
        /// cost about a millisecond, which a CPU sort of 2^16 rows takes too.
        pub min_rows: usize, default = 65536
        /// Sort all partitions as one GPU job instead of one per partition and a CPU merge
        /// (off for Ballista, where each executor sorts its own partitions).
        pub merge_partitions: bool, default = true
    }
}

impl ConfigExtension for GpuSortConfig {
    const PREFIX: &'static str = "gpusort";
}

/// `config` with the `gpusort.*` settings at their defaults.
pub fn gpu_sort_config(config: SessionConfig) -> SessionConfig {
    if config.options().extensions.get::<GpuSortConfig>().is_some() {
        return config;
    }
    config.with_option_extension(GpuSortConfig::default())
}

/// `builder` with the GPU sort: the rule (on the process's [`SortEngine::shared`] device) and
/// its settings.
pub fn with_gpu_sort(builder: SessionStateBuilder) -> SessionStateBuilder {
    with_gpu_sort_on(builder, SortEngine::shared())
}

/// `builder` with the GPU sort on `engine`.
pub fn with_gpu_sort_on(
    mut builder: SessionStateBuilder,
    engine: Arc<SortEngine>,
) -> SessionStateBuilder {
    let config = builder.config().take().unwrap_or_default();
    *builder.config() = Some(gpu_sort_config(config));
    builder.with_physical_optimizer_rule(Arc::new(GpuSortRule::new(engine)))
}
