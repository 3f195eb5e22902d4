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
//! T is as large as keeps the redundant halo work small (h at most 1/16 of the smallest slab):
//! each exchange costs a few milliseconds of host round trips, so fewer exchanges pay more than
//! overlapping them. A part whose rows and halos exceed one binding is held as several slabs on
//! its device, exchanged like the others.

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
    /// Slabs each device holds its part in (more than one where a part with its halos exceeds
    /// one binding).
    pub slabs_per_device: usize,
    /// Steps between exchanges (T), and how many rounds of them ran.
    pub round_steps: u64,
    pub rounds: u64,
    /// The slowest device's seconds uploading its part, computing, exchanging halos (its own
    /// copies) and downloading its rows.
    pub upload_s: f64,
    pub compute_s: f64,
    pub exchange_s: f64,
    pub download_s: f64,
    /// The longest a device waited at the exchanges for the others.
    pub wait_s: f64,
}

/// How a job is laid out on a group: slabs of rows, `per_device` consecutive slabs a device,
/// T steps between exchanges, halos of h = R·T rows.
#[derive(Clone, Debug)]
pub struct Layout {
    pub slabs: Vec<Range<usize>>,
    pub per_device: usize,
    pub round_steps: u64,
    pub halo: i64,
}

/// Steps between halo exchanges: halos of at most 1/16 of the smallest slab (the redundant work
/// stays within a few percent), at least one step, at most the job's steps.
pub fn round_steps(job: &StencilJob, slabs: &[Range<usize>]) -> u64 {
    let smallest = slabs.iter().map(Range::len).min().unwrap_or(1) as u64;
    let radius = (job.stencil.radius() as u64).max(1);
    (smallest / (16 * radius)).clamp(1, (job.steps as u64).max(1))
}

/// The rows a slab `[z0, z1)` holds with halos of `h` rows (unwrapped).
fn resident(job: &StencilJob, z: &Range<usize>, h: i64) -> (i64, i64) {
    let rows = job.shape.rows() as i64;
    let (z0, z1) = (z.start as i64, z.end as i64);
    if job.boundary == Boundary::Wrap {
        (z0 - h, z1 + h)
    } else {
        ((z0 - h).max(0), (z1 + h).min(rows))
    }
}

impl Layout {
    /// `per_device` slabs on each of `devices` devices (at most one slab a row).
    pub fn with_slabs(job: &StencilJob, devices: usize, per_device: usize) -> Layout {
        let rows = job.shape.rows();
        let devices = devices.min(rows).max(1);
        let per_device = per_device.min(rows / devices).max(1);
        let slabs = split_even(rows, devices * per_device, 1);
        let round_steps = round_steps(job, &slabs);
        Layout {
            halo: job.stencil.radius() as i64 * round_steps as i64,
            slabs,
            per_device,
            round_steps,
        }
    }
}

/// The layout of `job` on `group`: one slab a device where a part with its halos fits one
/// binding, else as few more as make every slab fit; None where even slabs of one row do not.
pub fn layout(group: &DeviceGroup, job: &StencilJob) -> Option<Layout> {
    let rows = job.shape.rows();
    let devices = group.len().min(rows).max(1);
    let limit = group
        .gpus()
        .iter()
        .map(|g| g.max_binding().min(g.limits.max_buffer_size))
        .min()
        .unwrap_or(0);
    let mut per_device = 1;
    while devices * per_device <= rows {
        let lay = Layout::with_slabs(job, devices, per_device);
        let fits = lay.slabs.iter().all(|z| {
            let (lo, hi) = resident(job, z, lay.halo);
            (hi - lo) as u64 * job.row_bytes() <= limit
        });
        if fits {
            return Some(lay);
        }
        per_device = (per_device * 2).min(rows.div_ceil(devices).max(per_device + 1));
    }
    None
}

