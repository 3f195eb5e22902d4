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

/// Columns of an on-chip tile including its halo: one per invocation, WG / 64 rows at a time.
const TILE_WIDTH: u32 = 64;

/// The shape of the on-chip temporal blocking pass (`shaders/stencil_tiled.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileConfig {
    /// Output tile rows and columns per workgroup.
    pub rows: u32,
    pub cols: u32,
    /// Steps per pass.
    pub steps: u32,
}

impl TileConfig {
    /// The largest time block (2..=4 steps, a halo of at most 8 cells) whose two tile copies fit
    /// `workgroup_bytes`, for 2-D jobs; None where no such tile exists (3-D grids, whose halos
    /// would be 3-D too, and wide stencils, whose halos outgrow workgroup memory).
    pub fn choose(job: &StencilJob, workgroup_bytes: u32) -> Option<TileConfig> {
        TileConfig::choose_up_to(job, workgroup_bytes, 4)
    }

    /// Like [`TileConfig::choose`] with at most `max_steps` steps per pass (for measuring).
    pub fn choose_up_to(
        job: &StencilJob,
        workgroup_bytes: u32,
        max_steps: u32,
    ) -> Option<TileConfig> {
        if job.shape.dims() != 2 {
            return None;
        }
        let [rz, _, rx] = job.stencil.reach();
        let r = rz.max(rx).max(1) as u32;
        for k in (2..=max_steps).rev() {
            let halo = r * k;
            if halo > 8 {
                continue;
            }
            // 64 columns with the halo: one per invocation (see stencil_tiled.wgsl)
            let cols = TILE_WIDTH - 2 * halo;
            // 20 rows measured best on an H100 (taller tiles cut the redundant halo work but
            // fewer workgroups fit an SM)
            for rows in [20, 16, 8] {
                let bytes = 2 * (rows + 2 * halo) * TILE_WIDTH * job.cell_bytes() as u32;
                if bytes <= workgroup_bytes {
                    return Some(TileConfig {
                        rows,
                        cols,
                        steps: k,
                    });
                }
            }
        }
        None
    }

    fn halo(&self, job: &StencilJob) -> u32 {
        let [rz, _, rx] = job.stencil.reach();
        rz.max(rx).max(1) as u32 * self.steps
    }
}

/// The kernel source for a job: the prelude constants and the generated tap code, with the
/// on-chip temporal blocking pass where `tile` is given.
pub fn source(job: &StencilJob, tile: Option<TileConfig>) -> String {
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
    let indent = |text: &str, n: usize| -> String {
        text.lines()
            .map(|l| format!("{}{l}\n", " ".repeat(n)))
            .collect()
    };
    let direct = gather(
        &|t| {
            let [dz, dy, dx] = t.offset;
            format!(
                "src[c + {}]",
                dz as i64 * plane + dy as i64 * nx as i64 + dx as i64
            )
        },
        "src[c + o.w]",
    );
    let fetch = gather(
        &|t| {
            let [dz, dy, dx] = t.offset;
            format!("fetch(zr + {dz}, y + {dy}, x + {dx})")
        },
        "fetch(zr + o.x, y + o.y, x + o.z)",
    );
    let family = crate::wgsl::STENCIL
        .replace("        // @generated-direct\n", &indent(&direct, 8))
        .replace("        // @generated-fetch\n", &indent(&fetch, 8))
        .replace("    // @generated-sum\n", &indent(&sum, 4));
    s.push_str(&family);
    if let Some(t) = tile {
        let halo = t.halo(job);
        let lw = (t.cols + 2 * halo) as i64;
        let g = gather(
            &|tap| {
                let [dz, _, dx] = tap.offset;
                format!("tile[c + {}]", dz as i64 * lw + dx as i64)
            },
            "tile[c + o.x * LW + o.z]",
        );
        s.push_str(&format!(
            "\nconst TH: i32 = {};\nconst TW: i32 = {};\nconst K: i32 = {};\nconst HALO: i32 = {halo};\n",
            t.rows, t.cols, t.steps
        ));
        s.push_str(
            &crate::wgsl::STENCIL_TILED
                .replace("                // @generated-tile\n", &indent(&g, 16))
                .replace("                // @generated-sum\n", &indent(&sum, 16)),
        );
    }
    s
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
    _pad: [i32; 3],
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
            _pad: [0; 3],
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
    /// The on-chip temporal blocking pass, where it pays.
    tiled: Option<(TileConfig, wgpu::ComputePipeline)>,
}

impl StencilKernel {
    /// The kernels for `job`, one step per pass. On-chip temporal blocking is not the default:
    /// on an H100 a 9-tap step is bound by instruction issue rather than memory (one step per
    /// pass reaches 64% of copy bandwidth), so the redundant halo work of K steps per pass cost
    /// more than the traffic it saved (docs/BENCHMARKS.md). [`StencilKernel::with_tiles`] asks for it.
    pub fn new(gpu: &Gpu, job: &StencilJob) -> Result<StencilKernel> {
        StencilKernel::with_tiles(gpu, job, None)
    }

