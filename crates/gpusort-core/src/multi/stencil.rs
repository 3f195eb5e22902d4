//! Stencils over a device group: the grid split along its outermost axis (rows of a 2-D grid,
//! planes of a 3-D one), each device keeping its part resident.
//!
//! Device d owns rows `[z0, z1)` and holds `[z0 − h, z1 + h)` with h = R·T (clipped at the grid's
//! edges, or wrapped for `wrap`). It runs T steps, each pass computing only the rows still
//! needed (as the out-of-core streamer's sub-blocks do), so after T steps its own rows are exact;
//! then every device publishes the h rows at each end of its part to host memory and reads its
//! halo rows from its neighbours', and the next T steps start. Every cell is computed by the
//! same kernel from the same values as on one device: results are bit-identical.
//!
//! T is as large as keeps the redundant halo work small (h at most 1/16 of the smallest part):
//! each exchange costs a few milliseconds of host round trips, so fewer exchanges pay more than
//! overlapping them.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Instant;

use crate::device::transfer;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::multi::{split_even, DeviceGroup};
use crate::stencil::{Boundary, StencilJob, StencilKernel, StencilValue};

/// What a group stencil run did.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GroupStencilStats {
    pub seconds: f64,
    /// Rows (planes) each device owns.
    pub parts: Vec<usize>,
    /// Steps between exchanges (T), and how many rounds of them ran.
    pub round_steps: u64,
    pub rounds: u64,
    /// The slowest device's seconds uploading its part, computing, exchanging halos and
    /// downloading its rows.
    pub upload_s: f64,
    pub compute_s: f64,
    pub exchange_s: f64,
    pub download_s: f64,
}

/// The rows each device owns: as even as whole rows allow, one device per row at most.
pub fn parts(group: &DeviceGroup, job: &StencilJob) -> Vec<Range<usize>> {
    let rows = job.shape.rows();
    split_even(rows, group.len().min(rows).max(1), 1)
}

/// Steps between halo exchanges: halos of at most 1/16 of the smallest part (the redundant work
/// stays within a few percent), at least one step, at most the job's steps.
pub fn round_steps(job: &StencilJob, parts: &[Range<usize>]) -> u64 {
    let smallest = parts.iter().map(Range::len).min().unwrap_or(1) as u64;
    let radius = (job.stencil.radius() as u64).max(1);
    (smallest / (16 * radius)).clamp(1, (job.steps as u64).max(1))
}

/// The rows a device holds for its part `[z0, z1)` with halos of `h` rows (unwrapped).
fn resident(job: &StencilJob, z: &Range<usize>, h: i64) -> (i64, i64) {
    let rows = job.shape.rows() as i64;
    let (z0, z1) = (z.start as i64, z.end as i64);
    if job.boundary == Boundary::Wrap {
        (z0 - h, z1 + h)
    } else {
        ((z0 - h).max(0), (z1 + h).min(rows))
    }
}

/// Whether every device of `group` can hold its part with halos (two buffers within one binding
/// each); where not, run the job on one device, whose streamer handles any size.
pub fn fits(group: &DeviceGroup, job: &StencilJob) -> bool {
    let parts = parts(group, job);
    let h = (job.stencil.radius() as u64 * round_steps(job, &parts)) as i64;
    parts.iter().zip(group.gpus()).all(|(z, gpu)| {
        let (lo, hi) = resident(job, z, h);
        let bytes = (hi - lo) as u64 * job.row_bytes();
        bytes <= gpu.max_binding() && bytes <= gpu.limits.max_buffer_size
    })
}

/// `job`'s steps over the grid `grid` on every device of `group` (`kernels[d]` built for `job`
/// on device d): the same result as one device, bit for bit.
pub fn apply<T: StencilValue>(
    group: &DeviceGroup,
    kernels: &[StencilKernel],
    grid: &[T],
) -> Result<(Vec<T>, GroupStencilStats)> {
    let mut out: Vec<T> = bytemuck::zeroed_vec(grid.len());
    let stats = run(
        group,
        kernels,
        bytemuck::cast_slice(grid),
        bytemuck::cast_slice_mut(&mut out),
    )?;
    Ok((out, stats))
}

