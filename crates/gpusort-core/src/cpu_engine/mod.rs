//! The CPU engine: gpusort's jobs on all cores, for machines whose only adapter is a software
//! one (lavapipe, WARP) or that have none, and wherever `--backend cpu` asks for it.
//!
//! It gives the results the GPU kernels give — the same order rules (NaN last in both
//! directions and canonical, -0.0 before +0.0, stable), the same wrapping scans, the same
//! stable splits, stencils bit-identical to their CPU twin — but is written for speed on a CPU
//! (a parallel MSD-then-LSD radix sort over the bits that vary, a counting sort for keys of few
//! distinct values, chunked integer scans and splits, row-vectorised stencils) with rayon.
//! Float sums are the one difference: added one element after another (NumPy's `cumsum`
//! order, the same bits on any number of threads), where the GPU adds in tiles.
//! The CPU twins in [`crate::reference`] stay the simple references; tests compare this engine with
//! them (`tests/cpu_engine.rs`).

mod halves;
mod runs;
mod scan;
mod simd;
mod sort;
mod stencil;

pub use halves::split_halves;
pub use runs::CpuRuns;
pub use scan::{scan, scan_in_one_pass, split, sum_widened};
pub use sort::{argsort, sort};
pub use stencil::run as stencil;

/// The threads the engine runs on (all cores unless `RAYON_NUM_THREADS` says otherwise).
pub fn threads() -> usize {
    rayon::current_num_threads()
}

/// Elements below which a job runs on one thread: splitting smaller work costs more than it
/// saves.
pub(crate) const SEQUENTIAL_BELOW: usize = 1 << 15;

/// Pieces for `n` elements: a few per thread, none below [`SEQUENTIAL_BELOW`].
fn chunk_len(n: usize) -> usize {
    let pieces = 4 * rayon::current_num_threads();
    n.div_ceil(pieces).max(SEQUENTIAL_BELOW)
}
