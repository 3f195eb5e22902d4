//! Stencils on 2-D and 3-D grids, in core and out of core (METHODS.md method 4).
//!
//! - [`Stencil`]: the taps (offset, weight) of a star, a box or a dense weights array, applied
//!   with `scipy.ndimage.correlate`'s semantics (no flipping; zero weights are skipped as scipy
//!   skips them).
//! - [`Boundary`]: scipy.ndimage's `constant`, `nearest`, `reflect`, `mirror` and `wrap`.
//! - [`StencilKernel`]: one Jacobi step over a resident region (`shaders/stencil.wgsl`).
//! - [`run`]: the streamer. It follows a [`StencilPlan`] from gpusort-sched: sub-blocks along the
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
//! use gpusort_core::{cpu, Gpu, GpuOptions, KeyType};
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
//! let want = cpu::stencil::run(&grid, job.shape, &job.stencil, job.boundary, job.cval, job.steps);
//! assert_eq!(got, want);
//! # Ok(())
//! # }
//! ```

use std::str::FromStr;
use std::time::Instant;

use gpusort_sched::stencil::{Speeds, StencilPlan, StencilProblem, SubBlock};

use crate::cpu::stencil::map_axis;
use crate::device::kernel::{self, Layout, ParamBlocks, Slot};
use crate::device::transfer::{self, StagingSlot};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::KeyType;

/// Largest radius gpusort accepts (the tap code is unrolled; a 3-D box of radius 8 has 4913 taps).
pub const MAX_RADIUS: u32 = 8;
const WG: u32 = 256;

/// Boundary handling, with scipy.ndimage's names and meanings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boundary {
    /// Outside values are a constant (`cval`).
    Constant,
    /// The nearest edge value: `a a a | a b c d | d d d`.
    Nearest,
    /// Half-sample symmetric: `d c b a | a b c d | d c b a`.
    Reflect,
    /// Whole-sample symmetric: `d c b | a b c d | c b a`.
    Mirror,
    /// Periodic: `a b c d | a b c d | a b c d`.
    Wrap,
}

impl Boundary {
    pub const NAMES: [&'static str; 5] = ["constant", "nearest", "reflect", "mirror", "wrap"];

    fn code(self) -> u32 {
        self as u32
    }
}

impl std::fmt::Display for Boundary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(Boundary::NAMES[self.code() as usize])
    }
}

impl FromStr for Boundary {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "constant" => Boundary::Constant,
            "nearest" => Boundary::Nearest,
            "reflect" => Boundary::Reflect,
            "mirror" => Boundary::Mirror,
            "wrap" => Boundary::Wrap,
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown boundary '{s}' (expected {})",
                    Boundary::NAMES.join(", ")
                )))
            }
        })
    }
}

/// A grid's shape, C order; the first axis is the streaming axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridShape {
    dims: usize,
    extents: [usize; 3],
}

impl GridShape {
    /// A 2-D (`[y, x]`) or 3-D (`[z, y, x]`) shape with no empty axis.
    pub fn new(extents: &[usize]) -> Result<GridShape> {
        if !(2..=3).contains(&extents.len()) {
            return Err(Error::InvalidInput(format!(
                "stencil grids are 2-D or 3-D; got {} axes",
                extents.len()
            )));
        }
        if extents.contains(&0) {
            return Err(Error::InvalidInput(format!(
                "grid shape {extents:?} has an empty axis"
            )));
        }
        // 2-D grids are seen as (rows, 1, x): the streaming axis stays first
        let e = match *extents {
            [y, x] => [y, 1, x],
            [z, y, x] => [z, y, x],
            _ => unreachable!("checked above: 2 or 3 axes"),
        };
        Ok(GridShape {
            dims: extents.len(),
            extents: e,
        })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The extents as given.
    pub fn extents(&self) -> Vec<usize> {
        match self.dims {
            2 => vec![self.extents[0], self.extents[2]],
            _ => self.extents.to_vec(),
        }
    }

    /// `[rows, ny, nx]`, with `ny = 1` for 2-D grids.
    pub fn as_3d(&self) -> [usize; 3] {
        self.extents
    }

    pub fn cells(&self) -> usize {
        self.extents.iter().product()
    }

    pub fn rows(&self) -> usize {
        self.extents[0]
    }

    pub fn row_cells(&self) -> usize {
        self.extents[1] * self.extents[2]
    }
}

impl std::fmt::Display for GridShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e: Vec<String> = self.extents().iter().map(|n| n.to_string()).collect();
        f.write_str(&e.join("x"))
    }
}

/// One tap: a neighbour's offset `[dz, dy, dx]` (`dy = 0` for 2-D) and its weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tap {
    pub offset: [i32; 3],
    pub weight: f64,
}

/// The taps of a stencil, in the order of its dense weights array (C order), zero weights left
/// out — the order both the kernel and the CPU twin sum in.
#[derive(Clone, Debug, PartialEq)]
pub struct Stencil {
    dims: usize,
    radius: u32,
    taps: Vec<Tap>,
}

impl Stencil {
    fn check(dims: usize, radius: u32) -> Result<()> {
        if !(2..=3).contains(&dims) {
            return Err(Error::InvalidInput(format!(
                "stencils are 2-D or 3-D, not {dims}-D"
            )));
        }
        if !(1..=MAX_RADIUS).contains(&radius) {
            return Err(Error::InvalidInput(format!(
                "radius must be between 1 and {MAX_RADIUS}, not {radius}"
            )));
        }
        Ok(())
    }

    /// The offset `[dz, dy, dx]` of element `i` of a dense `(2R+1)^dims` weights array (C order);
    /// 2-D offsets `(dy, dx)` become `(dz, 0, dx)`, as rows stay the streaming axis.
    fn offset_of(i: usize, dims: usize, radius: u32) -> [i32; 3] {
        let side = 2 * radius as usize + 1;
        let mut off = [0i32; 3];
        let mut rest = i;
        for d in (0..dims).rev() {
            off[d] = (rest % side) as i32 - radius as i32;
            rest /= side;
        }
        if dims == 2 {
            off = [off[0], 0, off[1]];
        }
        off
    }

    /// The dense weights of a `(2R+1)^dims` array in C order: 1 where `keep` says so.
    fn dense(dims: usize, radius: u32, keep: impl Fn([i32; 3]) -> bool) -> Vec<f64> {
        (0..(2 * radius as usize + 1).pow(dims as u32))
            .map(|i| f64::from(u8::from(keep(Stencil::offset_of(i, dims, radius)))))
            .collect()
    }

    /// Equal weights on the axes (a cross of `2·dims·R + 1` points) summing to 1.
    pub fn star(dims: usize, radius: u32) -> Result<Stencil> {
        Stencil::check(dims, radius)?;
        let mut w = Stencil::dense(dims, radius, |o| o.iter().filter(|&&d| d != 0).count() <= 1);
        let n = (2 * dims as u32 * radius + 1) as f64;
        w.iter_mut().for_each(|x| *x /= n);
        Stencil::from_weights(dims, radius, &w)
    }

    /// Equal weights on the whole `(2R+1)^dims` box, summing to 1.
    pub fn boxed(dims: usize, radius: u32) -> Result<Stencil> {
        Stencil::check(dims, radius)?;
        let mut w = Stencil::dense(dims, radius, |_| true);
        let n = w.len() as f64;
        w.iter_mut().for_each(|x| *x /= n);
        Stencil::from_weights(dims, radius, &w)
    }

    /// A dense `(2R+1)^dims` weights array in C order (scipy.ndimage.correlate's `weights`).
    pub fn from_weights(dims: usize, radius: u32, weights: &[f64]) -> Result<Stencil> {
        Stencil::check(dims, radius)?;
        let side = 2 * radius as usize + 1;
        if weights.len() != side.pow(dims as u32) {
            return Err(Error::InvalidInput(format!(
                "a radius-{radius} {dims}-D stencil needs {} weights, got {}",
                side.pow(dims as u32),
                weights.len()
            )));
        }
        if let Some(bad) = weights.iter().find(|w| !w.is_finite()) {
            return Err(Error::InvalidInput(format!(
                "stencil weights must be finite, found {bad}"
            )));
        }
        let taps = weights
            .iter()
            .enumerate()
            .filter(|(_, &w)| w != 0.0)
            .map(|(i, &w)| Tap {
                offset: Stencil::offset_of(i, dims, radius),
                weight: w,
            })
            .collect();
        Ok(Stencil { dims, radius, taps })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn radius(&self) -> u32 {
        self.radius
    }

    pub fn taps(&self) -> &[Tap] {
        &self.taps
    }

    /// Largest |offset| per axis of the 3-D view.
    fn reach(&self) -> [i32; 3] {
        let mut r = [0; 3];
        for t in &self.taps {
            for (r, o) in r.iter_mut().zip(t.offset) {
                *r = (*r).max(o.abs());
            }
        }
        r
    }
}

/// Grid cell types: f32, and f64 where the device has SHADER_F64.
pub trait StencilValue:
    bytemuck::Pod + Send + Sync + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self>
{
    const TYPE: KeyType;
    fn from_f64(v: f64) -> Self;
}

impl StencilValue for f32 {
    const TYPE: KeyType = KeyType::F32;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl StencilValue for f64 {
    const TYPE: KeyType = KeyType::F64;
    fn from_f64(v: f64) -> Self {
        v
    }
}

/// Everything that fixes a stencil job's kernel and results.
#[derive(Clone, Debug, PartialEq)]
pub struct StencilJob {
    pub shape: GridShape,
    pub stencil: Stencil,
    pub boundary: Boundary,
    /// The outside value of `Boundary::Constant`.
    pub cval: f64,
    pub steps: u32,
    pub dtype: KeyType,
}

impl StencilJob {
    /// Check the job against itself (the device is checked by [`StencilKernel::new`]).
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.dtype, KeyType::F32 | KeyType::F64) {
            return Err(Error::InvalidInput(format!(
                "stencil grids hold f32 or f64, not {}",
                self.dtype
            )));
        }
        if self.stencil.dims != self.shape.dims {
            return Err(Error::InvalidInput(format!(
                "a {}-D stencil cannot run on the {}-D grid {}",
                self.stencil.dims, self.shape.dims, self.shape
            )));
        }
        if self.steps == 0 {
            return Err(Error::InvalidInput("--steps must be at least 1".into()));
        }
        if !self.cval.is_finite() {
            return Err(Error::InvalidInput(format!(
                "the constant boundary value must be finite, not {}",
                self.cval
            )));
        }
        for (axis, &n) in self.shape.extents().iter().enumerate() {
            if self.stencil.radius as usize > n {
                return Err(Error::InvalidInput(format!(
                    "radius {} is larger than the grid {} (axis {axis} has {n} cells)",
                    self.stencil.radius, self.shape
                )));
            }
        }
        Ok(())
    }

    pub fn cell_bytes(&self) -> u64 {
        self.dtype.size() as u64
    }

    pub fn row_bytes(&self) -> u64 {
        self.shape.row_cells() as u64 * self.cell_bytes()
    }

    /// The problem as the planner sees it.
    pub fn problem(&self) -> StencilProblem {
        StencilProblem {
            rows: self.shape.rows() as u64,
            row_cells: self.shape.row_cells() as u64,
            cell_bytes: self.cell_bytes(),
            radius: self.stencil.radius as u64,
            steps: self.steps as u64,
            periodic: self.boundary == Boundary::Wrap,
        }
    }
}

/// A WGSL literal of type `T` for `v` (exact: shortest round-trip digits of the f64, which for an
/// f32 weight converts back to the same f32).
fn literal(v: f64) -> String {
    format!("T({v:?})")
}

/// Stencils of up to this many taps get unrolled code; wider ones loop over a tap table.
const UNROLL_TAPS: usize = 32;

/// Planes of a streamed pass's ring per level: level s trails level s-1 by `RB + RZ` planes and
/// reads `RB + 2·RZ` of them while `RB` more are written (stencil_vec.wgsl).
fn ring_depth(job: &StencilJob, planes: u32) -> u32 {
    2 * planes + 2 * job.stencil.reach()[0] as u32
}

/// Whether a job's single steps run four cells per invocation (`step4` in
/// `shaders/stencil_vec.wgsl`): f32 grids (four f64 cells are a 32-byte load, and one cell per
/// invocation measured twice as fast for f64 on an H100: docs/BENCHMARKS.md), rows of a multiple
/// of 4 cells (every row starts on a vec4), and an unrolled tap list or a full box (whose tap
/// rows `step4` loops over, see `loop4_rows`).
pub fn four_cells(job: &StencilJob) -> bool {
    job.dtype == KeyType::F32
        && job.shape.as_3d()[2].is_multiple_of(4)
        && (unrolled(job) || full_box(job))
}

/// Whether a job's taps are few enough to unroll (every kernel but the single steps of wider
/// stencils loops over a table then); passes of K steps need them unrolled.
fn unrolled(job: &StencilJob) -> bool {
    job.stencil.taps().len() <= UNROLL_TAPS
}

/// Whether the taps fill the box of the stencil's reach: every tap row (dz, dy) then has the same
/// taps along x, and tap k sits at index ((dz + RZ)·(2·RY + 1) + dy + RY)·(2·RX + 1) + dx + RX.
fn full_box(job: &StencilJob) -> bool {
    let cells: i32 = job.stencil.reach().iter().map(|r| 2 * r + 1).product();
    job.stencil.taps().len() == cells as usize
}

/// The most steps a pass in registers ([`Blocking::lanes`]) takes.
pub const MAX_LANE_STEPS: u32 = 8;

/// The most steps a pass in registers takes on a 3-D grid (`steps_planes`).
pub const MAX_PLANE_STEPS: u32 = 4;

/// Workgroup sizes and rows an invocation of `steps_planes`, in the order [`Blocking::lanes`]
/// (and so [`KernelChoice::for_device`]) tries them, the first that fits: tiles of 32 rows
/// (1024 invocations of one row, or 512 of two; with K = 3, 26 of the 32 rows are output) ran at
/// 1.5x the single step on the H200, tiles of 16 rows at 1.38x (docs/BENCHMARKS.md).
const PLANE_SHAPES: [(u32, u32); 5] = [(1024, 1), (512, 2), (512, 1), (256, 2), (256, 1)];