/// Rows `[a, b)` (unwrapped) of `grid` uploaded into `buf` from its start, a run of whole rows
/// per wrap.
fn upload_rows(
    gpu: &Gpu,
    buf: &wgpu::Buffer,
    grid: &[u8],
    rows: i64,
    rb: usize,
    a: i64,
    b: i64,
) -> Result<()> {
    let mut at = 0u64;
    let mut r = a;
    while r < b {
        let g = r.rem_euclid(rows);
        let n = (b - r).min(rows - g);
        let from = g as usize * rb;
        let bytes = n as usize * rb;
        transfer::upload(gpu, buf, at, &grid[from..from + bytes])?;
        at += bytes as u64;
        r += n;
    }
    Ok(())
}

/// The bytes of the host grid `src` through the job into `dst` (C order, the grid's size each).
pub fn run(
    group: &DeviceGroup,
    kernels: &[StencilKernel],
    src: &[u8],
    dst: &mut [u8],
) -> Result<GroupStencilStats> {
    let job = kernels
        .first()
        .ok_or_else(|| Error::InvalidInput("no stencil kernels".into()))?
        .job()
        .clone();
    let grid_bytes = job.shape.cells() as u64 * job.cell_bytes();
    if src.len() as u64 != grid_bytes || dst.len() as u64 != grid_bytes {
        return Err(Error::InvalidInput(format!(
            "the grid {} of {} needs {grid_bytes} bytes in and out",
            job.shape, job.dtype
        )));
    }
    let start = Instant::now();
    let parts = parts(group, &job);
    let devices = parts.len();
    if kernels.len() < devices {
        return Err(Error::InvalidInput(format!(
            "{} stencil kernels for {devices} devices",
            kernels.len()
        )));
    }
    let steps = job.steps as u64;
    let t_round = round_steps(&job, &parts);
    let rounds = steps.div_ceil(t_round).max(1);
    let rows = job.shape.rows() as i64;
    let rb = job.row_bytes() as usize;
    let h = job.stencil.radius() as i64 * t_round as i64;
    // each device's published edge rows: (first row, bytes of whole rows)
    let published: Vec<Mutex<Vec<(i64, Vec<u8>)>>> =
        (0..devices).map(|_| Mutex::new(Vec::new())).collect();
    let barrier = Barrier::new(devices);
    let failed = AtomicBool::new(false);
    // each device's own rows of the output
    let mut outs: Vec<&mut [u8]> = Vec::new();
    let mut rest = dst;
    for z in &parts {
        let (a, b) = std::mem::take(&mut rest).split_at_mut(z.len() * rb);
        outs.push(a);
        rest = b;
    }
    let owner = |g: i64| parts.partition_point(|p| p.end as i64 <= g);
    let results: Vec<Result<[f64; 4]>> = std::thread::scope(|s| {
        let handles: Vec<_> = outs
            .into_iter()
            .enumerate()
            .map(|(d, out)| {
                let (gpu, kernel, z) = (&group.gpus()[d], &kernels[d], parts[d].clone());
                let (published, barrier, failed, job) = (&published, &barrier, &failed, &job);
                s.spawn(move || -> Result<[f64; 4]> {
                    let mut times = [0.0f64; 4];
                    let (lo, hi) = resident(job, &z, h);
                    let (z0, z1) = (z.start as i64, z.end as i64);
                    let bytes = (hi - lo) as u64 * rb as u64;
                    let mut own: Result<()> = Ok(());
                    let fail = |e: Error, own: &mut Result<()>| {
                        failed.store(true, Ordering::SeqCst);
                        *own = Err(e);
                    };
                    let t = Instant::now();
                    let bufs = (|| {
                        let a = transfer::storage_buffer(gpu, "stencil part", bytes)?;
                        let b = transfer::storage_buffer(gpu, "stencil part'", bytes)?;
                        upload_rows(gpu, &a, src, rows, rb, lo, hi)?;
                        Ok::<_, Error>((a, b))
                    })();
                    times[0] = t.elapsed().as_secs_f64();
                    let (mut cur, mut other) = match bufs {
                        Ok(p) => (Some(p.0), Some(p.1)),
                        Err(e) => {
                            fail(e, &mut own);
                            (None, None)
                        }
                    };
                    for round in 0..rounds {
                        let ts = (steps - round * t_round).min(t_round);
                        let last = round + 1 == rounds;
                        if !failed.load(Ordering::SeqCst) {
                            let (a, b) =
                                (cur.take().expect("buffers"), other.take().expect("buffers"));
                            let t = Instant::now();
                            let r = (|| {
                                let mut enc =
                                    gpu.device.create_command_encoder(&Default::default());
                                let result = kernel.record_region_steps(
                                    gpu,
                                    &mut enc,
                                    &a,
                                    &b,
                                    (lo, hi),
                                    (z0, z1),
                                    ts,
                                );
                                let a_holds = std::ptr::eq(result, &a);
                                gpu.checked(|| gpu.queue.submit([enc.finish()]))?;
                                gpu.wait()?;
                                Ok::<bool, Error>(a_holds)
                            })();
                            times[1] += t.elapsed().as_secs_f64();
                            match r {
                                Ok(true) => (cur, other) = (Some(a), Some(b)),
                                Ok(false) => (cur, other) = (Some(b), Some(a)),
                                Err(e) => fail(e, &mut own),
                            }
                        }
                        if last {
                            break;
                        }
                        // publish this part's edge rows
                        let t = Instant::now();
                        if !failed.load(Ordering::SeqCst) {
                            let buf = cur.as_ref().expect("buffers");
                            let e = h.min(z1 - z0);
                            let mut bands = vec![z0..z0 + e];
                            if z1 - e > z0 + e {
                                bands.push(z1 - e..z1);
                            } else {
                                bands[0] = z0..z1;
                            }
                            let mut edges = Vec::new();
                            for band in bands {
                                let mut host = vec![0u8; (band.end - band.start) as usize * rb];
                                match transfer::download(
                                    gpu,
                                    buf,
                                    (band.start - lo) as u64 * rb as u64,
                                    &mut host,
                                ) {
                                    Ok(()) => edges.push((band.start, host)),
                                    Err(e) => fail(e, &mut own),
                                }
                            }
                            *published[d].lock().unwrap_or_else(|p| p.into_inner()) = edges;
                        }
                        barrier.wait();
                        // read the halo rows from the parts that own them
                        if !failed.load(Ordering::SeqCst) {
                            let buf = cur.as_ref().expect("buffers");
                            for (a, b) in [(lo, z0), (z1, hi)] {
                                if a >= b {
                                    continue;
                                }
                                let mut halo = vec![0u8; (b - a) as usize * rb];
                                for r in a..b {
                                    let g = r.rem_euclid(rows);
                                    let edges = published[owner(g)]
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner());
                                    let (first, band) = edges
                                        .iter()
                                        .find(|(f, band)| {
                                            g >= *f && g < *f + (band.len() / rb) as i64
                                        })
                                        .expect("a halo row lies in its owner's published edge");
                                    let from = (g - first) as usize * rb;
                                    let to = (r - a) as usize * rb;
                                    halo[to..to + rb].copy_from_slice(&band[from..from + rb]);
                                }
                                if let Err(e) =
                                    transfer::upload(gpu, buf, (a - lo) as u64 * rb as u64, &halo)
                                {
                                    fail(e, &mut own);
                                }
                            }
                        }
                        times[2] += t.elapsed().as_secs_f64();
                        // nobody publishes the next round's edges before everyone has read these
                        barrier.wait();
                    }
                    if !failed.load(Ordering::SeqCst) {
                        let t = Instant::now();
                        let buf = cur.as_ref().expect("buffers");
                        if let Err(e) =
                            transfer::download(gpu, buf, (z0 - lo) as u64 * rb as u64, out)
                        {
                            fail(e, &mut own);
                        }
                        times[3] = t.elapsed().as_secs_f64();
                    }
                    own.map(|()| times)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::DeviceLost("a device's thread panicked".into())))
            })
            .collect()
    });
    let mut stats = GroupStencilStats {
        parts: parts.iter().map(Range::len).collect(),
        round_steps: t_round,
        rounds,
        ..Default::default()
    };
    for r in results {
        let t = r?;
        stats.upload_s = stats.upload_s.max(t[0]);
        stats.compute_s = stats.compute_s.max(t[1]);
        stats.exchange_s = stats.exchange_s.max(t[2]);
        stats.download_s = stats.download_s.max(t[3]);
    }
    if failed.load(Ordering::SeqCst) {
        return Err(Error::DeviceLost("a device of the group failed".into()));
    }
    stats.seconds = start.elapsed().as_secs_f64();
    Ok(stats)
}
