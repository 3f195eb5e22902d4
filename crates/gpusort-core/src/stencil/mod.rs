//! Stencils on 2-D and 3-D grids, in core and out of core (METHODS.md method 4).
//!
//! - `job.rs` — [`StencilJob`]: the grid ([`GridShape`]), the [`Stencil`] (taps, offset and
//!   weight, of a star, a box or a dense weights array, applied with `scipy.ndimage.correlate`'s
//!   semantics: no flipping, zero weights skipped as scipy skips them), the [`Boundary`]
//!   (scipy.ndimage's `constant`, `nearest`, `reflect`, `mirror` and `wrap`) and the steps.
//! - `choice.rs` — [`KernelChoice`]: how the steps run (one step a pass, one or four cells an
//!   invocation, or several steps a pass on chip: [`Blocking`]), per job and device.
//! - `wgsl.rs` — the WGSL: the shader families (`shaders/stencil*.wgsl`) with the job's
//!   constants and its taps unrolled.
//! - `kernel.rs` — [`StencilKernel`]: the compiled kernels of a job and the passes they record
//!   over a resident region; [`choose_kernel`] measures the candidates.
//! - `stream.rs` — [`run`]: the streamer. It follows a
//!   [`StencilPlan`](gpusort_sched::stencil::StencilPlan) from gpusort-sched: sub-blocks along the
//!   outermost axis; only each sub-block's new rows cross from the host, the overlap with the
//!   previous sub-block stays on the GPU; `T` steps per residency with the valid region shrinking
//!   by the radius each step (redundant halo work instead of exchanges); two staging slots so the
//!   CPU copies of one sub-block overlap the GPU work of the next. An in-core plan is the same
//!   loop with one sub-block and no halo, so both paths run identical per-cell arithmetic.
//!
//! Steps on a grid that lives on the GPU, bit-identical to the CPU twin:
//!
//! ```
//! use gpusort_core::device::transfer;
//! use gpusort_core::stencil::{Boundary, GridShape, Stencil, StencilJob, StencilKernel};
//! use gpusort_core::{reference, Gpu, GpuOptions, KeyType};
//!
//! # fn main() -> gpusort_core::Result<()> {
//! let gpu = Gpu::new(&GpuOptions::default())?;
//! let grid: Vec<f32> = (0..64 * 48).map(|i| (i % 17) as f32).collect();
//! let job = StencilJob {
//!     shape: GridShape::new(&[64, 48])?,
//!     stencil: Stencil::star(2, 2)?,
//!     boundary: Boundary::Wrap,
//!     cval: 0.0,
//!     steps: 3,
//!     dtype: KeyType::F32,
//! };
//! let kernel = StencilKernel::new(&gpu, &job)?;
//! let a = transfer::buffer_from(&gpu, "grid", &grid)?;
//! let b = transfer::storage_buffer(&gpu, "scratch grid", a.size())?;
//! let mut encoder = gpu.device.create_command_encoder(&Default::default());
//! let result = kernel.record_steps(&gpu, &mut encoder, &a, &b, job.steps)?;
//! gpu.queue.submit([encoder.finish()]);
//! let got: Vec<f32> = transfer::read_vec(&gpu, result, grid.len())?;
//! let want = reference::stencil::run(&grid, job.shape, &job.stencil, job.boundary, job.cval, job.steps);
//! assert_eq!(got, want);
//! # Ok(())
//! # }
//! ```

// Dependencies run down this list: a job, the uniform block, how a job's steps run, their WGSL,
// the compiled kernels, the streamer.
mod choice;
mod job;
mod kernel;
mod params;
mod stream;
mod wgsl;

pub use choice::{
    four_cells, Blocking, KernelChoice, StencilTuning, MAX_LANE_STEPS, MAX_PLANE_STEPS,
};
pub use job::{map_axis, Boundary, GridShape, Stencil, StencilJob, StencilValue, Tap, MAX_RADIUS};
pub use kernel::{choose_kernel, worth_measuring, StencilKernel};
pub(crate) use stream::wrapped_runs;
pub use stream::{apply, apply_into, apply_into_until, measure_speeds, run, StencilStats};
pub use wgsl::source;