/// Invocations per workgroup of `steps_lanes`: a whole number of subgroups of any size a device
/// may have (4..=128).
const LANES_WG: u32 = 128;

/// Lanes at each side of a `steps_lanes` strip whose cells K steps cannot compute.
fn lane_halo(job: &StencilJob, steps: u32) -> u32 {
    (steps * job.stencil.reach()[2] as u32).div_ceil(4)
}

/// The x reach of a stencil in vec4s of cells.
fn reach_vec4(job: &StencilJob) -> u32 {
    (job.stencil.reach()[2] as u32).div_ceil(4)
}

/// The shape of a streamed pass (`steps_streamed` in `shaders/stencil_vec.wgsl`): K steps per
/// pass, each workgroup owning a tile of the (y, x) plane — halos of K reaches per side included
/// — and walking down a chunk of rows with a ring of planes per level in workgroup memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocking {
    /// Steps per pass (K).
    pub steps: u32,
    /// Tile rows along y (1 for 2-D grids) and columns in vec4s of cells, halos included. For
    /// `steps_planes` ([`Blocking::is_planes`]): the rows of the plane each invocation holds,
    /// and unused.
    pub tile_rows: u32,
    pub tile_vec4s: u32,
    /// Planes every level advances per iteration (per barrier); 1 for `steps_planes`.
    pub planes: u32,
    /// Invocations per workgroup (of `steps_planes` itself where it runs).
    pub workgroup: u32,
    /// K steps in registers: on 2-D grids the workgroups wholly inside the grid run
    /// `steps_lanes` (neighbours along x through subgroup shuffles) instead of
    /// `steps_interior`, the tile above being the general kernel's, for the edges; on 3-D grids
    /// `steps_planes` runs the whole grid. Devices with subgroups only.
    pub lanes: bool,
}

impl Blocking {
    /// The tile for K = `steps` that fits `workgroup_bytes` and wastes the least on halos; None
    /// where the job cannot stream (rows not a multiple of 4 cells, a tap list too long to
    /// unroll, K outside 1..=4) or no tile keeps at least 40% of its cells as output. K = 1 is a
    /// single step that reads every input plane once (the planes a tap reaches stay on chip).
    pub fn choose(job: &StencilJob, workgroup_bytes: u32, steps: u32) -> Option<Blocking> {
        if !four_cells(job) || !unrolled(job) || !(1..=4).contains(&steps) {
            return None;
        }
        let [_, ry, _] = job.stencil.reach();
        let hy = ry as u32 * steps;
        let hg = reach_vec4(job) * steps;
        let vec4_bytes = 4 * job.cell_bytes() as u32;
        // a 2-D plane is one row: four of them per barrier; a 3-D plane is work enough
        let planes = if job.shape.dims() == 2 { 4 } else { 1 };
        let max_plane = workgroup_bytes / (steps * ring_depth(job, planes) * vec4_bytes);
        let [_, ny, nx] = job.shape.as_3d();
        let mut best: Option<(f64, Blocking)> = None;
        let rows: Vec<u32> = if job.shape.dims() == 2 {
            vec![1]
        } else {
            (2 * hy + 1..=64).collect()
        };
        for &ty in &rows {
            for lw4 in [8u32, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256] {
                let plane = ty * lw4;
                let Some(workgroup) = Blocking::workgroup_for(plane * planes) else {
                    continue;
                };
                if plane > max_plane || lw4 <= 2 * hg {
                    continue;
                }
                // output cells per tile cell, counting only what a grid this size can use
                let out_y = (ty - 2 * hy).min(ny as u32);
                let out_x = (lw4 - 2 * hg).min(nx as u32 / 4);
                let useful = f64::from(out_y * out_x) / f64::from(plane);
                let b = Blocking {
                    steps,
                    tile_rows: ty,
                    tile_vec4s: lw4,
                    planes,
                    workgroup,
                    lanes: false,
                };
                // ties go to the larger plane (more work per barrier)
                if useful >= 0.4
                    && best.is_none_or(|(u, o)| {
                        useful > u + 1e-9
                            || (useful > u - 1e-9 && plane > o.tile_rows * o.tile_vec4s)
                    })
                {
                    best = Some((useful, b));
                }
            }
        }
        best.map(|(_, b)| b)
    }

    /// K steps a pass in registers (`steps_lanes`, [`Blocking::lanes`]) for K = `steps`,
    /// 1..=[`MAX_LANE_STEPS`]: each subgroup streams a strip of one vec4 column per lane down a
    /// chunk of rows, the rows each tap reaches in registers and the neighbours along x from the
    /// neighbouring lanes, so a level costs no workgroup memory and no barrier. It runs the
    /// workgroups wholly inside the grid; the edges run the general streamed kernel (on the tile
    /// chosen here: the width that makes its work least, whole rows of tiles at the grid's two
    /// ends against a tile at each side of every chunk).
    /// None where the job is not a 2-D f32 grid of rows of a multiple of 4 cells with at most 32
    /// taps, the device has no subgroups, or its narrowest subgroup is too narrow for the halo of
    /// K steps (2·ceil(K·RX / 4) lanes must leave one lane of output).
    pub fn lanes(gpu: &Gpu, job: &StencilJob, steps: u32) -> Option<Blocking> {
        if job.shape.dims() == 3 {
            return PLANE_SHAPES
                .into_iter()
                .map(|(w, rows)| Blocking::planes(steps, w, rows))
                .find(|b| b.planes_fit(gpu, job));
        }
        let sub = gpu.subgroups()?;
        if !four_cells(job)
            || !unrolled(job)
            || job.shape.dims() != 2
            || !(1..=MAX_LANE_STEPS).contains(&steps)
            || 2 * lane_halo(job, steps) >= sub.min_size
        {
            return None;
        }
        let planes = 4;
        let hg = reach_vec4(job) * steps;
        let vec4_bytes = 4 * job.cell_bytes() as u32;
        let bytes = gpu.limits.max_compute_workgroup_storage_size;
        // The general kernel's work, in tile vec4s a row: the chunks at the grid's two ends run
        // whole rows of tiles, each computing lw4 vec4s for lw4 - 2·hg of output; every chunk
        // runs a tile at each side of the box. Narrow tiles waste the first, wide the second.
        let [rows, _, nx] = job.shape.as_3d();
        let chunks = rows as f64 / (4 * steps * job.stencil.reach()[0] as u32).max(1) as f64;
        let cost = |lw4: u32| {
            let ends = 2.0 * (nx / 4) as f64 * f64::from(lw4) / f64::from(lw4 - 2 * hg);
            ends + 2.0 * chunks * f64::from(lw4)
        };
        [8u32, 12, 16, 24, 32, 48, 64]
            .into_iter()
            .filter(|&lw4| lw4 > 2 * hg)
            .filter(|&lw4| steps * ring_depth(job, planes) * lw4 * vec4_bytes <= bytes)
            .filter_map(|lw4| {
                Some(Blocking {
                    steps,
                    tile_rows: 1,
                    tile_vec4s: lw4,
                    planes,
                    workgroup: Blocking::workgroup_for(planes * lw4)?,
                    lanes: true,
                })
            })
            .min_by(|a, b| cost(a.tile_vec4s).total_cmp(&cost(b.tile_vec4s)))
    }

    /// K steps a pass on a 3-D grid in registers (`steps_planes`, [`Blocking::lanes`]) with
    /// workgroups of `workgroup` invocations, each holding `rows` rows of the plane (1 or 2);
    /// [`Blocking::planes_fit`] says whether a job and a device can run it.
    pub fn planes(steps: u32, workgroup: u32, rows: u32) -> Blocking {
        Blocking {
            steps,
            tile_rows: rows,
            tile_vec4s: 0,
            planes: 1,
            workgroup,
            lanes: true,
        }
    }

    /// Every `steps_planes` blocking that fits `job` on `gpu`: K = 1..=4 in every workgroup
    /// shape (for the bench and the tests).
    pub fn plane_shapes(gpu: &Gpu, job: &StencilJob) -> Vec<Blocking> {
        (1..=MAX_PLANE_STEPS)
            .flat_map(|k| {
                PLANE_SHAPES
                    .into_iter()
                    .map(move |(w, rows)| Blocking::planes(k, w, rows))
            })
            .filter(|b| b.planes_fit(gpu, job))
            .collect()
    }

    /// Whether this blocking is `steps_planes` (3-D grids in registers): it then runs the whole
    /// grid, edges included; `tile_rows` holds the rows an invocation holds, `tile_vec4s` is
    /// unused.
    pub fn is_planes(&self, job: &StencilJob) -> bool {
        self.lanes && job.shape.dims() == 3
    }

    /// Whether `steps_planes` with this blocking's K and workgroup runs `job` on `gpu`: subgroups
    /// (a tile row each) wider than the x halo and whose widest leaves a tile row of output, a
    /// boundary other than `wrap` (its mirrored cells lie in the tile: not so for periodic
    /// ones), f32 rows of at least 3 vec4s with at most 32 taps, extents past twice the reach,
    /// and the planes other rows read within the device's workgroup memory.
    pub fn planes_fit(&self, gpu: &Gpu, job: &StencilJob) -> bool {
        let Some(sub) = gpu.subgroups() else {
            return false;
        };
        let [nz, ny, nx] = job.shape.as_3d();
        let [rz, ry, _] = job.stencil.reach().map(|r| r as usize);
        let w = self.workgroup;
        let bytes = self.plane_bytes(job);
        self.is_planes(job)
            && four_cells(job)
            && unrolled(job)
            && job.boundary != Boundary::Wrap
            && (1..=MAX_PLANE_STEPS).contains(&self.steps)
            && 2 * lane_halo(job, self.steps) < sub.min_size
            && w.is_multiple_of(sub.max_size)
            && w <= gpu.limits.max_compute_invocations_per_workgroup
            && (1..=2).contains(&self.tile_rows)
            && w / sub.max_size * self.tile_rows > 2 * self.steps * ry as u32
            && bytes <= gpu.limits.max_compute_workgroup_storage_size as u64
            && nz > 2 * rz
            && ny > 2 * ry
            && nx / 4 >= 3
    }

    /// Workgroup memory of one buffer of `steps_planes`: K levels' planes that other rows read.
    fn plane_bytes(&self, job: &StencilJob) -> u64 {
        self.steps as u64
            * shared_planes(job).len().max(1) as u64
            * self.workgroup as u64
            * self.tile_rows as u64
            * 4
            * job.cell_bytes()
    }

    /// Buffers of `steps_planes`' workgroup memory: two where they fit in `workgroup_bytes`
    /// (one barrier an iteration instead of two), else one.
    fn plane_buffers(&self, job: &StencilJob, workgroup_bytes: u32) -> u32 {
        if 2 * self.plane_bytes(job) <= workgroup_bytes as u64 {
            2
        } else {
            1
        }
    }

    /// Rows per chunk of `steps_planes` in a pass over `p`, and the workgroups to dispatch, for
    /// subgroups of `lanes` (the device's narrowest: the most tiles; the kernel loops over
    /// whatever is left): chunks long enough that their K·(2·RZ + 1) planes of warm-up stay
    /// within about a twelfth, and about 1024 (chunk, tile) items.
    fn plane_work(&self, job: &StencilJob, p: &StepParams, lanes: u32) -> (i64, u64) {
        let [_, ny, nx] = job.shape.as_3d();
        let rows = p.comp_rows.max(0) as i64;
        if rows == 0 {
            return (1, 0);
        }
        let up = |a: i64, b: i64| (a + b - 1) / b;
        let strips = up(
            nx as i64 / 4,
            (lanes - 2 * lane_halo(job, self.steps)) as i64,
        );
        let out_h = (self.workgroup / lanes * self.tile_rows) as i64
            - 2 * (self.steps * job.stencil.reach()[1] as u32) as i64;
        let tiles = strips * up(ny as i64, out_h.max(1));
        let warm = self.steps as i64 * (2 * job.stencil.reach()[0] as i64 + 1);
        let len = (12 * warm).max(up(rows * tiles, 1024)).clamp(1, rows);
        // chunks of equal length: no short last chunk running beside full ones
        let len = up(rows, up(rows, len));
        (len, (up(rows, len) * tiles) as u64)
    }

    /// The fastest blocking for K = `steps` this device can run without measuring: in
    /// registers ([`Blocking::lanes`]) where it can, else through workgroup memory
    /// ([`Blocking::choose`]).
    pub fn for_device(gpu: &Gpu, job: &StencilJob, steps: u32) -> Option<Blocking> {
        Blocking::lanes(gpu, job, steps)
            .or_else(|| Blocking::choose(job, gpu.limits.max_compute_workgroup_storage_size, steps))
    }

    /// Every blocking worth measuring for `job` on `gpu`: [`Blocking::candidates`], and the
    /// blockings in registers where the device has them: K = 2, 3, 4, 6 and 8 on 2-D grids,
    /// K = 2..=4 on 3-D grids in the first workgroup shape that fits ([`Blocking::lanes`]; the
    /// measuring of `choose_kernel` compiles each candidate: [`Blocking::plane_shapes`] has them
    /// all).
    pub fn device_candidates(gpu: &Gpu, job: &StencilJob) -> Vec<Blocking> {
        let mut all = Blocking::candidates(job, gpu.limits.max_compute_workgroup_storage_size);
        if job.shape.dims() == 3 {
            // not K = 1: as a single step it lost to `step4` for every 3-D stencil measured
            all.extend((2..=MAX_PLANE_STEPS).filter_map(|k| Blocking::lanes(gpu, job, k)));
            return all;
        }
        all.extend(
            [2, 3, 4, 6, 8]
                .into_iter()
                .filter_map(|k| Blocking::lanes(gpu, job, k)),
        );
        all
    }