/// Whether `group` can run `job` resident ([`layout`] finds slabs that fit); where not, run it
/// on one device, whose streamer handles any size.
pub fn fits(group: &DeviceGroup, job: &StencilJob) -> bool {
    layout(group, job).is_some()
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
    (a, b): (i64, i64),
) -> Result<()> {
    let mut at = 0u64;
    for (g, n) in crate::stencil::wrapped_runs(rows, a, b) {
        let from = g as usize * rb;
        let bytes = n as usize * rb;
        transfer::upload(gpu, buf, at, &grid[from..from + bytes])?;
        at += bytes as u64;
    }
    Ok(())
}

/// Halo rows `[row, row + len)` of a slab (unwrapped) are rows `[from, from + len)` of slab
/// `owner`.
struct HaloRun {
    owner: usize,
    row: i64,
    from: i64,
    len: i64,
}

/// A slab's rows for other devices on the host: (first row, the rows' bytes) per range.
type Published = Vec<(i64, Vec<u8>)>;

/// Rows `band` of slab `slab` that other devices need, computed ahead from rows `region` in
/// buffers `a` and `b`, read back through `readback`.
struct Edge {
    slab: usize,
    band: Range<i64>,
    region: (i64, i64),
    a: wgpu::Buffer,
    b: wgpu::Buffer,
    readback: wgpu::Buffer,
}

/// One slab on its device: rows `[z0, z1)` exact, `[lo, hi)` held, in `cur` (and `other`, the
/// second buffer the steps alternate with).
struct Slab<'o> {
    index: usize,
    z: (i64, i64),
    held: (i64, i64),
    cur: wgpu::Buffer,
    other: wgpu::Buffer,
    out: &'o mut [u8],
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
        .job();
    let lay = layout(group, job).ok_or_else(|| {
        Error::TooLarge(format!(
            "a row of the grid {} with its halos exceeds one binding",
            job.shape
        ))
    })?;
    run_laid_out(group, kernels, &lay, src, dst)
}

