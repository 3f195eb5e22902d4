//! How a job's steps run on the GPU: one step a pass (one or four cells an invocation) or
//! several steps a pass on chip (`Blocking`), chosen per job and device (`KernelChoice`).

use super::job::*;
use super::params::*;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::KeyType;

/// Stencils of up to this many taps get unrolled code; wider ones loop over a tap table.
pub(super) const UNROLL_TAPS: usize = 32;

/// Planes of a streamed pass's ring per level: level s trails level s-1 by `RB + RZ` planes and
/// reads `RB + 2·RZ` of them while `RB` more are written (stencil_vec.wgsl).
pub(super) fn ring_depth(job: &StencilJob, planes: u32) -> u32 {
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
pub(super) fn unrolled(job: &StencilJob) -> bool {
    job.stencil.taps().len() <= UNROLL_TAPS
}

/// Whether the taps fill the box of the stencil's reach: every tap row (dz, dy) then has the same
/// taps along x, and tap k sits at index ((dz + RZ)·(2·RY + 1) + dy + RY)·(2·RX + 1) + dx + RX.
pub(super) fn full_box(job: &StencilJob) -> bool {
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
pub(super) const LANES_WG: u32 = 128;

/// Lanes at each side of a `steps_lanes` strip whose cells K steps cannot compute.
pub(super) fn lane_halo(job: &StencilJob, steps: u32) -> u32 {
    (steps * job.stencil.reach()[2] as u32).div_ceil(4)
}

/// The x reach of a stencil in vec4s of cells.
pub(super) fn reach_vec4(job: &StencilJob) -> u32 {
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
    pub(super) fn plane_buffers(&self, job: &StencilJob, workgroup_bytes: u32) -> u32 {
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
    pub(super) fn plane_work(&self, job: &StencilJob, p: &StepParams, lanes: u32) -> (i64, u64) {
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
    pub(super) fn lane_work(&self, job: &StencilJob, p: &StepParams, lanes: u32) -> (i64, u64) {
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

    pub(super) fn halo_rows(&self, job: &StencilJob) -> u32 {
        job.stencil.reach()[1] as u32 * self.steps
    }

    pub(super) fn halo_vec4s(&self, job: &StencilJob) -> u32 {
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
    pub(super) fn chunk_rows(&self, job: &StencilJob, comp_rows: u64) -> u64 {
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
    pub(super) fn workgroups(&self, job: &StencilJob, comp_rows: u64) -> u64 {
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
    pub(super) fn interior(&self, job: &StencilJob, p: &StepParams) -> [i32; 6] {
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
    /// docs/BENCHMARKS.md, H100); more rows and streamed passes are for [`choose_kernel`](super::choose_kernel) to
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
pub struct StencilTuning {
    /// K for 2-D stencils of at most 9 taps reaching one row each way (3-row windows; 1: one
    /// step a pass), 1..=[`MAX_LANE_STEPS`].
    pub lanes_3_rows: Option<u32>,
    /// The same for those reaching two rows each way (5-row windows).
    pub lanes_5_rows: Option<u32>,
    /// K (1: one step a pass, else 2..=[`MAX_PLANE_STEPS`]), workgroup size and rows an
    /// invocation of `steps_planes` for 3-D stencils of at most 7 taps within one cell.
    pub planes_r1: Option<[u32; 3]>,
}

impl StencilTuning {
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
    /// [`choose_kernel`](super::choose_kernel) measures every K for jobs large enough to pay for it.
    pub fn for_device(gpu: &Gpu, job: &StencilJob) -> KernelChoice {
        KernelChoice::for_device_tuned(gpu, job, &StencilTuning::default())
    }

    /// [`KernelChoice::for_device`] with the steps a pass `tuning` measured on this device in
    /// place of the defaults, where it has them.
    pub fn for_device_tuned(gpu: &Gpu, job: &StencilJob, tuning: &StencilTuning) -> KernelChoice {
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

/// The window planes (indices m into `w{s}_{m}`) whose rows taps off their own row read, which
/// `steps_planes` keeps in workgroup memory: the planes of tap rows with dy != 0.
pub(super) fn shared_planes(job: &StencilJob) -> Vec<i32> {
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