    /// Rows per strip of `steps_lanes` in a pass over `p` (its interior box filled in), and the
    /// workgroups to dispatch, for subgroups of `lanes` (the device's narrowest: more strips than
    /// wider ones give; the kernel loops over whatever is left). Strips are long enough that their
    /// K·(2·RZ + 2) iterations beyond their rows stay within an eighth, and about 16384 of them
    /// spread over the device.
    fn lane_work(&self, job: &StencilJob, p: &StepParams, lanes: u32) -> (i64, u64) {
        let [c_lo, c_hi, _, _, x_lo, x_hi] = p.interior.map(|v| v as i64);
        let chunk = p.chunk.max(1) as i64;
        let r0 = p.comp_lo as i64 + c_lo * chunk;
        let r1 = (p.comp_lo as i64 + c_hi * chunk).min((p.comp_lo + p.comp_rows) as i64);
        let width = (x_hi - x_lo) * self.output(job).1;
        if r1 <= r0 || width <= 0 {
            return (1, 0);
        }
        let out = (lanes - 2 * lane_halo(job, self.steps)) as i64;
        let strips = (width + out - 1) / out;
        let warm = (self.steps as i64) * (2 * job.stencil.reach()[0] as i64 + 2);
        let rows = r1 - r0;
        let len = (8 * warm)
            .max((rows * strips + 16383) / 16384)
            .clamp(1, rows);
        let items = ((rows + len - 1) / len * strips) as u64;
        (len, (items * lanes as u64).div_ceil(LANES_WG as u64))
    }

    /// Invocations per workgroup for `work` vec4s an iteration (planes × tile plane): a whole
    /// number of 32-wide waves that divides it, at most 256, so that each invocation owns the
    /// same vec4s in every iteration; None where there is none.
    fn workgroup_for(work: u32) -> Option<u32> {
        (1..=work / 32)
            .map(|per| work / per)
            .find(|&w| w <= 256 && w % 32 == 0 && work.is_multiple_of(w))
    }

    /// Every streamed shape worth measuring for `job`: K = 1..=4 where a tile fits.
    pub fn candidates(job: &StencilJob, workgroup_bytes: u32) -> Vec<Blocking> {
        (1..=4)
            .filter_map(|k| Blocking::choose(job, workgroup_bytes, k))
            .collect()
    }

    fn halo_rows(&self, job: &StencilJob) -> u32 {
        job.stencil.reach()[1] as u32 * self.steps
    }

    fn halo_vec4s(&self, job: &StencilJob) -> u32 {
        reach_vec4(job) * self.steps
    }

    /// Tiles across the (y, x) plane.
    fn tiles(&self, job: &StencilJob) -> u64 {
        let (rows, cols) = self.tile_grid(job);
        (rows * cols) as u64
    }

    /// Output rows per workgroup for a pass computing `comp_rows` rows: enough workgroups to
    /// fill any current GPU (about 2048), with chunks long enough that the K·(2·RZ + 1) planes
    /// of warm-up (K·(2·RZ + RB)) stay within an eighth of the work.
    /// In registers ([`Blocking::lanes`]) the general kernel runs only the edges, and chunks of
    /// 4·K·RZ rows (up to 6·K·RZ, see below) keep the rows next to the grid's ends that it runs
    /// few.
    fn chunk_rows(&self, job: &StencilJob, comp_rows: u64) -> u64 {
        if self.is_planes(job) {
            return comp_rows.max(1);
        }
        if self.lanes {
            // a last chunk shorter than K·RZ rows would push the one before it out of the
            // interior box too (its halo past the grid's end): a little longer chunks instead
            let kr = (self.steps as u64 * job.stencil.reach()[0] as u64).max(1);
            let chunk = (4 * kr..=6 * kr)
                .find(|c| comp_rows.is_multiple_of(*c) || comp_rows % c >= kr)
                .unwrap_or(4 * kr);
            return chunk.clamp(1, comp_rows.max(1));
        }
        let warm = self.steps as u64 * (2 * job.stencil.reach()[0] as u64 + self.planes as u64);
        let spread = (comp_rows * self.tiles(job)).div_ceil(2048);
        spread.max(8 * warm).clamp(1, comp_rows.max(1))
    }

    /// Workgroups of a pass computing `comp_rows` rows.
    fn workgroups(&self, job: &StencilJob, comp_rows: u64) -> u64 {
        comp_rows.div_ceil(self.chunk_rows(job, comp_rows)) * self.tiles(job)
    }

    /// A tile's output rows and vec4 columns (the tile less its halos).
    fn output(&self, job: &StencilJob) -> (i64, i64) {
        (
            (self.tile_rows - 2 * self.halo_rows(job)) as i64,
            (self.tile_vec4s - 2 * self.halo_vec4s(job)) as i64,
        )
    }

    /// Tile rows and columns across the plane.
    fn tile_grid(&self, job: &StencilJob) -> (i64, i64) {
        let [_, ny, nx] = job.shape.as_3d();
        let (oy, og) = self.output(job);
        ((ny as i64 + oy - 1) / oy, ((nx / 4) as i64 + og - 1) / og)
    }

    /// The box of workgroups (chunks, tile rows, tile columns; [lo, hi) each) whose tiles and
    /// rows, halos included, lie inside the grid and the resident rows: `steps_interior` runs
    /// them without any boundary code.
    fn interior(&self, job: &StencilJob, p: &StepParams) -> [i32; 6] {
        let [_, ny, nx] = job.shape.as_3d();
        let (hy, hg) = (self.halo_rows(job) as i64, self.halo_vec4s(job) as i64);
        let (ty_n, tx_n) = self.tile_grid(job);
        let (oy, og) = self.output(job);
        // tile t starts at t·o - h and spans `span`: inside [0, n) for t in [lo, hi)
        let inside = |o: i64, h: i64, span: i64, n: i64, tiles: i64| -> (i64, i64) {
            let lo = (h + o - 1) / o;
            let hi = if n - span + h < 0 {
                0
            } else {
                (n - span + h) / o + 1
            };
            (lo.min(tiles), hi.clamp(lo.min(tiles), tiles))
        };
        let (ty_lo, ty_hi) = inside(oy, hy, self.tile_rows as i64, ny as i64, ty_n);
        let (tx_lo, tx_hi) = inside(og, hg, self.tile_vec4s as i64, nx as i64 / 4, tx_n);
        // chunks whose input rows, K·RZ beyond their output, are resident grid rows
        let kr = self.steps as i64 * job.stencil.reach()[0] as i64;
        let chunk = p.chunk.max(1) as i64;
        let chunks = (p.comp_rows as i64 + chunk - 1) / chunk;
        let ok = |c: i64| {
            let z_lo = p.comp_lo as i64 + c * chunk;
            let z_hi = (z_lo + chunk).min((p.comp_lo + p.comp_rows) as i64);
            let (first, last) = (z_lo - kr, z_hi - 1 + kr);
            first >= 0
                && last < p.res_rows as i64
                && first + p.res_lo as i64 >= 0
                && last + (p.res_lo as i64) < p.rows as i64
        };
        let c_lo = (0..chunks).find(|&c| ok(c)).unwrap_or(chunks);
        let c_hi = (c_lo..chunks).find(|&c| !ok(c)).unwrap_or(chunks);
        [c_lo, c_hi, ty_lo, ty_hi, tx_lo, tx_hi].map(|v| v as i32)
    }
}

/// How a job's steps run on the GPU; every choice gives the same result bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelChoice {
    /// Rows (along the grid's first axis) of four cells that each invocation of a single step
    /// computes, 1..=8, where [`four_cells`] allows four cells; loads shared between the rows.
    pub rows: u32,
    /// K steps a pass, streamed through workgroup memory.
    pub blocking: Option<Blocking>,
    /// Two neighbouring cells along x an invocation of the one-cell single step (`step2`), the
    /// taps both read loaded once: for grids whose cells run one an invocation (f64, rows not a
    /// multiple of 4 cells, or the bench's one-cell kernel) with rows of an even number of cells
    /// and at most 32 taps; ignored elsewhere.
    pub pairs: bool,
    /// Rows of the (y, x) plane that one workgroup of a four-cell single step covers on a 3-D
    /// grid: 1 runs each workgroup along x; 2..=32 (a power of two) a patch of that many rows,
    /// so the taps in neighbouring rows come from loads of the same workgroup. Ignored on 2-D
    /// grids and where cells run one per invocation.
    pub plane_rows: u32,
}

impl Default for KernelChoice {
    /// Two rows per invocation, one step per pass: two rows halve the loads of every tap in
    /// another row at no cost in registers worth measuring (one and two rows, every stencil of
    /// docs/BENCHMARKS.md, H100); more rows and streamed passes are for [`choose_kernel`] to
    /// measure. On 3-D grids a workgroup covers 8 rows of the plane: faster than workgroups
    /// along x for every 3-D stencil on the H100 and the H200 (docs/BENCHMARKS.md).
    fn default() -> Self {
        KernelChoice {
            rows: 2,
            blocking: None,
            plane_rows: 8,
            pairs: false,
        }
    }
}

impl KernelChoice {
    /// The choice for `job` without measuring it: [`KernelChoice::default`], but four rows per
    /// invocation for 2-D stars reaching three or more rows each way. One tap a row leaves the
    /// registers for four rows, and sharing their tap rows then pays on both cards measured
    /// (H100 3–4%, H200 8–12% faster); four rows lose on the H100 for radius 1–2 and 2-D boxes
    /// and on the H200 for the 3-D box (docs/BENCHMARKS.md).
    pub fn for_job(job: &StencilJob) -> KernelChoice {
        let rows = tap_rows(job);
        let one_tap_a_row = rows.iter().filter(|&&r| r != (0, 0)).all(|&(dz, dy)| {
            job.stencil
                .taps()
                .iter()
                .filter(|t| (t.offset[0], t.offset[1]) == (dz, dy))
                .count()
                == 1
        });
        if job.stencil.dims == 2 && job.stencil.radius >= 3 && one_tap_a_row {
            KernelChoice {
                rows: 4,
                ..KernelChoice::default()
            }
        } else {
            KernelChoice::default()
        }
    }
}

/// Steps a pass in registers that `gpusort tune` measured fastest on a device, for the
/// stencils whose default [`KernelChoice::for_device`] sets; `None` keeps the default. Any
/// value gives the same results: only the speed depends on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct Tuning {
    /// K for 2-D stencils of at most 9 taps reaching one row each way (3-row windows; 1: one
    /// step a pass), 1..=[`MAX_LANE_STEPS`].
    pub lanes_3_rows: Option<u32>,
    /// The same for those reaching two rows each way (5-row windows).
    pub lanes_5_rows: Option<u32>,
    /// K (1: one step a pass, else 2..=[`MAX_PLANE_STEPS`]), workgroup size and rows an
    /// invocation of `steps_planes` for 3-D stencils of at most 7 taps within one cell.
    pub planes_r1: Option<[u32; 3]>,
}

impl Tuning {
    /// Whether every value lies in the range the kernels take.
    pub fn checked(&self) -> Result<()> {
        let lanes = |k: Option<u32>| k.is_none_or(|k| (1..=MAX_LANE_STEPS).contains(&k));
        // K = 1 ignores the shape
        let planes = self.planes_r1.is_none_or(|[k, w, rows]| {
            k == 1 || ((2..=MAX_PLANE_STEPS).contains(&k) && PLANE_SHAPES.contains(&(w, rows)))
        });
        if lanes(self.lanes_3_rows) && lanes(self.lanes_5_rows) && planes {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "stencil tuning {self:?} out of range"
            )))
        }
    }
}

impl KernelChoice {
    /// The choice for `job` on `gpu` without measuring it: [`KernelChoice::for_job`], with K
    /// steps a pass in registers ([`Blocking::lanes`]) for 2-D stencils of at most 9 taps whose
    /// windows of rows stay within 64 registers a level stack (K = 4 for 3-row windows, 3 for
    /// 5-row ones), where the job has K steps or more. Those doubled the single step's rate
    /// per step or came within a few percent of 1.5x; wider stencils (more shuffles and
    /// registers per level) gained little or lost (docs/BENCHMARKS.md). On 3-D grids, three
    /// steps a pass in registers (`steps_planes`) for stencils of at most 7 taps within one
    /// cell each way (the radius-1 star: 1.5x the single step); wider 3-D stencils lost.
    /// [`choose_kernel`] measures every K for jobs large enough to pay for it.
    pub fn for_device(gpu: &Gpu, job: &StencilJob) -> KernelChoice {
        KernelChoice::for_device_tuned(gpu, job, &Tuning::default())
    }

    /// [`KernelChoice::for_device`] with the steps a pass `tuning` measured on this device in
    /// place of the defaults, where it has them.
    pub fn for_device_tuned(gpu: &Gpu, job: &StencilJob, tuning: &Tuning) -> KernelChoice {
        let base = KernelChoice::for_job(job);
        if job.shape.dims() == 3 {
            // 3-D stencils within one cell each way of at most 7 taps (the radius-1 star): three
            // steps a pass in registers, the only 3-D blocking measured at 1.5x the single step
            if job.stencil.taps().len() > 7 || job.stencil.reach() != [1, 1, 1] {
                return base;
            }
            let blocking = match tuning.planes_r1 {
                Some([k, w, rows]) => {
                    Some(Blocking::planes(k, w, rows)).filter(|b| k >= 2 && b.planes_fit(gpu, job))
                }
                None => Blocking::lanes(gpu, job, 3),
            };
            return KernelChoice {
                blocking: blocking.filter(|b| job.steps >= b.steps),
                ..base
            };
        }
        if job.stencil.taps().len() > 9 || job.shape.dims() != 2 {
            return base;
        }
        let window = 2 * job.stencil.reach()[0] as u32 + 1;
        let tuned = match window {
            3 => tuning.lanes_3_rows,
            5 => tuning.lanes_5_rows,
            _ => None,
        };
        let Some(k) = tuned.or_else(|| (1..=4).rev().find(|k| k * window * 4 <= 64)) else {
            return base;
        };
        match Blocking::lanes(gpu, job, k) {
            Some(b) if k >= 2 && job.steps >= k => KernelChoice {
                blocking: Some(b),
                ..base
            },
            _ => base,
        }
    }
}