/// [`run`] by a given layout (its slabs must fit the devices' bindings).
pub fn run_laid_out(
    group: &DeviceGroup,
    kernels: &[StencilKernel],
    lay: &Layout,
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
    if lay.slabs.last().map(|z| z.end) != Some(job.shape.rows()) || lay.per_device == 0 {
        return Err(Error::InvalidInput("a layout made for another grid".into()));
    }
    let devices = lay.slabs.len() / lay.per_device;
    if kernels.len() < devices {
        return Err(Error::InvalidInput(format!(
            "{} stencil kernels for {devices} devices",
            kernels.len()
        )));
    }
    let steps = job.steps as u64;
    let t_round = lay.round_steps;
    let rounds = steps.div_ceil(t_round).max(1);
    let rows = job.shape.rows() as i64;
    let rb = job.row_bytes() as usize;
    let h = lay.halo;
    let slabs = &lay.slabs;
    // each slab's published edge rows: (first row, bytes of whole rows)
    let published: Vec<Mutex<Published>> =
        (0..slabs.len()).map(|_| Mutex::new(Vec::new())).collect();
    let barrier = Barrier::new(devices);
    let failed = AtomicBool::new(false);
    // each slab's own rows of the output, dealt to its device
    let mut outs: Vec<Vec<(usize, &mut [u8])>> = (0..devices).map(|_| Vec::new()).collect();
    let mut rest = dst;
    for (i, z) in slabs.iter().enumerate() {
        let (a, b) = std::mem::take(&mut rest).split_at_mut(z.len() * rb);
        outs[i / lay.per_device].push((i, a));
        rest = b;
    }
    let owner = |g: i64| slabs.partition_point(|p| p.end as i64 <= g);
    let device_of = |slab: usize| slab / lay.per_device;
    // each slab's halo rows as runs of consecutive rows of one owning slab
    let runs: Vec<Vec<HaloRun>> = slabs
        .iter()
        .map(|z| {
            let (lo, hi) = resident(&job, z, h);
            let mut out: Vec<HaloRun> = Vec::new();
            for (a, b) in [(lo, z.start as i64), (z.end as i64, hi)] {
                for r in a..b {
                    let g = r.rem_euclid(rows);
                    let o = owner(g);
                    match out.last_mut() {
                        Some(run)
                            if run.owner == o
                                && run.row + run.len == r
                                && run.from + run.len == g =>
                        {
                            run.len += 1
                        }
                        _ => out.push(HaloRun {
                            owner: o,
                            row: r,
                            from: g,
                            len: 1,
                        }),
                    }
                }
            }
            out
        })
        .collect();
    // a slab publishes its edges to the host only where another device's slab needs them;
    // slabs of one device exchange on the GPU
    // exactly the rows other devices need of each slab, as merged ranges
    let mut publishes: Vec<Vec<Range<i64>>> = vec![Vec::new(); slabs.len()];
    for (s, rs) in runs.iter().enumerate() {
        for run in rs.iter().filter(|r| device_of(r.owner) != device_of(s)) {
            publishes[run.owner].push(run.from..run.from + run.len);
        }
    }
    for ranges in publishes.iter_mut() {
        ranges.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<i64>> = Vec::new();
        for r in ranges.drain(..) {
            match merged.last_mut() {
                Some(m) if r.start <= m.end => m.end = m.end.max(r.end),
                _ => merged.push(r),
            }
        }
        *ranges = merged;
    }
    let (runs, publishes) = (&runs, &publishes);
    let results: Vec<Result<[f64; 5]>> = std::thread::scope(|s| {
        let handles: Vec<_> = outs
            .into_iter()
            .enumerate()
            .map(|(d, mine)| {
                let (gpu, kernel) = (&group.gpus()[d], &kernels[d]);
                let (published, barrier, failed, job) = (&published, &barrier, &failed, &job);
                s.spawn(move || -> Result<[f64; 5]> {
                    let mut times = [0.0f64; 5];
                    let mut own: Result<()> = Ok(());
                    let fail = |e: Error, own: &mut Result<()>| {
                        failed.store(true, Ordering::SeqCst);
                        *own = Err(e);
                    };
                    let t = Instant::now();
                    let mut held: Vec<Slab<'_>> = Vec::new();
                    for (index, out) in mine {
                        let z = &slabs[index];
                        let (lo, hi) = resident(job, z, h);
                        let bytes = (hi - lo) as u64 * rb as u64;
                        let made = (|| {
                            let a = transfer::storage_buffer(gpu, "stencil slab", bytes)?;
                            let b = transfer::storage_buffer(gpu, "stencil slab'", bytes)?;
                            upload_rows(gpu, &a, src, rows, rb, (lo, hi))?;
                            Ok::<_, Error>((a, b))
                        })();
                        match made {
                            Ok((cur, other)) => held.push(Slab {
                                index,
                                z: (z.start as i64, z.end as i64),
                                held: (lo, hi),
                                cur,
                                other,
                                out,
                            }),
                            Err(e) => {
                                fail(e, &mut own);
                                break;
                            }
                        }
                    }
                    // the rows other devices need, computed ahead in their own small buffers
                    // (their cone of rows copied out first) so that they can be read back
                    // while the whole slab computes
                    let mut edges: Vec<Edge> = Vec::new();
                    if !failed.load(Ordering::SeqCst) && rounds > 1 {
                        for slab in &held {
                            for band in &publishes[slab.index] {
                                let (lo, hi) = slab.held;
                                let region = ((band.start - h).max(lo), (band.end + h).min(hi));
                                let bytes = (region.1 - region.0) as u64 * rb as u64;
                                let made = (|| {
                                    Ok::<_, Error>(Edge {
                                        slab: slab.index,
                                        band: band.clone(),
                                        region,
                                        a: transfer::storage_buffer(gpu, "stencil edge", bytes)?,
                                        b: transfer::storage_buffer(gpu, "stencil edge'", bytes)?,
                                        readback: transfer::readback_buffer(
                                            gpu,
                                            (band.end - band.start) as u64 * rb as u64,
                                        )?,
                                    })
                                })();
                                match made {
                                    Ok(e) => edges.push(e),
                                    Err(e) => fail(e, &mut own),
                                }
                            }
                        }
                    }
                    times[0] = t.elapsed().as_secs_f64();
                    let first_slab = held.first().map_or(0, |x| x.index);
                    for round in 0..rounds {
                        let ts = (steps - round * t_round).min(t_round);
                        let last = round + 1 == rounds;
                        let t = Instant::now();
                        let mut edge_done = None;
                        if !failed.load(Ordering::SeqCst) && !last && !edges.is_empty() {
                            let mut enc = gpu.device.create_command_encoder(&Default::default());
                            for e in &edges {
                                let slab = &held[e.slab - first_slab];
                                let from = (e.region.0 - slab.held.0) as u64 * rb as u64;
                                let bytes = (e.region.1 - e.region.0) as u64 * rb as u64;
                                enc.copy_buffer_to_buffer(&slab.cur, from, &e.a, 0, bytes);
                                let result = kernel.record_region_steps(
                                    gpu,
                                    &mut enc,
                                    &e.a,
                                    &e.b,
                                    e.region,
                                    (e.band.start, e.band.end),
                                    ts,
                                );
                                let at = (e.band.start - e.region.0) as u64 * rb as u64;
                                let len = (e.band.end - e.band.start) as u64 * rb as u64;
                                enc.copy_buffer_to_buffer(result, at, &e.readback, 0, len);
                            }
                            match gpu.checked(|| gpu.queue.submit([enc.finish()])) {
                                Ok(idx) => edge_done = Some(idx),
                                Err(e) => fail(e, &mut own),
                            }
                        }
                        if !failed.load(Ordering::SeqCst) {
                            let mut enc = gpu.device.create_command_encoder(&Default::default());
                            let mut swapped = Vec::new();
                            for slab in &held {
                                let result = kernel.record_region_steps(
                                    gpu,
                                    &mut enc,
                                    &slab.cur,
                                    &slab.other,
                                    slab.held,
                                    slab.z,
                                    ts,
                                );
                                swapped.push(!std::ptr::eq(result, &slab.cur));
                            }
                            match gpu.checked(|| gpu.queue.submit([enc.finish()])) {
                                Ok(_) => {
                                    // later copies and steps read the result where it is
                                    for (slab, swap) in held.iter_mut().zip(swapped) {
                                        if swap {
                                            std::mem::swap(&mut slab.cur, &mut slab.other);
                                        }
                                    }
                                }
                                Err(e) => fail(e, &mut own),
                            }
                        }
                        if last {
                            break;
                        }
                        // publish the rows other devices need: read back as soon as their own
                        // steps are done, while the slabs still compute
                        if let Some(idx) = edge_done {
                            let mut ready = Vec::new();
                            for e in &edges {
                                ready.push(transfer::request_read(&e.readback));
                            }
                            let r = gpu.wait_for(idx);
                            times[1] += t.elapsed().as_secs_f64();
                            let t = Instant::now();
                            match r {
                                Err(e) => fail(e, &mut own),
                                Ok(()) => {
                                    let mut by_slab: Vec<(usize, Published)> = Vec::new();
                                    for (e, rx) in edges.iter().zip(ready) {
                                        let mut host =
                                            vec![0u8; (e.band.end - e.band.start) as usize * rb];
                                        match transfer::finish_read(gpu, &e.readback, rx, &mut host)
                                        {
                                            Ok(()) => match by_slab.last_mut() {
                                                Some((s, v)) if *s == e.slab => {
                                                    v.push((e.band.start, host))
                                                }
                                                _ => by_slab
                                                    .push((e.slab, vec![(e.band.start, host)])),
                                            },
                                            Err(err) => fail(err, &mut own),
                                        }
                                    }
                                    for (slab, bands) in by_slab {
                                        *published[slab]
                                            .lock()
                                            .unwrap_or_else(|p| p.into_inner()) = bands;
                                    }
                                }
                            }
                            times[2] += t.elapsed().as_secs_f64();
                        }
                        let t = Instant::now();
                        barrier.wait();
                        times[4] += t.elapsed().as_secs_f64();
                        let t = Instant::now();
                        if !failed.load(Ordering::SeqCst) {
                            // each slab's halo rows from the slabs that own them: through the host
                            // from other devices, by GPU copies from this device's own slabs; all
                            // queued behind this round's steps
                            let mut enc = gpu.device.create_command_encoder(&Default::default());
                            for slab in &held {
                                let lo = slab.held.0;
                                for run in &runs[slab.index] {
                                    let at = (run.row - lo) as u64 * rb as u64;
                                    let bytes = run.len as u64 * rb as u64;
                                    if device_of(run.owner) == d {
                                        let src = &held[run.owner - first_slab];
                                        let from = (run.from - src.held.0) as u64 * rb as u64;
                                        if run.owner == slab.index {
                                            // a slab wrapping onto itself: through its second buffer
                                            enc.copy_buffer_to_buffer(
                                                &slab.cur,
                                                from,
                                                &slab.other,
                                                0,
                                                bytes,
                                            );
                                            enc.copy_buffer_to_buffer(
                                                &slab.other,
                                                0,
                                                &slab.cur,
                                                at,
                                                bytes,
                                            );
                                        } else {
                                            enc.copy_buffer_to_buffer(
                                                &src.cur, from, &slab.cur, at, bytes,
                                            );
                                        }
                                        continue;
                                    }
                                    let edges = published[run.owner]
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner());
                                    // a run lies in one published range (they are merged unions)
                                    let (first, band) = edges
                                        .iter()
                                        .find(|(f, band)| {
                                            run.from >= *f
                                                && run.from + run.len
                                                    <= *f + (band.len() / rb) as i64
                                        })
                                        .expect("a halo run lies in its owner's published rows");
                                    let from = (run.from - first) as usize * rb;
                                    let piece = &band[from..from + bytes as usize];
                                    if let Err(e) = transfer::upload(gpu, &slab.cur, at, piece) {
                                        fail(e, &mut own);
                                    }
                                }
                            }
                            if let Err(e) = gpu.checked(|| gpu.queue.submit([enc.finish()])) {
                                fail(e, &mut own);
                            }
                        }
                        times[2] += t.elapsed().as_secs_f64();
                        // nobody publishes the next round's edges before everyone has read these
                        let t = Instant::now();
                        barrier.wait();
                        times[4] += t.elapsed().as_secs_f64();
                    }
                    if !failed.load(Ordering::SeqCst) {
                        let t = Instant::now();
                        if let Err(e) = gpu.wait() {
                            fail(e, &mut own);
                        }
                        times[1] += t.elapsed().as_secs_f64();
                    }
                    if !failed.load(Ordering::SeqCst) {
                        let t = Instant::now();
                        for slab in held.iter_mut() {
                            let at = (slab.z.0 - slab.held.0) as u64 * rb as u64;
                            if let Err(e) = transfer::download(gpu, &slab.cur, at, slab.out) {
                                fail(e, &mut own);
                            }
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
        parts: (0..devices)
            .map(|d| {
                slabs[d * lay.per_device..(d + 1) * lay.per_device]
                    .iter()
                    .map(Range::len)
                    .sum()
            })
            .collect(),
        slabs_per_device: lay.per_device,
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
        stats.wait_s = stats.wait_s.max(t[4]);
    }
    if failed.load(Ordering::SeqCst) {
        return Err(Error::DeviceLost("a device of the group failed".into()));
    }
    stats.seconds = start.elapsed().as_secs_f64();
    Ok(stats)
}
