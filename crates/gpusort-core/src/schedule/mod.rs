//! Many small tasks in shared GPU launches (METHODS.md method 5): the merged launch of
//! shaders/merged.wgsl, fed by gpusort-sched's plans.
//!
//! A [`Batch`] lists tasks (sorts, scans and stable splits of regions of one u32 data buffer)
//! and their dependencies. Each task becomes one or more phases (a sort longer than one block
//! runs the bitonic plan's passes, a scan or split longer than one block counts or reduces, then
//! applies), each phase a
//! gpusort-sched task split into blocks of `CAP` words. The plan groups phases into launches by
//! workgroup memory and orders them; the [`Scheduler`] records each launch either
//!
//! - **merged**: one dispatch for every block of the launch (workgroups take tickets, wait on
//!   their producers with bounded spins, and defer when a wait runs out), then one indirect
//!   "resume" dispatch of one workgroup that runs whatever was deferred, in table order (zero
//!   workgroups when nothing was): two dispatches per launch however deep the graph; or
//! - **safe**: one plain dispatch per dependency level, no waiting at all.
//!
//! [`Mode::Auto`] picks merged where a self-test on this device ([`Scheduler::merged_proven`])
//! gave the CPU reference's results, else safe.
//!
//! Elements: the merged kernels take 32-bit elements (u32, i32, f32), sort them in the library's
//! key order (NaN last both ways, -0.0 before +0.0), scan them with the scan operators, and split
//! them with the compaction predicates. 64-bit elements and payloads go through
//! [`crate::Sorter`] and [`crate::scan::Scanner`].
//!
//! ```
//! use gpusort_core::schedule::{Batch, Scheduler, Work};
//! use gpusort_core::scan::ScanOp;
//! use gpusort_core::{Gpu, GpuOptions, KeyType};
//!
//! # fn main() -> gpusort_core::Result<()> {
//! let gpu = Gpu::new(&GpuOptions::default())?;
//! // 100 small sorts of 300 keys each, then a sum scan of the first region once it is sorted
//! let mut data: Vec<u32> = (0..30_000u32).map(|i| i.wrapping_mul(2_654_435_761) % 1000).collect();
//! let mut batch = Batch::default();
//! let sort = Work::Sort { key_type: KeyType::U32, descending: false };
//! let first = batch.add(sort, 0, 300, &[]);
//! for t in 1..100 {
//!     batch.add(sort, 300 * t, 300, &[]);
//! }
//! let scan = Work::Scan { key_type: KeyType::U32, op: ScanOp::Add, inclusive: true };
//! batch.add(scan, 0, 300, &[first]);
//! let want = gpusort_core::schedule::reference(&batch, &data);
//! Scheduler::new(&gpu)?.run_host(&gpu, &batch, &mut data)?;
//! assert_eq!(data, want);
//! # Ok(())
//! # }
//! ```

mod batch;
mod plan;
mod reference;
mod scheduler;
mod wgsl;

pub use batch::{
    scan_merges, sort_merges, workgroup_size, Batch, BatchTask, Mode, RunStats, Test, Work,
    CAPACITIES, MERGED_FROM_LEVELS, MERGED_SCAN_MAX, MERGED_SORT_MAX,
};
pub use reference::{reference, split};
pub use scheduler::{Recorded, Scheduler, DEFAULT_SPIN_LIMIT};
pub use wgsl::{global_networks, merged, own_networks};