/// Replace every line that holds only `marker` with `code`, indented as the marker was.
fn fill(text: &str, marker: &str, code: &str) -> String {
    let mut out = String::with_capacity(text.len() + code.len());
    for line in text.split_inclusive('\n') {
        if line.trim() == marker {
            let indent = &line[..line.len() - line.trim_start().len()];
            for l in code.lines() {
                out.push_str(indent);
                out.push_str(l);
                out.push('\n');
            }
        } else {
            out.push_str(line);
        }
    }
    out
}

/// The WGSL names of a vec4's components.
const COMP: [char; 4] = ['x', 'y', 'z', 'w'];

/// The distinct tap rows `(dz, dy)` of a stencil, in tap order.
fn tap_rows(job: &StencilJob) -> Vec<(i32, i32)> {
    let mut rows = Vec::new();
    for t in job.stencil.taps() {
        let [dz, dy, _] = t.offset;
        if !rows.contains(&(dz, dy)) {
            rows.push((dz, dy));
        }
    }
    rows
}

/// Four cells in each of `mz` consecutive rows (the z of the 3-D view), from vec4 loads that each
/// row's taps share: `load(dz, dy, m)` is the vec4 `dz` rows below the block's first, `dy` rows
/// along y and `m` vec4s along x from the group's own, emitted just before the first row that
/// needs it (short live ranges); `store(i)` stores row i's `vec4<T>(a{i}_0, .., a{i}_3)`. Each
/// cell sums its taps in tap order, as every other kernel does.
fn gather4_rows(
    job: &StencilJob,
    mz: i32,
    load: &dyn Fn(i32, i32, i32) -> String,
    store: &dyn Fn(i32) -> String,
) -> String {
    let taps = job.stencil.taps();
    let per16 = 16 / job.cell_bytes() as usize;
    let name = |z: i32, dy: i32, m: i32| format!("q_{}_{}_{}", z + 64, dy + 64, m + 64);
    let mut loaded = std::collections::HashSet::new();
    let mut s = String::new();
    for i in 0..mz {
        for t in taps {
            let [dz, dy, dx] = t.offset;
            for j in 0..4 {
                let key = (i + dz, dy, (j + dx).div_euclid(4));
                if loaded.insert(key) {
                    s += &format!(
                        "let {} = {};\n",
                        name(key.0, key.1, key.2),
                        load(key.0, key.1, key.2)
                    );
                }
            }
        }
        for j in 0..4 {
            s += &format!("var a{i}_{j} = T(0);\n");
        }
        for (k, t) in taps.iter().enumerate() {
            let [dz, dy, dx] = t.offset;
            for j in 0..4 {
                let at = j + dx;
                s += &format!(
                    "a{i}_{j} = a{i}_{j} + weights[{}][{}] * {}.{};\n",
                    k / per16,
                    k % per16,
                    name(i + dz, dy, at.div_euclid(4)),
                    COMP[at.rem_euclid(4) as usize]
                );
            }
        }
        s += &store(i);
    }
    s
}

/// [`gather4_rows`] for a full box too wide to unroll ([`full_box`]): a loop over the input
/// rows (dz, dy) that the `mz` output rows' taps reach, each loading its 2·GR + 1 vec4s once
/// (`load(row, m)`, `row` the row's vec4 offset from the block's first as a WGSL expression) and
/// adding the taps along x of every output row whose tap row it is. Each cell still adds its taps
/// in tap order (rows in order, x within a row), so it rounds like every other kernel.
fn loop4_rows(
    job: &StencilJob,
    mz: i32,
    load: &dyn Fn(&str, i32) -> String,
    store: &dyn Fn(i32) -> String,
) -> String {
    let [rz, ry, rx] = job.stencil.reach();
    let [_, ny, nx] = job.shape.as_3d();
    let (plane4, nx4) = ((ny * nx / 4) as i64, (nx / 4) as i64);
    let per16 = 16 / job.cell_bytes() as i32;
    let gr = (rx + 3) / 4;
    let mut s = String::new();
    for i in 0..mz {
        for j in 0..4 {
            s += &format!("var a{i}_{j} = T(0);\n");
        }
    }
    s += &format!("for (var zi = 0; zi < {}; zi++) {{\n", mz + 2 * rz);
    s += &format!("for (var yi = 0; yi < {}; yi++) {{\n", 2 * ry + 1);
    let row = format!("(zi - {rz}) * {plane4} + (yi - {ry}) * {nx4}");
    for m in -gr..=gr {
        s += &format!("let q{} = {};\n", m + gr, load(&row, m));
    }
    for i in 0..mz {
        // output row i reads tap row dz = zi - RZ - i
        s += &format!("if (zi >= {i} && zi <= {}) {{\n", i + 2 * rz);
        s += &format!(
            "let wb = ((zi - {i}) * {} + yi) * {};\n",
            2 * ry + 1,
            2 * rx + 1
        );
        for dx in -rx..=rx {
            s += &format!(
                "let w{} = weights[u32(wb + {}) / {per16}u][u32(wb + {}) % {per16}u];\n",
                dx + rx,
                dx + rx,
                dx + rx
            );
        }
        for dx in -rx..=rx {
            for j in 0..4 {
                let at = j + dx;
                s += &format!(
                    "a{i}_{j} = a{i}_{j} + w{} * q{}.{};\n",
                    dx + rx,
                    at.div_euclid(4) + gr,
                    COMP[at.rem_euclid(4) as usize]
                );
            }
        }
        s += "}\n";
    }
    s += "}\n}\n";
    for i in 0..mz {
        s += &store(i);
    }
    s
}

/// The components of each tap row's vec4 columns `(dz, dy, m)` (m vec4s from a block of four
/// cells' own) that some tap of the four cells reads: what the passes in registers shuffle.
fn components_read(job: &StencilJob) -> std::collections::HashMap<(i32, i32, i32), [bool; 4]> {
    let mut need = std::collections::HashMap::<(i32, i32, i32), [bool; 4]>::new();
    for t in job.stencil.taps() {
        let [dz, dy, dx] = t.offset;
        for j in 0..4 {
            let at = j + dx;
            need.entry((dz, dy, at.div_euclid(4))).or_default()[at.rem_euclid(4) as usize] = true;
        }
    }
    need
}

/// The generated blocks of `steps_lanes` (stencil_vec.wgsl) for K = `k`: the windows of rows
/// per level (`w{s}_{m}`, s < K, oldest row first), and one iteration's levels, last first: level
/// s sums its four cells from level s - 1's window as the previous iteration left it (columns of
/// other lanes through subgroup shuffles of the components its taps read) and pushes them into
/// its own window, level K stores them, and level 0 takes the row loaded last.
fn lanes_code(job: &StencilJob, k: i32) -> (String, String) {
    let rz = job.stencil.reach()[0];
    let win = 2 * rz + 1;
    let need = components_read(job);
    let mut windows = String::new();
    for s in 0..k {
        for m in 0..win {
            windows += &format!("var w{s}_{m} = vec4<T>(T(0));\n");
        }
    }
    let push = |s: i32, value: &str| -> String {
        let mut c: String = (0..win - 1)
            .map(|m| format!("w{s}_{m} = w{s}_{};\n", m + 1))
            .collect();
        c += &format!("w{s}_{} = {value};\n", win - 1);
        c
    };
    let mut levels = String::new();
    for s in (1..=k).rev() {
        let load = |dz: i32, _dy: i32, m: i32| -> String {
            let row = format!("w{}_{}", s - 1, rz + dz);
            if m == 0 {
                return row;
            }
            let used = need.get(&(dz, 0, m)).copied().unwrap_or_default();
            let parts: Vec<String> = (0..4)
                .map(|c| match (used[c], m < 0) {
                    (false, _) => "T(0)".to_string(),
                    (true, true) => format!("subgroupShuffleUp({row}.{}, {}u)", COMP[c], -m),
                    (true, false) => format!("subgroupShuffleDown({row}.{}, {}u)", COMP[c], m),
                })
                .collect();
            format!("vec4<T>({})", parts.join(", "))
        };
        let cells = "vec4<T>(a0_0, a0_1, a0_2, a0_3)";
        let store = |_: i32| -> String {
            if s < k {
                push(s, cells)
            } else {
                format!(
                    "if (i >= WARM && out_ok) {{\n    dst[(first_in + i - K * (RZ + 1)) * NX4 + col] = {cells};\n}}\n"
                )
            }
        };
        levels += &format!("{{\n{}}}\n", gather4_rows(job, 1, &load, &store));
    }
    levels += &push(0, "cur");
    (windows, levels)
}

/// The window planes (indices m into `w{s}_{m}`) whose rows taps off their own row read, which
/// `steps_planes` keeps in workgroup memory: the planes of tap rows with dy != 0.
fn shared_planes(job: &StencilJob) -> Vec<i32> {
    let rz = job.stencil.reach()[0];
    let mut planes: Vec<i32> = tap_rows(job)
        .into_iter()
        .filter(|&(_, dy)| dy != 0)
        .map(|(dz, _)| rz + dz)
        .collect();
    planes.sort_unstable();
    planes.dedup();
    planes
}

/// The generated blocks of `steps_planes` (stencil_vec.wgsl) for K = `k` and `mr` rows an
/// invocation, by marker: each row's offsets and tile slots along y, the windows, the ring of
/// loads ahead, and the loop's body unrolled 2·RZ + 1 times (one rotation of the windows each):
/// loads, the fixups of window slots past the grid's ends along z, the stores of the planes
/// other rows read, and the levels (last first, as [`lanes_code`] builds them, with the rows off
/// the cell's own read from workgroup memory and the cells past the grid's x edges mirrored from
/// the invocation's own lane or its neighbour's).
fn planes_code(job: &StencilJob, k: i32, mr: i32) -> Vec<(&'static str, String)> {
    let [rz, _, _] = job.stencil.reach();
    let win = 2 * rz + 1;
    let b = job.boundary;
    let constant = b == Boundary::Constant;
    let shp = shared_planes(job);
    let rows = tap_rows(job);
    let need = components_read(job);
    let mut dys: Vec<i32> = rows
        .iter()
        .map(|&(_, dy)| dy)
        .filter(|&dy| dy != 0)
        .collect();
    dys.sort_unstable();
    dys.dedup();
    let (mut row_vars, mut windows, mut preload) = (String::new(), String::new(), String::new());
    for t in 0..mr {
        row_vars += &format!(
            "let y_{t} = y0 + {t};\nlet base_{t} = clamp(y_{t}, 0, NY - 1) * NX4 + colc;\n\
             let ok_{t} = col_ok && r0 + {t} >= KY && r0 + {t} < rows - KY && y_{t} < NY;\n"
        );
        for dy in &dys {
            let n = dy + 64;
            row_vars +=
                &format!("let ys_{t}_{n} = tile_row(y_{t} + {dy}, yb, rows) * sg + lane;\n");
            if constant {
                row_vars += &format!("let yo_{t}_{n} = y_{t} + {dy} < 0 || y_{t} + {dy} >= NY;\n");
            }
        }
        for s in 0..k {
            for m in 0..win {
                windows += &format!("var w{s}_{m}_{t} = vec4<T>(T(0));\n");
            }
        }
        for u in 0..win {
            preload += &format!(
                "var ld{u}_{t} = src[clamp(first_in + {u}, 0, p.res_rows - 1) * plane + base_{t}];\n"
            );
        }
    }
    // the register of logical window slot m (oldest plane first) at rotation u
    let reg = |s: i32, m: i64, t: i32, u: i32| {
        format!("w{s}_{}_{t}", (m + u as i64).rem_euclid(win as i64))
    };
    let big = 1i64 << 30;
    let nx = job.shape.as_3d()[2] as i64;
    let nx4 = nx / 4;
    // the cell x (outside the grid) a lane at the grid's first or last vec4 column reads,
    // from its own vec4 or a neighbour's
    let edge_cell = |row: &str, x: i64, own_col: i64| -> String {
        match map_axis(b, x, nx) {
            None => "T(CVAL)".to_string(),
            Some(v) => {
                let off = v.div_euclid(4) - own_col;
                let c = COMP[v.rem_euclid(4) as usize];
                match off {
                    0 => format!("{row}.{c}"),
                    1 => format!("subgroupShuffleDown({row}.{c}, 1u)"),
                    -1 => format!("subgroupShuffleUp({row}.{c}, 1u)"),
                    _ => unreachable!("Blocking::planes_fit keeps rows of at least 3 vec4s"),
                }
            }
        }
    };
    // One iteration at rotation u: loads, edge fixups, stores, barrier, levels, pushes.
    let body = |u: i32| -> String {
        let mut out = String::new();
        for t in 0..mr {
            out += &format!("let cur_{t} = ld{u}_{t};\n");
            out += &format!(
                "ld{u}_{t} = src[clamp(first_in + i + {win}, 0, p.res_rows - 1) * plane + base_{t}];\n"
            );
        }
        // along z: a window slot (plane d from the plane gz its level computes) past the
        // grid's first or last plane takes the slot of the plane it mirrors. At gz = 0 every
        // slot before the grid is set (later planes see them shifted down); towards the end
        // each of the last RZ planes sets the slots past the grid that entered since.
        let slot = |s: i32, d: i64, from: Option<i64>| -> String {
            let m = rz as i64 + d;
            (0..mr)
                .map(|t| match from {
                    Some(v) => format!("{} = {};\n", reg(s, m, t, u), reg(s, rz as i64 + v, t, u)),
                    None => format!("{} = vec4<T>(CVAL);\n", reg(s, m, t, u)),
                })
                .collect()
        };
        for s in 1..=k {
            if rz == 0 {
                break;
            }
            let w = s - 1;
            out += &format!(
                "{{\nlet gz = first_in + i - {} + p.res_lo;\nif (gz == 0) {{\n",
                s * (rz + 1)
            );
            for d in -(rz as i64)..0 {
                out += &slot(w, d, map_axis(b, d, big));
            }
            out += "}\n";
            for t in 0..rz as i64 {
                // gz = rows - 1 - t: planes gz + d for d > t lie past the end
                out += &format!("if (gz == p.rows - 1 - {t}) {{\n");
                for d in t + 1..=rz as i64 {
                    let from = map_axis(b, big - 1 + d - t, big).map(|v| v - (big - 1) + t);
                    out += &slot(w, d, from);
                }
                out += "}\n";
            }
            out += "}\n";
        }
        out += "let buf = (i % NB) * K * SHP * TP;\n";
        for s in 0..k {
            for (idx, &m) in shp.iter().enumerate() {
                for t in 0..mr {
                    out += &format!(
                        "sh[buf + {} * TP + (r0 + {t}) * sg + lane] = {};\n",
                        s as usize * shp.len() + idx,
                        reg(s, m as i64, t, u)
                    );
                }
            }
        }
        out += "workgroupBarrier();\n";
        for s in (1..=k).rev() {
            for t in 0..mr {
                let mut block = String::new();
                for (n, &(dz, dy)) in rows.iter().enumerate() {
                    let m = rz + dz;
                    let value = if dy == 0 {
                        reg(s - 1, m as i64, t, u)
                    } else {
                        let idx = shp.iter().position(|&q| q == m).expect("a shared plane");
                        let at = format!(
                            "sh[buf + {} * TP + ys_{t}_{}]",
                            (s - 1) as usize * shp.len() + idx,
                            dy + 64
                        );
                        if constant {
                            format!("select({at}, vec4<T>(CVAL), yo_{t}_{})", dy + 64)
                        } else {
                            at
                        }
                    };
                    block += &format!("let r_{n} = {value};\n");
                }
                let tap = |dz: i32, dy: i32, m: i32| -> String {
                    let n = rows.iter().position(|&r| r == (dz, dy)).expect("a tap row");
                    let row = format!("r_{n}");
                    if m == 0 {
                        return row;
                    }
                    let used = need.get(&(dz, dy, m)).copied().unwrap_or_default();
                    let parts: Vec<String> = (0..4)
                        .map(|c| {
                            if !used[c] {
                                return "T(0)".to_string();
                            }
                            let comp = COMP[c];
                            if m < 0 {
                                let edge = edge_cell(&row, 4 * m as i64 + c as i64, 0);
                                format!(
                                    "select(subgroupShuffleUp({row}.{comp}, {}u), {edge}, at_l)",
                                    -m
                                )
                            } else {
                                let x = 4 * (nx4 - 1 + m as i64) + c as i64;
                                let edge = edge_cell(&row, x, nx4 - 1);
                                format!(
                                    "select(subgroupShuffleDown({row}.{comp}, {m}u), {edge}, at_r)"
                                )
                            }
                        })
                        .collect();
                    format!("vec4<T>({})", parts.join(", "))
                };
                let cells = "vec4<T>(a0_0, a0_1, a0_2, a0_3)";
                // a push writes the oldest slot, which the next rotation makes the newest
                let store = |_: i32| -> String {
                    if s < k {
                        format!("{} = {cells};\n", reg(s, 0, t, u))
                    } else {
                        format!(
                            "if (i >= WARM && ok_{t}) {{\n    dst[(first_in + i - K * (RZ + 1)) * plane + y_{t} * NX4 + col] = {cells};\n}}\n"
                        )
                    }
                };
                block += &gather4_rows(job, 1, &tap, &store);
                out += &format!("{{\n{block}}}\n");
            }
        }
        for t in 0..mr {
            out += &format!("{} = cur_{t};\n", reg(0, 0, t, u));
        }
        // with one buffer, the next iteration's stores would overwrite what slower subgroups
        // still read; with two they go to the other, which every subgroup finished reading
        // before the barrier above
        out += "if (NB == 1) {\n    workgroupBarrier();\n}\n";
        out
    };
    let mut looped = String::new();
    for u in 0..win {
        if u > 0 {
            looped += &format!("if (i0 + {u} >= iterations) {{\n    break;\n}}\n");
        }
        looped += &format!("{{\nlet i = i0 + {u};\n{}}}\n", body(u));
    }
    vec![
        ("// @generated-planes-rows", row_vars),
        ("// @generated-planes-windows", windows),
        ("// @generated-planes-preload", preload),
        ("// @generated-planes-loop", looped),
    ]
}

