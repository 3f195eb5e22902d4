//! The compiled kernels of one job and the passes they record.

use std::time::Instant;

use super::choice::*;
use super::job::*;
use super::params::*;
use super::wgsl::*;
use crate::device::kernel::{self, BindLayout, ParamBlocks, Slot};
use crate::device::transfer;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::KeyType;

/// The compiled step kernel of one job.
pub struct StencilKernel {
    pub(super) job: StencilJob,
    layout: BindLayout,
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
        let layout = BindLayout::new(
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
        // uniform arrays have a 16-byte stride: four f32 or two f64 weights per element; where
        // the boundary value is not finite, one more element starts with it
        // (wgsl::weight_elements)
        let per16 = 16 / job.cell_bytes() as usize;
        let padded = job.stencil.taps.len().div_ceil(per16).max(1) * per16;
        let with_cval = !job.cval.is_finite();
        let weights = match job.dtype {
            KeyType::F64 => {
                let mut w: Vec<f64> = job.stencil.taps.iter().map(|t| t.weight).collect();
                w.resize(padded, 0.0);
                if with_cval {
                    w.push(job.cval);
                    w.resize(padded + per16, 0.0);
                }
                transfer::uniform_buffer(gpu, "stencil weights", bytemuck::cast_slice(&w))?
            }
            _ => {
                let mut w: Vec<f32> = job.stencil.taps.iter().map(|t| t.weight as f32).collect();
                w.resize(padded, 0.0);
                if with_cval {
                    w.push(job.cval as f32);
                    w.resize(padded + per16, 0.0);
                }
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
    pub(super) fn params(&self, mut region: StepParams) -> StepParams {
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
    pub(super) fn passes(&self, steps: u64) -> Vec<u64> {
        let k = self.blocking().map_or(1, |b| b.steps as u64);
        let mut out = vec![k; (steps / k) as usize];
        out.extend(std::iter::repeat_n(1, (steps % k) as usize));
        out
    }

    pub fn job(&self) -> &StencilJob {
        &self.job
    }

    /// A bind group reading `src` and writing `dst` with the parameter blocks in `params`.
    pub(super) fn bind(
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
    pub(super) fn record_pass(
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
    pub(crate) fn record_region_steps<'a>(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        (a, b): (&'a wgpu::Buffer, &'a wgpu::Buffer),
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
        StencilKernel::planned_tuned(gpu, job, &StencilTuning::default())
    }

    /// [`StencilKernel::planned`], taking the steps a pass `tuning` measured on this device
    /// (`gpusort tune`) where the job is not measured itself.
    pub fn planned_tuned(
        gpu: &Gpu,
        job: &StencilJob,
        tuning: &StencilTuning,
    ) -> Result<StencilKernel> {
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