    /// The kernels for `job` with the given on-chip pass (None: one step per pass).
    pub fn with_tiles(
        gpu: &Gpu,
        job: &StencilJob,
        tile: Option<TileConfig>,
    ) -> Result<StencilKernel> {
        job.validate()?;
        if tile.is_some() && job.shape.dims() != 2 {
            return Err(Error::InvalidInput(
                "on-chip temporal blocking is for 2-D grids".into(),
            ));
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
        let module = kernel::module(gpu, "stencil", &source(job, tile))?;
        let pipeline = kernel::pipeline(gpu, &module, "step", &layout)?;
        let tiled = match tile {
            Some(t) => Some((t, kernel::pipeline(gpu, &module, "steps_tiled", &layout)?)),
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
            tiled,
        })
    }

    /// The on-chip pass in use, if any.
    pub fn tile(&self) -> Option<TileConfig> {
        self.tiled.as_ref().map(|(t, _)| *t)
    }

    /// How `steps` steps are split into passes: on-chip passes of K steps while at least K
    /// remain, single steps for the rest.
    fn passes(&self, steps: u64) -> Vec<u64> {
        let k = self.tile().map_or(1, |t| t.steps as u64);
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

    /// Record one pass of `steps` steps (1, or the on-chip K) producing `comp_rows` resident
    /// rows; the parameter block at `offset` says which, and `bind` which buffer is read and
    /// which written.
    fn record_pass(
        &self,
        gpu: &Gpu,
        pass: &mut wgpu::ComputePass<'_>,
        bind: &wgpu::BindGroup,
        offset: u32,
        comp_rows: u64,
        steps: u64,
    ) {
        match &self.tiled {
            Some((t, pipeline)) if steps > 1 => {
                debug_assert_eq!(steps, t.steps as u64);
                let tiles_x = (self.job.shape.as_3d()[2] as u64).div_ceil(t.cols as u64);
                let groups = comp_rows.div_ceil(t.rows as u64) * tiles_x;
                kernel::dispatch(gpu, pass, pipeline, bind, &[offset], groups as u32);
            }
            _ => {
                let cells = comp_rows * self.job.shape.row_cells() as u64;
                let groups = cells.div_ceil(WG as u64) as u32;
                kernel::dispatch(gpu, pass, &self.pipeline, bind, &[offset], groups);
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
        let off = params.push(&StepParams::whole(rows));
        let pbuf = params.finish(gpu, "stencil params");
        let binds = [self.bind(gpu, &pbuf, a, b), self.bind(gpu, &pbuf, b, a)];
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("stencil steps"),
            timestamp_writes: None,
        });
        let passes = self.passes(steps as u64);
        for (i, &k) in passes.iter().enumerate() {
            self.record_pass(gpu, &mut pass, &binds[i % 2], off, rows, k);
        }
        Ok(if passes.len().is_multiple_of(2) { a } else { b })
    }
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
fn gather_rows(grid: &[u8], rows: i64, row_bytes: usize, a: i64, b: i64, slot: &StagingSlot) {
    let mut at = 0u64;
    let mut r = a;
    while r < b {
        let g = r.rem_euclid(rows);
        let n = (b - r).min(rows - g);
        let bytes = n as usize * row_bytes;
        let from = g as usize * row_bytes;
        slot.fill(at, &grid[from..from + bytes]);
        at += bytes as u64;
        r += n;
    }
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
            let off = params.push(&StepParams::region(rows, b.lo, b.hi, c0, c1));
            passes.push((off, (c1 - c0) as u64, k));
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
            for (i, &(off, comp_rows, k)) in passes.iter().enumerate() {
                kernel.record_pass(gpu, &mut pass, &binds[i % 2], off, comp_rows, k);
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
    let off = params.push(&StepParams::whole(rows));
    let pbuf = params.finish(gpu, "stencil params");
    let bind = kernel.bind(gpu, &pbuf, &buf, &other);
    let mut rate = 0.0f64;
    for _ in 0..3 {
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            kernel.record_pass(gpu, &mut pass, &bind, off, rows, 1);
        }
        let t = Instant::now();
        gpu.queue.submit([enc.finish()]);
        gpu.wait()?;
        let cells = (rows * job.shape.row_cells() as u64) as f64;
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
    if T::TYPE != kernel.job.dtype {
        return Err(Error::InvalidInput(format!(
            "the kernel was built for {} grids, not {}",
            kernel.job.dtype,
            T::TYPE
        )));
    }
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
        let mut out: Vec<T> = bytemuck::zeroed_vec(grid.len());
        transfer::download(gpu, result, 0, bytemuck::cast_slice_mut(&mut out))?;
        let stats = StencilStats {
            seconds: t.elapsed().as_secs_f64(),
            blocks_run: 1,
            bytes_up: bytes,
            bytes_down: bytes,
            cell_updates: kernel.job.shape.cells() as u64 * kernel.job.steps as u64,
            ..Default::default()
        };
        return Ok((out, stats));
    }
    let mut out: Vec<T> = bytemuck::zeroed_vec(grid.len()); // zero pages, not a fill
    let mut scratch = vec![
        0u8;
        if plan.sweeps > 1 {
            std::mem::size_of_val(grid)
        } else {
            0
        }
    ];
    let stats = run(
        gpu,
        kernel,
        plan,
        bytemuck::cast_slice(grid),
        bytemuck::cast_slice_mut(&mut out),
        (plan.sweeps > 1).then_some(&mut scratch[..]),
        &mut |_, _| {},
    )?;
    Ok((out, stats))
}