/// The kernel source for a job: the prelude constants and the generated tap code, with the
/// four-cell kernels where [`four_cells`] allows them and the streamed pass where `blocking`
/// is given (its workgroup memory sized for a device with 48 KiB of it).
pub fn source(job: &StencilJob, choice: KernelChoice) -> String {
    source_with(job, choice, four_cells(job), 48 << 10)
}

/// The plane rows a workgroup of `step4` covers: the `asked` ones (`KernelChoice::plane_rows`)
/// on 3-D grids with four cells per invocation, else 1; more where rows are narrower than the
/// patch (WG / rows vec4s), so that few of its invocations fall past the row's end; and 1 where
/// patches would still leave half their invocations past the plane's edges (small planes, which
/// workgroups along x pack without a gap).
fn plane_rows(job: &StencilJob, asked: u32, four: bool) -> u32 {
    let [_, ny, nx] = job.shape.as_3d();
    let nx4 = nx as u64 / 4;
    if !four || ny <= 1 || asked <= 1 || nx4 == 0 {
        return 1;
    }
    let th = asked.max(WG / (nx4.next_power_of_two().min(WG as u64) as u32));
    let tw = (WG / th) as u64;
    let covered = (ny as u64).div_ceil(th as u64) * th as u64 * nx4.div_ceil(tw) * tw;
    if 2 * ny as u64 * nx4 < covered {
        return 1;
    }
    th
}

/// [`source`], with the four-cell kernels where `four` (decided by the caller within what
/// [`four_cells`] allows).
fn source_with(job: &StencilJob, choice: KernelChoice, four: bool, workgroup_bytes: u32) -> String {
    let blocking = choice.blocking;
    let mz = choice.rows.max(1) as i32;
    let [_, ny, nx] = job.shape.as_3d();
    let [rz, ry, rx] = job.stencil.reach();
    let taps = job.stencil.taps();
    let ty = if job.dtype == KeyType::F64 {
        "f64"
    } else {
        "f32"
    };
    let cval = if job.dtype == KeyType::F32 {
        job.cval as f32 as f64
    } else {
        job.cval
    };
    let mut s = format!(
        "alias T = {ty};\nconst NX: i32 = {nx};\nconst NY: i32 = {ny};\nconst MODE: u32 = {}u;\n\
         const CVAL: T = {};\nconst RZ: i32 = {rz};\nconst RY: i32 = {ry};\nconst RX: i32 = {rx};\n\
         const NTAPS: u32 = {}u;\nconst NWEIGHTS: u32 = {}u;\nalias WEIGHTS = vec{}<T>;\nconst WG: u32 = {WG}u;\n",
        job.boundary.code(),
        literal(cval),
        taps.len().max(1),
        taps.len().div_ceil(16 / job.cell_bytes() as usize).max(1),
        16 / job.cell_bytes(),
    );
    if four {
        s += &format!(
            "alias CELLS = vec4<T>;\nconst GR: i32 = {};\nconst MZ: i32 = {mz};\nconst TH: u32 = {}u;\n\
             fn ld(i: i32) -> T {{ return src[i >> 2u][i & 3]; }}\n\
             fn st(i: i32, v: T) {{ dst[i >> 2u][i & 3] = v; }}\n",
            reach_vec4(job),
            plane_rows(job, choice.plane_rows, four)
        );
    } else {
        s += "alias CELLS = T;\nfn ld(i: i32) -> T { return src[i]; }\n\
              fn st(i: i32, v: T) { dst[i] = v; }\n";
    }
    s.push_str(crate::wgsl::COMMON);
    s.push('\n');
    let plane = (ny * nx) as i64;
    let unrolled = taps.len() <= UNROLL_TAPS;
    let per16 = 16 / job.cell_bytes() as usize;
    // One cell's sum: the same text in every kernel of a job, so every path rounds alike.
    let sum = if unrolled {
        (0..taps.len())
            .map(|k| {
                format!(
                    "acc = acc + weights[{}][{}] * v[{k}];\n",
                    k / per16,
                    k % per16
                )
            })
            .collect::<String>()
    } else {
        format!("for (var k = 0u; k < NTAPS; k++) {{\n    acc = acc + weights[k / {per16}u][k % {per16}u] * v[k];\n}}\n")
    };
    // Gathers: one statement per tap, or a loop over the tap table for wide stencils (whose
    // unrolled code takes a software compiler minutes).
    let gather = |one: &dyn Fn(&Tap) -> String, looped: &str| -> String {
        if unrolled {
            taps.iter()
                .enumerate()
                .map(|(k, t)| format!("v[{k}] = {};\n", one(t)))
                .collect()
        } else {
            format!(
                "for (var k = 0u; k < NTAPS; k++) {{\n    let o = tap_offsets[k];\n    v[k] = {looped};\n}}\n"
            )
        }
    };
    let direct = gather(
        &|t| {
            let [dz, dy, dx] = t.offset;
            format!(
                "ld(c + {})",
                dz as i64 * plane + dy as i64 * nx as i64 + dx as i64
            )
        },
        "ld(c + o.w)",
    );
    let fetch = gather(
        &|t| {
            let [dz, dy, dx] = t.offset;
            format!("fetch(zr + {dz}, y + {dy}, x + {dx})")
        },
        "fetch(zr + o.x, y + o.y, x + o.z)",
    );
    let mut text = fill(crate::wgsl::STENCIL, "// @generated-direct", &direct);
    // `step2`: the offsets of both cells' taps, each loaded once, then each cell's sum in tap
    // order with the same expression as `sum`
    let mut direct2 = String::new();
    if unrolled {
        let off = |t: &Tap, j: i64| {
            let [dz, dy, dx] = t.offset;
            dz as i64 * plane + dy as i64 * nx as i64 + dx as i64 + j
        };
        let mut loaded = std::collections::HashSet::new();
        for j in 0..2 {
            for t in taps {
                let o = off(t, j);
                if loaded.insert(o) {
                    direct2 += &format!("let l_{} = ld(c + {o});\n", o + (1 << 30));
                }
            }
        }
        for j in 0..2 {
            direct2 += &format!("var acc{j} = T(0);\n");
            for (k, t) in taps.iter().enumerate() {
                direct2 += &format!(
                    "acc{j} = acc{j} + weights[{}][{}] * l_{};\n",
                    k / per16,
                    k % per16,
                    off(t, j) + (1 << 30)
                );
            }
            direct2 += &format!("st(c + {j}, acc{j});\n");
        }
    } else {
        direct2 += "st(c, cell_at(zr, y, x));\nst(c + 1, cell_at(zr, y, x + 1));\n";
    }
    text = fill(&text, "// @generated-direct2", &direct2);
    text = fill(&text, "// @generated-fetch", &fetch);
    if four {
        let (vec, planes) = crate::wgsl::STENCIL_VEC
            .split_once("// @planes")
            .and_then(|(a, b)| Some((a, b.split_once('\n')?.1)))
            .expect("stencil_vec.wgsl marks its 3-D part in registers");
        let (step4, streamed) = vec
            .split_once("// @streamed")
            .and_then(|(a, b)| Some((a, b.split_once('\n')?.1)))
            .expect("stencil_vec.wgsl marks its streamed part");
        let row_off = |dz: i32, dy: i32| (dz as i64 * plane + dy as i64 * nx as i64) / 4;
        let store = |i: i32| {
            format!(
                "dst[c4 + {}] = vec4<T>(a{i}_0, a{i}_1, a{i}_2, a{i}_3);\n",
                i as i64 * plane / 4
            )
        };
        let (direct4, xedge4) = if unrolled {
            (
                gather4_rows(
                    job,
                    mz,
                    &|dz, dy, m| format!("src[c4 + {}]", row_off(dz, dy) + m as i64),
                    &store,
                ),
                gather4_rows(
                    job,
                    mz,
                    &|dz, dy, m| format!("ld4(row4 + {}, xg + {m})", row_off(dz, dy)),
                    &store,
                ),
            )
        } else {
            (
                loop4_rows(job, mz, &|row, m| format!("src[c4 + {row} + {m}]"), &store),
                loop4_rows(
                    job,
                    mz,
                    &|row, m| format!("ld4(row4 + {row}, xg + {m})"),
                    &store,
                ),
            )
        };
        let step4 = fill(step4, "// @generated-direct4", &direct4);
        text += &fill(&step4, "// @generated-xedge4", &xedge4);
        if let Some(b) = blocking.filter(|b| b.is_planes(job)) {
            text += &format!(
                "\nconst K: i32 = {};\nconst PWG: u32 = {}u;\nconst MR: i32 = {};\n\
                 const SHP: i32 = {};\nconst NB: i32 = {};\n",
                b.steps,
                b.workgroup,
                b.tile_rows,
                shared_planes(job).len().max(1),
                b.plane_buffers(job, workgroup_bytes)
            );
            let mut part = planes.to_string();
            for (marker, code) in planes_code(job, b.steps as i32, b.tile_rows as i32) {
                part = fill(&part, marker, &code);
            }
            text += &part;
        } else if let Some(b) = blocking {
            let mut lanes_part = String::new();
            text += &format!(
                "\nconst K: i32 = {};\nconst RB: i32 = {};\nconst D: i32 = {};\nconst TY: i32 = {};\n\
                 const LW4: i32 = {};\nconst HY: i32 = {};\nconst HG: i32 = {};\n\
                 const SWG: u32 = {}u;\nconst PRE: i32 = {};\nconst LANES: bool = {};\n",
                b.steps,
                b.planes,
                ring_depth(job, b.planes),
                b.tile_rows,
                b.tile_vec4s,
                b.halo_rows(job),
                b.halo_vec4s(job),
                b.workgroup,
                (b.planes * b.tile_rows * b.tile_vec4s).div_ceil(b.workgroup),
                b.lanes
            );
            let tile_fetch = gather(
                &|t| {
                    let [dz, dy, dx] = t.offset;
                    format!("tile_fetch(lb, zr + {dz}, y + {dy}, x + {dx}, y0, x0)")
                },
                "tile_fetch(lb, zr + o.x, y + o.y, x + o.z, y0, x0)",
            );
            // one row of four cells into `out`: the streamed kernels' own loads
            let to_out = |_: i32| "out = vec4<T>(a0_0, a0_1, a0_2, a0_3);\n".to_string();
            let tile4 = gather4_rows(
                job,
                1,
                &|dz, dy, m| {
                    format!("ring[lb + slot(z + {dz}) * PLANE4 + (ly + {dy}) * LW4 + lg + {m}]")
                },
                &to_out,
            );
            let rows = tap_rows(job);
            let row_bases: String = rows
                .iter()
                .enumerate()
                .map(|(n, (dz, dy))| {
                    format!("let rb{n} = lb + slot(z + {dz}) * PLANE4 + {dy} * LW4;\n")
                })
                .collect();
            let interior4 = gather4_rows(
                job,
                1,
                &|dz, dy, m| {
                    let n = rows.iter().position(|&r| r == (dz, dy)).expect("a tap row");
                    format!("ring[rb{n} + e + {m}]")
                },
                &to_out,
            );
            let (streamed, lanes) = streamed
                .split_once("// @lanes")
                .and_then(|(a, b)| Some((a, b.split_once('\n')?.1)))
                .expect("stencil_vec.wgsl marks its part in registers");
            if b.lanes {
                let (windows, levels) = lanes_code(job, b.steps as i32);
                let mut part = format!("const LANES_WG: u32 = {LANES_WG}u;\n");
                part += &fill(lanes, "// @generated-lanes-windows", &windows);
                lanes_part = fill(&part, "// @generated-lanes-levels", &levels);
            }
            let mut part = fill(streamed, "// @generated-tile-fetch", &tile_fetch);
            part = fill(&part, "// @generated-tile4", &tile4);
            part = fill(&part, "// @generated-interior-rows", &row_bases);
            text += &fill(&part, "// @generated-interior4", &interior4);
            text += &lanes_part;
        }
    }
    s + &fill(&text, "// @generated-sum", &sum)
}

