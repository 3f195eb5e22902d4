//! The streamer: runs a job by a plan from host memory, sub-block by sub-block.

use std::ops::ControlFlow;
use std::time::Instant;

use gpusort_sched::stencil::{Speeds, StencilPlan, SubBlock};

use super::job::*;
use super::kernel::*;
use super::params::*;
use crate::device::kernel::ParamBlocks;
use crate::device::transfer::{self, StagingSlot};
use crate::device::Gpu;
use crate::error::{Error, Result};

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
/// for grids larger than RAM). `progress(done, total)` is called after each sub-block written
/// out; where it breaks, the job stops there ([`Error::Cancelled`], the GPU idle again and `dst`
/// partly written).
pub fn run(
    gpu: &Gpu,
    kernel: &StencilKernel,
    plan: &StencilPlan,
    src: &[u8],
    dst: &mut [u8],
    scratch: Option<&mut [u8]>,
    progress: &mut dyn FnMut(u64, u64) -> ControlFlow<()>,
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
    // a break from progress: wait for what was submitted (its staging is dropped with it)
    let stopped = |flow: ControlFlow<()>| match flow {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(()) => {
            gpu.wait()?;
            Err(Error::Cancelled)
        }
    };
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
                stopped(progress(j as u64, total))?;
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
            stopped(progress(j as u64, total))?;
        }
    }
    if let Some((ps, pb)) = pending.take() {
        finish(&mut slots[ps], &pb, dst, scratch)?;
    }
    let _ = progress(total, total); // (done: nothing left to stop)
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

/// In core: through the staging ring both ways and every step on the GPU, instead of the
/// streamer's staging buffers of a whole sub-block (allocated on every call: 2.8 s of a 1 GiB
/// grid's 3 s on the H100). Without `stop` the steps go in one submission; with it, in
/// submissions sized as [`apply_into_until`] says, `stop` asked before each.
fn in_core<T: StencilValue>(
    gpu: &Gpu,
    kernel: &StencilKernel,
    grid: &[T],
    out: &mut [T],
    stop: Option<&dyn Fn() -> bool>,
) -> Result<StencilStats> {
    let t = Instant::now();
    let bytes = std::mem::size_of_val(grid) as u64;
    let a = transfer::storage_buffer(gpu, "grid", bytes)?;
    let b = transfer::storage_buffer(gpu, "grid'", bytes)?;
    transfer::upload(gpu, &a, 0, bytemuck::cast_slice(grid))?;
    let (mut cur, mut other) = (&a, &b);
    let total = kernel.job.steps;
    let (mut done, mut chunk) = (0, if stop.is_some() { total.min(8) } else { total });
    while done < total {
        if stop.is_some_and(|stop| stop()) {
            return Err(Error::Cancelled);
        }
        let began = Instant::now();
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        let result = kernel.record_steps(gpu, &mut encoder, cur, other, chunk)?;
        gpu.queue.submit([encoder.finish()]);
        gpu.wait()?;
        if std::ptr::eq(result, other) {
            std::mem::swap(&mut cur, &mut other);
        }
        done += chunk;
        let per_step = began.elapsed().as_secs_f64() / chunk as f64;
        let next = (SUBMISSION_SECONDS / per_step.max(1e-9)).min(u32::MAX as f64) as u32;
        chunk = next.clamp(1, (total - done).max(1));
    }
    transfer::download(gpu, cur, 0, bytemuck::cast_slice_mut(out))?;
    Ok(StencilStats {
        seconds: t.elapsed().as_secs_f64(),
        blocks_run: 1,
        bytes_up: bytes,
        bytes_down: bytes,
        cell_updates: kernel.job.shape.cells() as u64 * total as u64,
        ..Default::default()
    })
}

/// About how long one submission of [`apply_into_until`] keeps the GPU: how soon a stop is
/// seen (a latency, not a speed: a submission's gap costs a fraction of a percent of it).
const SUBMISSION_SECONDS: f64 = 0.05;

/// [`apply_into`] that stops between submissions once `stop()` holds ([`Error::Cancelled`]), so
/// that a caller who gives up (the Python package on Ctrl-C) frees the GPU soon. An in-core job's
/// steps go to the GPU a few at first, then in submissions of about 50 ms each as the first ones
/// measured; the results are the same bit for bit (steps are steps, however submitted). Jobs out
/// of core stop after the sub-block in flight when `stop()` is seen.
pub fn apply_into_until<T: StencilValue>(
    gpu: &Gpu,
    kernel: &StencilKernel,
    plan: &StencilPlan,
    grid: &[T],
    out: &mut [T],
    stop: &dyn Fn() -> bool,
) -> Result<StencilStats> {
    apply_checked(gpu, kernel, plan, grid, out, Some(stop))
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
    apply_checked(gpu, kernel, plan, grid, out, None)
}

/// The grid and kernel checked, then in core or streamed; `stop` as in [`apply_into_until`].
fn apply_checked<T: StencilValue>(
    gpu: &Gpu,
    kernel: &StencilKernel,
    plan: &StencilPlan,
    grid: &[T],
    out: &mut [T],
    stop: Option<&dyn Fn() -> bool>,
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
        return in_core(gpu, kernel, grid, out, stop);
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
        &mut |_, _| match stop.is_some_and(|stop| stop()) {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        },
    )
}