/// The uniform block of `shaders/stencil.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct StepParams {
    rows: i32,
    res_lo: i32,
    res_rows: i32,
    comp_lo: i32,
    comp_rows: i32,
    chunk: i32,
    /// The workgroups `steps_interior` runs: chunks, tile rows, tile columns, [lo, hi) each.
    interior: [i32; 6],
    /// Rows per strip of `steps_lanes`, which runs those workgroups' cells instead where the
    /// blocking is in registers.
    lane_chunk: i32,
}

impl StepParams {
    /// Grid rows `[lo, hi)` resident (of `rows`), rows `[c0, c1)` to compute.
    fn region(rows: i64, lo: i64, hi: i64, c0: i64, c1: i64) -> StepParams {
        StepParams {
            rows: rows as i32,
            res_lo: lo as i32,
            res_rows: (hi - lo) as i32,
            comp_lo: (c0 - lo) as i32,
            comp_rows: (c1 - c0) as i32,
            chunk: 0,
            interior: [0; 6],
            lane_chunk: 0,
        }
    }

    /// `rows` rows, all resident and all computed.
    fn whole(rows: u64) -> StepParams {
        let rows = rows as i64;
        StepParams::region(rows, 0, rows, 0, rows)
    }
}

/// The compiled step kernel of one job.
pub struct StencilKernel {
    job: StencilJob,
    layout: Layout,
    pipeline: wgpu::ComputePipeline,
    /// The tap weights, read from memory rather than written into the code as constants: with
    /// constants, compilers may factor equal weights out of the sum (w·a + w·b → w·(a + b)),
    /// which overflows to ±inf for values near the type's limit where the tap-by-tap sum does not.
    weights: wgpu::Buffer,
    tap_offsets: wgpu::Buffer,
    /// Whether `pipeline` is `step4` (four cells per invocation) rather than `step`.
    four: bool,
    /// Rows of four cells per invocation of `step4`.
    rows: u32,
    /// Whether `pipeline` is `step2` (two cells an invocation).
    pairs: bool,
    /// `KernelChoice::plane_rows` as asked (see `plane_rows` for where it applies).
    plane_rows: u32,
    /// The streamed pass of K steps, where asked for: the general kernel and the one for
    /// workgroups wholly inside the grid (`steps_interior`, or `steps_lanes`).
    streamed: Option<(
        Blocking,
        Option<wgpu::ComputePipeline>,
        wgpu::ComputePipeline,
    )>,
    /// The device's narrowest subgroup (0 without subgroups), which sizes `steps_lanes`' work.
    min_lanes: u32,
}

impl StencilKernel {
    /// The kernels for `job` by [`KernelChoice::for_job`]. Whether K steps per pass pay depends
    /// on the device and the stencil: [`choose_kernel`] measures it,
    /// [`StencilKernel::with_choice`] takes a choice.
    pub fn new(gpu: &Gpu, job: &StencilJob) -> Result<StencilKernel> {
        StencilKernel::with_choice(gpu, job, KernelChoice::for_job(job))
    }

    /// The kernels for `job` with the given streamed pass (None: one step per pass), and the
    /// default rows per invocation for its single steps.
    pub fn with_blocking(
        gpu: &Gpu,
        job: &StencilJob,
        blocking: Option<Blocking>,
    ) -> Result<StencilKernel> {
        let choice = KernelChoice {
            blocking,
            ..KernelChoice::for_job(job)
        };
        StencilKernel::with_choice(gpu, job, choice)
    }

    /// The kernels for `job` as `choice` says.
    pub fn with_choice(gpu: &Gpu, job: &StencilJob, choice: KernelChoice) -> Result<StencilKernel> {
        StencilKernel::build(gpu, job, choice, true)
    }

    /// One step per pass and one cell per invocation whatever the rows: the kernel the four-cell
    /// one replaced, for the bench to measure against.
    #[doc(hidden)]
    pub fn one_cell(gpu: &Gpu, job: &StencilJob) -> Result<StencilKernel> {
        StencilKernel::build(gpu, job, KernelChoice::default(), false)
    }

    fn build(
        gpu: &Gpu,
        job: &StencilJob,
        choice: KernelChoice,
        four: bool,
    ) -> Result<StencilKernel> {
        job.validate()?;
        let blocking = choice.blocking;
        if !(1..=8).contains(&choice.rows) {
            return Err(Error::InvalidInput(format!(
                "rows per invocation must be 1 to 8, not {}",
                choice.rows
            )));
        }
        if !choice.plane_rows.is_power_of_two() || choice.plane_rows > 32 {
            return Err(Error::InvalidInput(format!(
                "plane rows per workgroup must be 1, 2, 4, 8, 16 or 32, not {}",
                choice.plane_rows
            )));
        }
        if let Some(b) = blocking.filter(|b| b.is_planes(job)) {
            if !b.planes_fit(gpu, job) {
                return Err(Error::InvalidInput(format!(
                    "{b:?} does not fit this job on {} (K steps in registers on a 3-D grid need \
                     subgroups, a boundary other than wrap, rows of a multiple of 4 cells and at \
                     least 3 vec4s, at most {UNROLL_TAPS} taps, K at most {MAX_PLANE_STEPS}, and \
                     the workgroup's planes within its memory)",
                    gpu.adapter.name
                )));
            }
        } else if let Some(b) = blocking {
            let bytes = b.steps
                * ring_depth(job, b.planes)
                * b.tile_rows
                * b.tile_vec4s
                * 4
                * job.cell_bytes() as u32;
            let max_steps = if b.lanes { MAX_LANE_STEPS } else { 4 };
            let lanes_ok = !b.lanes
                || (job.shape.dims() == 2
                    && gpu
                        .subgroups()
                        .is_some_and(|sub| 2 * lane_halo(job, b.steps) < sub.min_size));
            if !four_cells(job)
                || !unrolled(job)
                || !lanes_ok
                || !(1..=max_steps).contains(&b.steps)
                || !(1..=8).contains(&b.planes)
                || bytes > gpu.limits.max_compute_workgroup_storage_size
                || !(b.planes * b.tile_rows * b.tile_vec4s).is_multiple_of(b.workgroup.max(1))
                || b.workgroup % 32 != 0
                || b.workgroup > 256
                || b.tile_vec4s <= 2 * b.halo_vec4s(job)
                || b.tile_rows <= 2 * b.halo_rows(job)
                || (job.shape.dims() == 2 && b.tile_rows != 1)
            {
                return Err(Error::InvalidInput(format!(
                    "{b:?} does not fit this job on {} (it needs rows of a multiple of 4 \
                     cells, at most {UNROLL_TAPS} taps, and {bytes} bytes of workgroup memory; \
                     in registers, a 2-D grid and subgroups wider than its halo)",
                    gpu.adapter.name
                )));
            }
        }
        if job.dtype == KeyType::F64 && !gpu.features.contains(wgpu::Features::SHADER_F64) {
            return Err(Error::InvalidInput(format!(
                "{} has no 64-bit float shaders (SHADER_F64); convert the grid to f32",
                gpu.adapter.name
            )));
        }
        let layout = Layout::new(
            gpu,
            "stencil",
            &[
                (0, Slot::params::<StepParams>()),
                (1, Slot::Read),
                (2, Slot::ReadWrite),
                (3, Slot::Uniform),
                (4, Slot::Read),
            ],
        );
        let four = four && four_cells(job);
        let module = kernel::module(
            gpu,
            "stencil",
            &source_with(
                job,
                choice,
                four,
                gpu.limits.max_compute_workgroup_storage_size,
            ),
        )?;
        let pairs =
            !four && choice.pairs && job.shape.as_3d()[2].is_multiple_of(2) && unrolled(job);
        let entry = match (four, pairs) {
            (true, _) => "step4",
            (false, true) => "step2",
            (false, false) => "step",
        };
        let pipeline = kernel::pipeline(gpu, &module, entry, &layout)?;
        let streamed = match blocking {
            Some(b) if b.is_planes(job) => Some((
                b,
                None,
                kernel::pipeline(gpu, &module, "steps_planes", &layout)?,
            )),
            Some(b) => Some((
                b,
                Some(kernel::pipeline(gpu, &module, "steps_streamed", &layout)?),
                kernel::pipeline(
                    gpu,
                    &module,
                    if b.lanes {
                        "steps_lanes"
                    } else {
                        "steps_interior"
                    },
                    &layout,
                )?,
            )),
            None => None,
        };
        // uniform arrays have a 16-byte stride: four f32 or two f64 weights per element
        let per16 = 16 / job.cell_bytes() as usize;
        let padded = job.stencil.taps.len().div_ceil(per16).max(1) * per16;
        let weights = match job.dtype {
            KeyType::F64 => {
                let mut w: Vec<f64> = job.stencil.taps.iter().map(|t| t.weight).collect();
                w.resize(padded, 0.0);
                transfer::uniform_buffer(gpu, "stencil weights", bytemuck::cast_slice(&w))?
            }
            _ => {
                let mut w: Vec<f32> = job.stencil.taps.iter().map(|t| t.weight as f32).collect();
                w.resize(padded, 0.0);
                transfer::uniform_buffer(gpu, "stencil weights", bytemuck::cast_slice(&w))?
            }
        };
        // (dz, dy, dx, offset in the grid) per tap, for the looped gathers of wide stencils
        let [_, ny, nx] = job.shape.as_3d();
        let table: Vec<[i32; 4]> = job
            .stencil
            .taps
            .iter()
            .map(|t| {
                let [dz, dy, dx] = t.offset;
                [
                    dz,
                    dy,
                    dx,
                    (dz as i64 * (ny * nx) as i64 + dy as i64 * nx as i64 + dx as i64) as i32,
                ]
            })
            .collect();
        let tap_offsets = transfer::buffer_from(gpu, "stencil tap offsets", &table)?;
        Ok(StencilKernel {
            job: job.clone(),
            layout,
            pipeline,
            weights,
            tap_offsets,
            four,
            rows: if four { choice.rows } else { 1 },
            pairs,
            plane_rows: choice.plane_rows,
            streamed,
            min_lanes: gpu.subgroups().map_or(0, |sub| sub.min_size),
        })
    }

    /// The streamed pass in use, if any.
    pub fn blocking(&self) -> Option<Blocking> {
        self.streamed.as_ref().map(|(b, _, _)| *b)
    }

    /// Workgroups of one in-core streamed pass that run `steps_interior` (no boundary code);
    /// 0 without a streamed pass. For tests that must reach that kernel.
    #[doc(hidden)]
    pub fn interior_workgroups(&self) -> u64 {
        let region = self.params(StepParams::whole(self.job.shape.rows() as u64));
        let [c0, c1, y0, y1, x0, x1] = region.interior;
        match self.blocking() {
            Some(_) => ((c1 - c0) * (y1 - y0) * (x1 - x0)).max(0) as u64,
            None => 0,
        }
    }

    /// How this kernel runs (rows per invocation 1 where it runs one cell per invocation).
    pub fn choice(&self) -> KernelChoice {
        KernelChoice {
            rows: self.rows,
            blocking: self.blocking(),
            pairs: self.pairs,
            plane_rows: self.plane_rows,
        }
    }

    /// Whether single steps run four cells per invocation (`step4`).
    pub fn four_cells(&self) -> bool {
        self.four
    }

    /// The rows of the plane a workgroup of a single step covers on this job (1: workgroups
    /// along x), for tests that must reach either mapping.
    #[doc(hidden)]
    pub fn plane_patch_rows(&self) -> u32 {
        plane_rows(&self.job, self.plane_rows, self.four)
    }

    /// The parameter block of a pass over `region`, with the streamed pass's chunk filled in.
    fn params(&self, mut region: StepParams) -> StepParams {
        if let Some(b) = self.blocking() {
            region.chunk = b.chunk_rows(&self.job, region.comp_rows.max(0) as u64) as i32;
            if b.is_planes(&self.job) {
                region.lane_chunk = b.plane_work(&self.job, &region, self.min_lanes).0 as i32;
                return region;
            }
            region.interior = b.interior(&self.job, &region);
            if b.lanes {
                region.lane_chunk = b.lane_work(&self.job, &region, self.min_lanes).0 as i32;
            }
        }
        region
    }

    /// How `steps` steps are split into passes: streamed passes of K steps while at least K
    /// remain, single steps for the rest.
    fn passes(&self, steps: u64) -> Vec<u64> {
        let k = self.blocking().map_or(1, |b| b.steps as u64);
        let mut out = vec![k; (steps / k) as usize];
        out.extend(std::iter::repeat_n(1, (steps % k) as usize));
        out
    }

    pub fn job(&self) -> &StencilJob {
        &self.job
    }

    /// A bind group reading `src` and writing `dst` with the parameter blocks in `params`.
    fn bind(
        &self,
        gpu: &Gpu,
        params: &wgpu::Buffer,
        src: &wgpu::Buffer,
        dst: &wgpu::Buffer,
    ) -> wgpu::BindGroup {
        self.layout
            .bind(gpu, &[params, src, dst, &self.weights, &self.tap_offsets])
    }

    /// Record one pass of `steps` steps (1, or the streamed K) over `region` (the parameter
    /// block at `offset`, made by [`StencilKernel::params`]); `bind` says which buffer is read
    /// and which written.
    fn record_pass(
        &self,
        gpu: &Gpu,
        pass: &mut wgpu::ComputePass<'_>,
        bind: &wgpu::BindGroup,
        offset: u32,
        region: &StepParams,
        steps: u64,
    ) {
        let comp_rows = region.comp_rows.max(0) as u64;
        match &self.streamed {
            Some((b, _, planes)) if steps == b.steps as u64 && b.is_planes(&self.job) => {
                let groups = b.plane_work(&self.job, region, self.min_lanes).1 as u32;
                if groups > 0 {
                    kernel::dispatch(gpu, pass, planes, bind, &[offset], groups);
                }
            }
            Some((b, Some(general), interior)) if steps == b.steps as u64 => {
                // every workgroup through the general kernel, which leaves the interior box's
                // (in registers: the workgroups around the box only)
                let [c0, c1, y0, y1, x0, x1] = region.interior;
                let boxed = ((c1 - c0) * (y1 - y0) * (x1 - x0)).max(0) as u64;
                let mut groups = b.workgroups(&self.job, comp_rows);
                if b.lanes {
                    groups -= boxed;
                }
                kernel::dispatch(gpu, pass, general, bind, &[offset], groups as u32);
                let inner = if b.lanes {
                    b.lane_work(&self.job, region, self.min_lanes).1 as u32
                } else {
                    boxed as u32
                };
                if inner > 0 {
                    kernel::dispatch(gpu, pass, interior, bind, &[offset], inner);
                }
            }
            _ => {
                let (rows, per_row) = match (self.four, self.pairs) {
                    (true, _) => (self.rows as u64, 4),
                    (false, true) => (1, 2),
                    (false, false) => (1, 1),
                };
                let blocks = comp_rows.div_ceil(rows);
                let th = plane_rows(&self.job, self.plane_rows, self.four) as u64;
                let groups = if th > 1 {
                    // patches of th rows by WG / th vec4s (stencil_vec.wgsl)
                    let [_, ny, nx] = self.job.shape.as_3d();
                    let tw = WG as u64 / th;
                    blocks * (ny as u64).div_ceil(th) * (nx as u64 / 4).div_ceil(tw)
                } else {
                    (blocks * self.job.shape.row_cells() as u64 / per_row).div_ceil(WG as u64)
                };
                kernel::dispatch(gpu, pass, &self.pipeline, bind, &[offset], groups as u32);
            }
        }
    }
}

impl StencilKernel {
    /// Record `steps` in-core steps on a GPU-resident grid: `a` holds the grid and `b` is a
    /// second buffer of the same size; returns which of the two holds the result (it depends on
    /// how many passes the steps took). For library users whose grids already live on the GPU:
    /// both buffers need `BufferUsages::STORAGE` and the grid's size within one binding.
    pub fn record_steps<'a>(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        a: &'a wgpu::Buffer,
        b: &'a wgpu::Buffer,
        steps: u32,
    ) -> Result<&'a wgpu::Buffer> {
        let rows = self.job.shape.rows() as u64;
        let bytes = rows * self.job.row_bytes();
        if a.size() < bytes || b.size() < bytes || bytes > gpu.max_binding() {
            return Err(Error::InvalidInput(format!(
                "the grid {} needs two buffers of {bytes} bytes within one binding ({} bytes)",
                self.job.shape,
                gpu.max_binding()
            )));
        }
        let mut params = ParamBlocks::new(gpu);
        let region = self.params(StepParams::whole(rows));
        let off = params.push(&region);
        let pbuf = params.finish(gpu, "stencil params");
        let binds = [self.bind(gpu, &pbuf, a, b), self.bind(gpu, &pbuf, b, a)];
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("stencil steps"),
            timestamp_writes: None,
        });
        let passes = self.passes(steps as u64);
        for (i, &k) in passes.iter().enumerate() {
            self.record_pass(gpu, &mut pass, &binds[i % 2], off, &region, k);
        }
        Ok(if passes.len().is_multiple_of(2) { a } else { b })
    }
}

impl StencilKernel {
    /// Record `steps` steps on a resident part of the grid: buffer `a` holds grid rows
    /// `[lo, hi)` (unwrapped: row r is grid row r mod rows), `b` is a second buffer of that size;
    /// after the steps rows `[z0, z1)` are exact (each pass computes only the rows still needed,
    /// as the streamer's sub-blocks do). Returns which buffer holds the result.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_region_steps<'a>(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        a: &'a wgpu::Buffer,
        b: &'a wgpu::Buffer,
        (lo, hi): (i64, i64),
        (z0, z1): (i64, i64),
        steps: u64,
    ) -> &'a wgpu::Buffer {
        let rows = self.job.shape.rows() as i64;
        let radius = self.job.stencil.radius as i64;
        let mut params = ParamBlocks::new(gpu);
        let mut passes = Vec::new();
        let mut t = 0u64;
        for k in self.passes(steps) {
            t += k;
            let shrink = radius * (steps - t) as i64;
            let (c0, c1) = ((z0 - shrink).max(lo), (z1 + shrink).min(hi));
            let region = self.params(StepParams::region(rows, lo, hi, c0, c1));
            let off = params.push(&region);
            passes.push((off, region, k));
        }
        let pbuf = params.finish(gpu, "stencil params");
        let binds = [self.bind(gpu, &pbuf, a, b), self.bind(gpu, &pbuf, b, a)];
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("stencil part steps"),
            timestamp_writes: None,
        });
        for (i, (off, region, k)) in passes.iter().enumerate() {
            self.record_pass(gpu, &mut pass, &binds[i % 2], *off, region, *k);
        }
        if passes.len().is_multiple_of(2) {
            a
        } else {
            b
        }
    }
}

/// Whether measuring kernels ([`choose_kernel`]) can pay for `job`: several steps and at least
/// 2^40 cell updates (cells × steps). Measuring compiles about ten pipelines (over a second on
/// an H100), more than a smaller job could save (2^40 updates: about 3 s at the copy bound).
pub fn worth_measuring(job: &StencilJob) -> bool {
    job.steps >= 2 && job.shape.cells() as u64 * job.steps as u64 >= 1 << 40
}

impl StencilKernel {
    /// The kernels for `job` that measured fastest on this device ([`choose_kernel`] on a sample
    /// of the grid), for jobs where [`worth_measuring`] says so;
    /// [`KernelChoice::for_device`] otherwise. Every choice gives the same result bit for bit.
    pub fn planned(gpu: &Gpu, job: &StencilJob) -> Result<StencilKernel> {
        StencilKernel::planned_tuned(gpu, job, &Tuning::default())
    }

    /// [`StencilKernel::planned`], taking the steps a pass `tuning` measured on this device
    /// (`gpusort tune`) where the job is not measured itself.
    pub fn planned_tuned(gpu: &Gpu, job: &StencilJob, tuning: &Tuning) -> Result<StencilKernel> {
        let choice = if worth_measuring(job) {
            choose_kernel(gpu, job, 64 << 20)?
        } else {
            KernelChoice::for_device_tuned(gpu, job, tuning)
        };
        StencilKernel::with_choice(gpu, job, choice)
    }
}

/// The kernels that run `job`'s steps fastest on this device: 1, 2, 4 or 8 rows of four cells
/// per invocation, on 3-D grids workgroups over 1, 8 or 16 rows of the plane, and each streamed
/// pass (K = 1..=4) that fits, and on 2-D grids with subgroups K = 2, 3, 4, 6 and 8 in registers.
/// Each candidate times 12 steps on a sample of the job's grid (its first rows, at most
/// `sample_bytes`), GPU-resident; a candidate must beat the job's default
/// ([`KernelChoice::for_device`]) by 5% to be chosen.
pub fn choose_kernel(gpu: &Gpu, job: &StencilJob, sample_bytes: u64) -> Result<KernelChoice> {
    job.validate()?;
    let mut candidates: Vec<KernelChoice> = Vec::new();
    if four_cells(job) {
        for rows in [1, 2, 4, 8] {
            if rows == KernelChoice::for_job(job).rows {
                continue;
            }
            candidates.push(KernelChoice {
                rows,
                ..KernelChoice::for_job(job)
            });
        }
        if job.shape.as_3d()[1] > 1 {
            for plane_rows in [1, 16] {
                candidates.push(KernelChoice {
                    plane_rows,
                    ..KernelChoice::for_job(job)
                });
            }
        }
    }
    for b in Blocking::device_candidates(gpu, job) {
        if b.steps <= job.steps {
            candidates.push(KernelChoice {
                blocking: Some(b),
                ..KernelChoice::for_job(job)
            });
        }
    }
    if candidates.is_empty() {
        return Ok(KernelChoice::for_device(gpu, job));
    }
    let rb = job.row_bytes().max(1);
    let radius = job.stencil.radius() as u64;
    let rows = (sample_bytes / rb)
        .min(gpu.max_binding() / rb)
        .clamp(radius.max(1), job.shape.rows() as u64);
    let mut extents = job.shape.extents();
    extents[0] = rows as usize;
    let sample = StencilJob {
        shape: GridShape::new(&extents)?,
        steps: 12,
        ..job.clone()
    };
    let bytes = rows * rb;
    let a = transfer::storage_buffer(gpu, "stencil sample", bytes)?;
    let b = transfer::storage_buffer(gpu, "stencil sample out", bytes)?;
    let time = |choice: KernelChoice| -> Result<f64> {
        let kernel = StencilKernel::with_choice(gpu, &sample, choice)?;
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            kernel.record_steps(gpu, &mut enc, &a, &b, sample.steps)?;
            let t = Instant::now();
            gpu.queue.submit([enc.finish()]);
            gpu.wait()?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(best)
    };
    let mut chosen = KernelChoice::for_device(gpu, job);
    let mut fastest = 0.95 * time(chosen)?;
    for c in candidates {
        let t = time(c)?;
        if t < fastest {
            fastest = t;
            chosen = c;
        }
    }
    Ok(chosen)
}

/// What a run did.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StencilStats {
    pub seconds: f64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Cell updates including redundant halo work.
    pub cell_updates: u64,
    pub blocks_run: u64,
    /// Seconds the host spent waiting for the GPU, copying sub-blocks into staging (reading the
    /// source grid), and copying results out of staging (writing the destination).
    pub wait_s: f64,
    pub fill_s: f64,
    pub drain_s: f64,
}

/// Copy grid rows `[a, b)` (unwrapped: taken modulo the row count) out of `grid` into the
/// upload side of `slot`.
fn gather_rows(grid: &[u8], rows: i64, row_bytes: usize, a: i64, b: i64, slot: &mut StagingSlot) {
    let mut at = 0u64;
    for (g, n) in wrapped_runs(rows, a, b) {
        let bytes = n as usize * row_bytes;
        let from = g as usize * row_bytes;
        slot.fill(at, &grid[from..from + bytes]);
        at += bytes as u64;
    }
}

/// Unwrapped rows `[a, b)` of a grid of `rows` rows as runs of consecutive grid rows: (first
/// grid row, rows), in order.
pub(crate) fn wrapped_runs(rows: i64, a: i64, b: i64) -> impl Iterator<Item = (i64, i64)> {
    let mut r = a;
    std::iter::from_fn(move || {
        (r < b).then(|| {
            let g = r.rem_euclid(rows);
            let n = (b - r).min(rows - g);
            r += n;
            (g, n)
        })
    })
}

/// Which host buffers a sweep reads and writes: sweeps alternate between `dst` and `scratch`
/// so that the last one writes `dst`.
fn sweep_io<'a>(
    sweep: u64,
    sweeps: u64,
    src: &'a [u8],
    dst: &'a mut [u8],
    scratch: &'a mut [u8],
) -> (&'a [u8], &'a mut [u8]) {
    let writes_dst = (sweeps - 1 - sweep).is_multiple_of(2);
    match (sweep, writes_dst) {
        (0, true) => (src, dst),
        (0, false) => (src, scratch),
        (_, true) => (scratch, dst),
        (_, false) => (dst, scratch),
    }
}

/// Run `job` by `plan` from the host grid `src` into `dst` (both the grid's bytes, C order).
/// Plans with more than one sweep need `scratch`, a second grid-sized buffer (a memory map
/// for grids larger than RAM). `progress(done, total)` is called after each sub-block.
pub fn run(
    gpu: &Gpu,
    kernel: &StencilKernel,
    plan: &StencilPlan,
    src: &[u8],
    dst: &mut [u8],
    scratch: Option<&mut [u8]>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<StencilStats> {
    let job = &kernel.job;
    let grid_bytes = job.shape.cells() as u64 * job.cell_bytes();
    if src.len() as u64 != grid_bytes || dst.len() as u64 != grid_bytes {
        return Err(Error::InvalidInput(format!(
            "the grid {} of {} needs {grid_bytes} bytes in and out",
            job.shape, job.dtype
        )));
    }
    let mut no_scratch = Vec::new();
    let scratch = match scratch {
        Some(s) => s,
        None if plan.sweeps > 1 => {
            return Err(Error::InvalidInput(
                "a plan of several sweeps needs a scratch grid".into(),
            ))
        }
        None => &mut no_scratch[..],
    };
    let start = Instant::now();
    let rows = job.shape.rows() as i64;
    let rb = job.row_bytes();
    let radius = job.stencil.radius as u64;
    let blocks = plan.sub_blocks(&job.problem());
    let max_resident = blocks.iter().map(|b| b.hi - b.lo).max().unwrap_or(1) as u64;
    let max_new = blocks.iter().map(|b| b.hi - b.new_lo).max().unwrap_or(1) as u64;
    let max_out = blocks.iter().map(|b| b.z1 - b.z0).max().unwrap_or(1) as u64;
    let max_keep = blocks.iter().map(|b| b.hi - b.keep_lo).max().unwrap_or(0) as u64;
    if max_resident * rb > gpu.max_binding() {
        return Err(Error::TooLarge(format!(
            "a resident region of {} bytes exceeds the largest binding ({} bytes) on {}",
            max_resident * rb,
            gpu.max_binding(),
            gpu.adapter.name
        )));
    }
    let res = [
        transfer::storage_buffer(gpu, "stencil resident A", max_resident * rb)?,
        transfer::storage_buffer(gpu, "stencil resident B", max_resident * rb)?,
    ];
    let keep = transfer::storage_buffer(gpu, "stencil overlap", max_keep * rb)?;
    let mut slots = Vec::new();
    for _ in 0..gpusort_sched::stencil::SLOTS_IN_FLIGHT {
        slots.push(StagingSlot::new(gpu, max_new * rb, max_out * rb)?);
    }
    let mut stats = StencilStats::default();
    let total = blocks.len() as u64;
    // the sub-block whose download is still to be written to the host
    let mut pending: Option<(usize, SubBlock)> = None;
    let (wait_s, drain_s) = (std::cell::Cell::new(0.0), std::cell::Cell::new(0.0));
    let timed =
        |cell: &std::cell::Cell<f64>, t: Instant| cell.set(cell.get() + t.elapsed().as_secs_f64());
    let finish = |slot: &mut StagingSlot, b: &SubBlock, dst: &mut [u8], scratch: &mut [u8]| {
        let t = Instant::now();
        slot.wait_download(gpu)?;
        timed(&wait_s, t);
        let t = Instant::now();
        let (_, dest) = sweep_io(b.sweep, plan.sweeps, src, dst, scratch);
        let len = (b.z1 - b.z0) as u64 * rb;
        let from = b.z0 as usize * rb as usize;
        slot.drain(0, &mut dest[from..from + len as usize]);
        slot.done_draining();
        timed(&drain_s, t);
        Ok::<(), Error>(())
    };
    for (j, b) in blocks.iter().enumerate() {
        let s = j % slots.len();
        // The first sub-block of a sweep reads what the previous sweep wrote: finish it first.
        if b.k == 0 {
            if let Some((ps, pb)) = pending.take() {
                finish(&mut slots[ps], &pb, dst, scratch)?;
                progress(j as u64, total);
            }
        }
        let slot = &mut slots[s];
        let t = Instant::now();
        slot.wait_upload(gpu)?;
        timed(&wait_s, t);
        let new_bytes = (b.hi - b.new_lo) as u64 * rb;
        let t = Instant::now();
        {
            let (source, _) = sweep_io(b.sweep, plan.sweeps, src, dst, scratch);
            gather_rows(source, rows, rb as usize, b.new_lo, b.hi, slot);
        }
        slot.done_filling();
        stats.fill_s += t.elapsed().as_secs_f64();

        // pass parameters: a pass ending at step t computes the rows still needed after it
        stats.cell_updates += b.rows_computed(radius) * job.shape.row_cells() as u64;
        let mut params = ParamBlocks::new(gpu);
        let mut passes = Vec::new();
        let mut t = 0u64;
        for k in kernel.passes(b.steps) {
            t += k;
            let (c0, c1) = b.rows_after(t, radius);
            let region = kernel.params(StepParams::region(rows, b.lo, b.hi, c0, c1));
            let off = params.push(&region);
            passes.push((off, region, k));
        }
        let pbuf = params.finish(gpu, "stencil params");
        let binds = [
            kernel.bind(gpu, &pbuf, &res[0], &res[1]),
            kernel.bind(gpu, &pbuf, &res[1], &res[0]),
        ];
        let mut enc = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("stencil block"),
            });
        let kept = (b.new_lo - b.lo) as u64 * rb;
        if kept > 0 {
            enc.copy_buffer_to_buffer(&keep, 0, &res[0], 0, kept);
        }
        if new_bytes > 0 {
            enc.copy_buffer_to_buffer(slot.upload_buffer(), 0, &res[0], kept, new_bytes);
        }
        let keep_bytes = (b.hi - b.keep_lo) as u64 * rb;
        if keep_bytes > 0 {
            let from = (b.keep_lo - b.lo) as u64 * rb;
            enc.copy_buffer_to_buffer(&res[0], from, &keep, 0, keep_bytes);
        }
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("stencil steps"),
                timestamp_writes: None,
            });
            for (i, (off, region, k)) in passes.iter().enumerate() {
                let (off, k) = (*off, *k);
                kernel.record_pass(gpu, &mut pass, &binds[i % 2], off, region, k);
            }
        }
        let out_len = (b.z1 - b.z0) as u64 * rb;
        let last = &res[passes.len() % 2];
        let at = (b.z0 - b.lo) as u64 * rb;
        enc.copy_buffer_to_buffer(last, at, slot.download_buffer(), 0, out_len);
        let idx = gpu.checked(|| gpu.queue.submit([enc.finish()]))?;
        slot.submitted(idx, out_len);
        stats.bytes_up += new_bytes;
        stats.bytes_down += out_len;
        stats.blocks_run += 1;
        // While the GPU runs this sub-block, write out the previous one.
        if let Some((ps, pb)) = pending.replace((s, *b)) {
            finish(&mut slots[ps], &pb, dst, scratch)?;
            progress(j as u64, total);
        }
    }
    if let Some((ps, pb)) = pending.take() {
        finish(&mut slots[ps], &pb, dst, scratch)?;
    }
    progress(total, total);
    gpu.wait()?;
    stats.seconds = start.elapsed().as_secs_f64();
    stats.wait_s = wait_s.get();
    stats.drain_s = drain_s.get();
    Ok(stats)
}

/// Measure what the planner needs on this device: upload and download bandwidth through mapped
/// staging, and the step kernel's cell rate, on a sample of the job's own grid shape (at most
/// `sample_bytes` of rows).
pub fn measure_speeds(gpu: &Gpu, kernel: &StencilKernel, sample_bytes: u64) -> Result<Speeds> {
    let job = &kernel.job;
    let rb = job.row_bytes();
    let rows = (sample_bytes / rb.max(1))
        .clamp(1, job.shape.rows() as u64)
        .min(gpu.max_binding() / rb.max(1))
        .max(1);
    let bytes = rows * rb;
    let host = vec![0u8; bytes as usize];
    let buf = transfer::storage_buffer(gpu, "stencil sample", bytes)?;
    let other = transfer::storage_buffer(gpu, "stencil sample out", bytes)?;
    transfer::upload(gpu, &buf, 0, &host)?; // warm-up
    let t = Instant::now();
    transfer::upload(gpu, &buf, 0, &host)?;
    let up = bytes as f64 / t.elapsed().as_secs_f64().max(1e-9);
    let mut back = vec![0u8; bytes as usize];
    transfer::download(gpu, &buf, 0, &mut back)?; // warm-up
                                                  // timed into memory never touched before, as a streamed result lands in a new output file
    let mut fresh = vec![0u8; bytes as usize];
    let t = Instant::now();
    transfer::download(gpu, &buf, 0, &mut fresh)?;
    let down = bytes as f64 / t.elapsed().as_secs_f64().max(1e-9);
    let mut params = ParamBlocks::new(gpu);
    let region = kernel.params(StepParams::whole(rows));
    let off = params.push(&region);
    let pbuf = params.finish(gpu, "stencil params");
    let bind = kernel.bind(gpu, &pbuf, &buf, &other);
    // the cell rate per step of the kernel's own passes (K steps in one where it streams)
    let k = kernel.blocking().map_or(1, |b| b.steps as u64);
    let mut rate = 0.0f64;
    for _ in 0..3 {
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            kernel.record_pass(gpu, &mut pass, &bind, off, &region, k);
        }
        let t = Instant::now();
        gpu.queue.submit([enc.finish()]);
        gpu.wait()?;
        let cells = (k * rows * job.shape.row_cells() as u64) as f64;
        rate = rate.max(cells / t.elapsed().as_secs_f64().max(1e-9));
    }
    Ok(Speeds {
        upload_bytes_per_s: up,
        download_bytes_per_s: down,
        cells_per_s: rate,
    })
}

/// Run `job` by `plan` on a grid in host memory (allocates the output and any scratch grid).
pub fn apply<T: StencilValue>(
    gpu: &Gpu,
    kernel: &StencilKernel,
    plan: &StencilPlan,
    grid: &[T],
) -> Result<(Vec<T>, StencilStats)> {
    let mut out: Vec<T> = transfer::zeroed_vec(grid.len()); // zero pages, not a fill
    let stats = apply_into(gpu, kernel, plan, grid, &mut out)?;
    Ok((out, stats))
}

/// [`apply`] into `out` (the grid's size), every cell of which it writes: a caller's reused
/// memory (the Python package's recycled result arrays) instead of fresh pages.
pub fn apply_into<T: StencilValue>(
    gpu: &Gpu,
    kernel: &StencilKernel,
    plan: &StencilPlan,
    grid: &[T],
    out: &mut [T],
) -> Result<StencilStats> {
    if T::TYPE != kernel.job.dtype {
        return Err(Error::InvalidInput(format!(
            "the kernel was built for {} grids, not {}",
            kernel.job.dtype,
            T::TYPE
        )));
    }
    crate::scan::check_lengths(grid.len(), out.len())?;
    let bytes = std::mem::size_of_val(grid) as u64;
    if plan.in_core && plan.sweeps == 1 && bytes <= gpu.max_binding() {
        // in core: through the staging ring both ways and every step on the GPU, instead of
        // the streamer's staging buffers of a whole sub-block (allocated on every call: 2.8 s
        // of a 1 GiB grid's 3 s on the H100)
        let t = Instant::now();
        let a = transfer::storage_buffer(gpu, "grid", bytes)?;
        let b = transfer::storage_buffer(gpu, "grid'", bytes)?;
        transfer::upload(gpu, &a, 0, bytemuck::cast_slice(grid))?;
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        let result = kernel.record_steps(gpu, &mut encoder, &a, &b, kernel.job.steps)?;
        gpu.queue.submit([encoder.finish()]);
        gpu.wait()?;
        transfer::download(gpu, result, 0, bytemuck::cast_slice_mut(out))?;
        return Ok(StencilStats {
            seconds: t.elapsed().as_secs_f64(),
            blocks_run: 1,
            bytes_up: bytes,
            bytes_down: bytes,
            cell_updates: kernel.job.shape.cells() as u64 * kernel.job.steps as u64,
            ..Default::default()
        });
    }
    let mut scratch = vec![
        0u8;
        if plan.sweeps > 1 {
            std::mem::size_of_val(grid)
        } else {
            0
        }
    ];
    run(
        gpu,
        kernel,
        plan,
        bytemuck::cast_slice(grid),
        bytemuck::cast_slice_mut(out),
        (plan.sweeps > 1).then_some(&mut scratch[..]),
        &mut |_, _| {},
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(shape: &[usize], stencil: Stencil) -> StencilJob {
        StencilJob {
            shape: GridShape::new(shape).unwrap(),
            stencil,
            boundary: Boundary::Reflect,
            cval: 0.0,
            steps: 4,
            dtype: KeyType::F32,
        }
    }

    #[test]
    fn four_rows_by_default_only_for_wide_2d_stars() {
        let rows = |shape: &[usize], st: Result<Stencil>| {
            KernelChoice::for_job(&job(shape, st.unwrap())).rows
        };
        assert_eq!(rows(&[64, 64], Stencil::star(2, 3)), 4);
        assert_eq!(rows(&[64, 64], Stencil::star(2, 4)), 4);
        assert_eq!(rows(&[64, 64], Stencil::star(2, 2)), 2);
        assert_eq!(rows(&[64, 64], Stencil::boxed(2, 3)), 2);
        assert_eq!(rows(&[16, 16, 16], Stencil::star(3, 4)), 2);
        assert_eq!(
            KernelChoice::for_job(&job(&[64, 64], Stencil::star(2, 1).unwrap())),
            KernelChoice::default()
        );
    }

    /// In registers, the general kernel's chunks leave a last chunk of at least K·RZ rows (or
    /// none), so that only one chunk at a grid's end falls out of the interior box.
    #[test]
    fn chunks_beside_passes_in_registers_end_whole() {
        for (radius, steps) in [(1, 4), (2, 3), (3, 3), (1, 8)] {
            let j = job(&[4096, 256], Stencil::star(2, radius).unwrap());
            let b = Blocking {
                steps,
                tile_rows: 1,
                tile_vec4s: 32,
                planes: 4,
                workgroup: 128,
                lanes: true,
            };
            let kr = u64::from(steps * radius);
            for rows in 4 * kr..4096 {
                let c = b.chunk_rows(&j, rows);
                assert!((4 * kr..=6 * kr).contains(&c), "{rows} rows: chunks of {c}");
                assert!(
                    rows.is_multiple_of(c) || rows % c >= kr,
                    "{rows} rows, K·RZ = {kr}: chunks of {c} leave {}",
                    rows % c
                );
            }
        }
    }
}
