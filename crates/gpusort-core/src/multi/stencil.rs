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
//! An exchange overlaps the steps: the h rows at each end that other devices need are computed
//! ahead in small buffers of their own (their cone of rows copied out first) and read back while
//! the whole slab steps; once every device has them mapped, each device copies its halo runs
//! straight out of its neighbours' mapped readback buffers into staging buffers of its own (one
//! CPU copy, kept for the whole job) and queues their uploads behind the steps, so the next
//! round is queued before the device runs dry.
//!
//! The copies across the link still run in each device's one queue, in line with the steps, so
//! [`plan_layout`] weighs them against the halo cones a longer round computes twice: rounds
//! start from halos of 1/16 of a slab and double while that costs less (a 3-D 1024³ grid over
//! two or four devices for 64 steps runs as one round with 64-plane halos and no exchange). A
//! part whose rows and halos exceed one binding is held as several slabs on its device; slabs of
//! one device exchange by GPU copies.

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
    /// Steps between exchanges through the host (T), and how many rounds of them ran.
    pub round_steps: u64,
    pub rounds: u64,
    /// Steps between exchanges between slabs of one device (GPU copies).
    pub local_steps: u64,
    /// The slowest device's seconds uploading its part, computing, exchanging halos (its own
    /// copies) and downloading its rows.
    pub upload_s: f64,
    pub compute_s: f64,
    pub exchange_s: f64,
    pub download_s: f64,
    /// The longest a device waited at the exchanges for the others.
    pub wait_s: f64,
    /// Each device's seconds computing (its steps queued and waited for), in device order: a
    /// device slower than the others shows here.
    pub compute_each_s: Vec<f64>,
}

/// How a job is laid out on a group: slabs of rows, `per_device` consecutive slabs a device;
/// halos of h = R·T rows where the neighbouring slab is on another device (exchanged through the
/// host every T = `round_steps` steps), of R·`local_steps` rows where it is on the same device
/// (exchanged by GPU copies every `local_steps` steps).
#[derive(Clone, Debug)]
pub struct SlabLayout {
    pub slabs: Vec<Range<usize>>,
    pub per_device: usize,
    pub round_steps: u64,
    pub halo: i64,
    pub local_steps: u64,
    pub local_halo: i64,
}

/// Steps between halo exchanges where a layout is given by its slabs alone
/// ([`SlabLayout::with_slabs`]): halos of at most 1/16 of the smallest slab, at least one step, at
/// most the job's steps. [`layout`] chooses by [`SlabLayout::cost`] instead.
pub fn round_steps(job: &StencilJob, slabs: &[Range<usize>]) -> u64 {
    let smallest = slabs.iter().map(Range::len).min().unwrap_or(1) as u64;
    let radius = (job.stencil.radius() as u64).max(1);
    (smallest / (16 * radius)).clamp(1, (job.steps as u64).max(1))
}

/// What moving one row between a device and the host costs, in rows stepped: a step reads and
/// writes each row in device memory, which moves 60–200 times the bytes a second the host link
/// does (3–4.8 TB/s against 20–55 GB/s on current data-centre cards), and an exchanged row
/// crosses the link in the same queue as the steps.
pub const LINK_ROW_STEPS: f64 = 64.0;

/// Rows stepped beyond a part's own over `ts` steps on one side with `avail` halo rows there:
/// step i computes min(avail, R·(ts − i)) of them (as `record_region_steps` does).
fn cone_rows(avail: i64, radius: i64, ts: u64) -> f64 {
    if avail <= 0 || radius <= 0 {
        return 0.0;
    }
    // j = ts - i runs over 0..ts; R·j < avail for the first m of them
    let m = ((avail + radius - 1) / radius).min(ts as i64).max(0) as f64;
    radius as f64 * m * (m - 1.0) / 2.0 + avail as f64 * (ts as f64 - m)
}

/// Rows stepped for one side of a part whose neighbour there is another device, over `rounds`
/// of `round_steps`: the cones of its `avail` halo rows each round, and every round but the last
/// a band of `band` rows computed ahead and read back and `halo` rows uploaded (each row
/// crossing the link at [`LINK_ROW_STEPS`]).
fn side_rows(
    avail: i64,
    halo: i64,
    band: i64,
    radius: i64,
    rounds: &[u64],
    round_steps: u64,
) -> f64 {
    let exchanges = rounds.len().saturating_sub(1) as f64;
    let cones: f64 = rounds.iter().map(|&ts| cone_rows(avail, radius, ts)).sum();
    let ahead = band as f64 * round_steps as f64 + 2.0 * cone_rows(halo, radius, round_steps);
    cones + exchanges * (ahead + LINK_ROW_STEPS * (band + halo) as f64)
}

impl SlabLayout {
    /// `per_device` slabs on each of `devices` devices (at most one slab a row), exchanging
    /// every [`round_steps`] steps.
    pub fn with_slabs(job: &StencilJob, devices: usize, per_device: usize) -> SlabLayout {
        let t = round_steps(job, &Self::slabs(job, devices, per_device).0);
        Self::with_rounds(job, devices, per_device, t, t)
    }

    /// `per_device` slabs a device, exchanging through the host every `round_steps` steps and
    /// between slabs of one device every `local_steps` (both at least one, `local_steps` at most
    /// `round_steps`). Where a slab is shorter than two host halos, the rows computed ahead for
    /// other devices would reach into a local halo: such layouts exchange locally once a round.
    pub fn with_rounds(
        job: &StencilJob,
        devices: usize,
        per_device: usize,
        round_steps: u64,
        local_steps: u64,
    ) -> SlabLayout {
        let radius = job.stencil.radius() as i64;
        let (even, per_device) = Self::slabs(job, devices, per_device);
        let round_steps = round_steps.clamp(1, (job.steps as u64).max(1));
        let halo = radius * round_steps as i64;
        let slabs = Self::balanced(job, &even, per_device, halo, round_steps).unwrap_or(even);
        let smallest = slabs.iter().map(Range::len).min().unwrap_or(0) as i64;
        let local_steps = if 2 * halo <= smallest {
            local_steps.clamp(1, round_steps)
        } else {
            round_steps
        };
        SlabLayout {
            halo,
            slabs,
            per_device,
            round_steps,
            local_steps,
            local_halo: radius * local_steps as i64,
        }
    }

    /// The slabs of `per_device` a device on `devices` devices (at most one slab a row), and the
    /// slabs a device that leaves.
    fn slabs(job: &StencilJob, devices: usize, per_device: usize) -> (Vec<Range<usize>>, usize) {
        let rows = job.shape.rows();
        let devices = devices.min(rows).max(1);
        let per_device = per_device.min(rows / devices).max(1);
        (split_even(rows, devices * per_device, 1), per_device)
    }

    /// Parts of equal work for `even`'s devices: a device with other devices on both sides steps
    /// the cones of two halos (and exchanges two of them), one at a grid edge (without wrap)
    /// only one, so the inner devices get fewer rows by what one side costs in rows over the
    /// job's steps (the terms of [`SlabLayout::cost`]); each part then split evenly into its
    /// `per_device` slabs. None (keep `even`) for one device, `wrap` (every device has two
    /// sides), or where a slab would end up shorter than a halo.
    fn balanced(
        job: &StencilJob,
        even: &[Range<usize>],
        per_device: usize,
        halo: i64,
        round_steps: u64,
    ) -> Option<Vec<Range<usize>>> {
        let devices = even.len() / per_device.max(1);
        if devices < 3 || job.boundary == Boundary::Wrap {
            return None; // two devices both sit at an edge: even is balanced
        }
        let radius = job.stencil.radius() as i64;
        let steps = (job.steps as u64).max(1);
        let rounds = split_steps(steps, round_steps);
        let side = side_rows(halo, halo, halo, radius, &rounds, round_steps) / steps as f64;
        // two edge parts of e rows and the rest of e - side: they sum to the grid's rows
        let rows = job.shape.rows() as f64;
        let edge = (rows + (devices - 2) as f64 * side) / devices as f64;
        let mut starts = vec![0usize];
        let mut at = 0.0;
        for d in 0..devices {
            at += if d == 0 || d + 1 == devices {
                edge
            } else {
                edge - side
            };
            starts.push((at.round() as usize).min(job.shape.rows()));
        }
        starts[devices] = job.shape.rows();
        let mut slabs = Vec::with_capacity(even.len());
        for d in 0..devices {
            let (a, b) = (starts[d], starts[d + 1]);
            slabs.extend(
                split_even(b.saturating_sub(a), per_device, 1)
                    .into_iter()
                    .map(|r| a + r.start..a + r.end),
            );
        }
        let smallest = slabs.iter().map(Range::len).min().unwrap_or(0) as i64;
        (smallest >= halo.max(1)).then_some(slabs)
    }

    fn device_of(&self, slab: usize) -> usize {
        slab / self.per_device
    }

    /// The slabs next to slab `s` below and above (None at a grid edge that does not wrap).
    fn neighbours(&self, job: &StencilJob, s: usize) -> [Option<usize>; 2] {
        let n = self.slabs.len();
        let wrap = job.boundary == Boundary::Wrap;
        [
            (s > 0 || wrap).then(|| (s + n - 1) % n),
            (s + 1 < n || wrap).then(|| (s + 1) % n),
        ]
    }

    /// The rows slab `s` holds (unwrapped): its own and its halos on each side, as deep as the
    /// neighbour there is far (another device or this one), clipped at edges that do not wrap.
    fn held(&self, job: &StencilJob, s: usize) -> (i64, i64) {
        let z = &self.slabs[s];
        let depth = |o: Option<usize>| match o {
            None => 0,
            Some(o) if self.device_of(o) == self.device_of(s) => self.local_halo,
            Some(_) => self.halo,
        };
        let [below, above] = self.neighbours(job, s);
        let rows = job.shape.rows() as i64;
        let (lo, hi) = (z.start as i64 - depth(below), z.end as i64 + depth(above));
        if job.boundary == Boundary::Wrap {
            (lo, hi)
        } else {
            (lo.max(0), hi.min(rows))
        }
    }

    /// The steps of each round (`round_steps`, the last one what is left).
    fn rounds(&self, job: &StencilJob) -> Vec<u64> {
        split_steps((job.steps as u64).max(1), self.round_steps)
    }

    /// Whether every slab with its halos fits a binding of `limit` bytes.
    fn fits(&self, job: &StencilJob, limit: u64) -> bool {
        (0..self.slabs.len()).all(|s| {
            let (lo, hi) = self.held(job, s);
            (hi - lo) as u64 * job.row_bytes() <= limit
        })
    }

    /// The slowest device's work in rows stepped: its slabs' steps with their halo cones, the
    /// rows it computes ahead for other devices, and the rows it exchanges with the host (at
    /// [`LINK_ROW_STEPS`] each). Exchanges between slabs of one device are GPU copies, left out.
    pub fn cost(&self, job: &StencilJob) -> f64 {
        let radius = job.stencil.radius() as i64;
        let rounds = self.rounds(job);
        let local: Vec<u64> = rounds
            .iter()
            .flat_map(|&ts| split_steps(ts, self.local_steps))
            .collect();
        let mut worst = 0.0f64;
        for d in 0..self.slabs.len() / self.per_device {
            let mut work = 0.0;
            for s in d * self.per_device..(d + 1) * self.per_device {
                let z = &self.slabs[s];
                let (lo, hi) = self.held(job, s);
                work += z.len() as f64 * rounds.iter().sum::<u64>() as f64;
                for (o, avail) in self
                    .neighbours(job, s)
                    .into_iter()
                    .zip([z.start as i64 - lo, hi - z.end as i64])
                {
                    let Some(o) = o else { continue };
                    if self.device_of(o) == d {
                        work += local
                            .iter()
                            .map(|&u| cone_rows(avail, radius, u))
                            .sum::<f64>();
                        continue;
                    }
                    let band = self.halo.min(z.len() as i64);
                    work += side_rows(avail, self.halo, band, radius, &rounds, self.round_steps);
                }
            }
            worst = worst.max(work);
        }
        worst
    }
}

/// `steps` cut into runs of `each` (at least one), the last one what is left.
fn split_steps(steps: u64, each: u64) -> Vec<u64> {
    let each = each.max(1);
    let mut out = vec![each; (steps / each) as usize];
    if !steps.is_multiple_of(each) || out.is_empty() {
        out.push(steps % each);
    }
    out
}

/// The layout of `job` on `devices` devices whose bindings hold `limit` bytes: the fewest slabs
/// a device (one, two, four …) that fit with halos bounded by [`round_steps`], exchanging
/// between slabs of one device at that many steps, and of host rounds of that many steps, twice,
/// four times … as many, up to all of them, the one of least [`SlabLayout::cost`] that still fits
/// (fewer rounds on a tie); None where even slabs of one row do not fit. Halos stay within the
/// neighbouring slab.
pub fn plan_layout(job: &StencilJob, devices: usize, limit: u64) -> Option<SlabLayout> {
    let rows = job.shape.rows();
    let devices = devices.min(rows).max(1);
    let steps = (job.steps as u64).max(1);
    let radius = (job.stencil.radius() as u64).max(1);
    let mut best: Option<(f64, SlabLayout)> = None;
    let mut per_device = 1;
    while devices * per_device <= rows {
        let (slabs, _) = SlabLayout::slabs(job, devices, per_device);
        let smallest = slabs.iter().map(Range::len).min().unwrap_or(0) as u64;
        // from the rounds of bounded halos up: longer rounds where they save exchanges, never
        // shorter ones (each round has its own submissions and waits, which the cost leaves out)
        let shortest = round_steps(job, &slabs);
        let rounds =
            std::iter::successors(Some(shortest), |&t| (t < steps).then(|| (t * 2).min(steps)));
        for t in rounds {
            if t > 1 && radius * t > smallest {
                break; // halos past the neighbouring slab
            }
            let lay = SlabLayout::with_rounds(job, devices, per_device, t, shortest);
            if !lay.fits(job, limit) {
                break;
            }
            let cost = lay.cost(job);
            if best.as_ref().is_none_or(|(c, _)| cost <= *c) {
                best = Some((cost, lay));
            }
        }
        if best.is_some() {
            break; // more slabs only add halos (and rounds of their own)
        }
        per_device = (per_device * 2).min(rows.div_ceil(devices).max(per_device + 1));
    }
    best.map(|(_, lay)| lay)
}

/// The layout of `job` on `group` ([`plan_layout`] with the group's smallest binding).
pub fn layout(group: &DeviceGroup, job: &StencilJob) -> Option<SlabLayout> {
    let limit = group
        .gpus()
        .iter()
        .map(|g| g.max_binding().min(g.limits.max_buffer_size))
        .min()
        .unwrap_or(0);
    plan_layout(job, group.len(), limit)
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

/// Each slab's halo rows as runs of consecutive rows of one owning slab.
fn halo_runs(lay: &SlabLayout, job: &StencilJob) -> Vec<Vec<HaloRun>> {
    let slabs = &lay.slabs;
    let rows = job.shape.rows() as i64;
    let owner = |g: i64| slabs.partition_point(|p| p.end as i64 <= g);
    slabs
        .iter()
        .enumerate()
        .map(|(s, z)| {
            let (lo, hi) = lay.held(job, s);
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
        .collect()
}

/// Exactly the rows of each slab that slabs on other devices need, as merged ranges: a slab
/// publishes its edges to the host only for those; slabs of one device exchange on the GPU.
fn published_rows(lay: &SlabLayout, runs: &[Vec<HaloRun>]) -> Vec<Vec<Range<i64>>> {
    let device_of = |slab: usize| lay.device_of(slab);
    let mut publishes: Vec<Vec<Range<i64>>> = vec![Vec::new(); lay.slabs.len()];
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
    publishes
}

/// Halo rows `[row, row + len)` of a slab (unwrapped) are rows `[from, from + len)` of slab
/// `owner`.
struct HaloRun {
    owner: usize,
    row: i64,
    from: i64,
    len: i64,
}

/// Rows `[first, first + rows)` of a slab, published for other devices in `buffer` (a device's
/// readback buffer, mapped between a round's two barriers: readers copy straight out of it).
struct PublishedBand {
    first: i64,
    rows: i64,
    buffer: wgpu::Buffer,
}

/// Where a halo run from another device is staged for upload: its own mapped buffer, kept for
/// the whole job (`ready`: the map asked for after its last copy was submitted).
struct HaloStage {
    buffer: wgpu::Buffer,
    ready: Option<transfer::MapResult>,
}

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

/// Record the GPU copies that refresh each held slab's halo runs owned by slabs of this device
/// (`local(owner)`).
fn copy_local_halos(
    enc: &mut wgpu::CommandEncoder,
    held: &[Slab<'_>],
    runs: &[Vec<HaloRun>],
    local: impl Fn(usize) -> bool,
    rb: usize,
) {
    let first = held.first().map_or(0, |x| x.index);
    for slab in held {
        for run in runs[slab.index].iter().filter(|r| local(r.owner)) {
            let at = (run.row - slab.held.0) as u64 * rb as u64;
            let bytes = run.len as u64 * rb as u64;
            let src = &held[run.owner - first];
            let from = (run.from - src.held.0) as u64 * rb as u64;
            if run.owner == slab.index {
                // a slab wrapping onto itself: through its second buffer
                enc.copy_buffer_to_buffer(&slab.cur, from, &slab.other, 0, bytes);
                enc.copy_buffer_to_buffer(&slab.other, 0, &slab.cur, at, bytes);
            } else {
                enc.copy_buffer_to_buffer(&src.cur, from, &slab.cur, at, bytes);
            }
        }
    }
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
    // longer rounds hold deeper halos; where the devices' memory cannot, the rounds of bounded
    // halos (the layout checks bindings: wgpu does not report device memory)
    let bounded = SlabLayout::with_slabs(job, lay.slabs.len() / lay.per_device, lay.per_device);
    match run_laid_out(group, kernels, &lay, src, dst) {
        Err(Error::OutOfMemory(_)) if bounded.round_steps < lay.round_steps => {
            run_laid_out(group, kernels, &bounded, src, dst)
        }
        other => other,
    }
}

/// [`run`] by a given layout (its slabs must fit the devices' bindings).
pub fn run_laid_out(
    group: &DeviceGroup,
    kernels: &[StencilKernel],
    lay: &SlabLayout,
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
    let radius = job.stencil.radius() as i64;
    let slabs = &lay.slabs;
    // each slab's rows other devices need, as the readback buffers that hold them
    let published: Vec<Mutex<Vec<PublishedBand>>> =
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
    let device_of = |slab: usize| lay.device_of(slab);
    let runs = halo_runs(lay, &job);
    let publishes = published_rows(lay, &runs);
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
                        let (lo, hi) = lay.held(job, index);
                        let bytes = (hi - lo) as u64 * rb as u64;
                        let made = (|| {
                            // (making the buffers on a helper thread while the rows before
                            // upload measured no faster: the two wait on each other)
                            let t = Instant::now();
                            let a = transfer::storage_buffer(gpu, "stencil slab", bytes)?;
                            let b = transfer::storage_buffer(gpu, "stencil slab'", bytes)?;
                            let made_s = t.elapsed().as_secs_f64();
                            upload_rows(gpu, &a, src, rows, rb, (lo, hi))?;
                            tracing::debug!(
                                "group stencil: device {d} slab {index}: two buffers of {bytes} bytes in {made_s:.3} s, its rows queued for upload {:.3} s later",
                                t.elapsed().as_secs_f64() - made_s
                            );
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
                    for e in &edges {
                        published[e.slab]
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(PublishedBand {
                                first: e.band.start,
                                rows: e.band.end - e.band.start,
                                buffer: e.readback.clone(),
                            });
                    }
                    // each halo run from another device staged in a mapped buffer of its own, so
                    // a round's uploads never wait on one another (nor on the steps queued
                    // before them)
                    let mut stages: Vec<Vec<Option<HaloStage>>> = Vec::new();
                    if !failed.load(Ordering::SeqCst) && rounds > 1 {
                        for slab in &held {
                            let mut row = Vec::new();
                            for run in &runs[slab.index] {
                                if device_of(run.owner) == d {
                                    row.push(None);
                                    continue;
                                }
                                match transfer::upload_stage(gpu, run.len as u64 * rb as u64) {
                                    Ok(buffer) => row.push(Some(HaloStage {
                                        buffer,
                                        ready: None,
                                    })),
                                    Err(e) => {
                                        fail(e, &mut own);
                                        row.push(None);
                                    }
                                }
                            }
                            stages.push(row);
                        }
                    }
                    // the rounds start with every part resident on every device: the time in
                    // and out of the devices stays out of the steps' and the exchanges'
                    let queued = t.elapsed().as_secs_f64();
                    if !failed.load(Ordering::SeqCst) {
                        if let Err(e) = gpu.wait() {
                            fail(e, &mut own);
                        }
                    }
                    let resident = t.elapsed().as_secs_f64();
                    barrier.wait();
                    times[0] = t.elapsed().as_secs_f64();
                    tracing::debug!(
                        "group stencil: device {d}: everything queued at {queued:.3} s, resident at {resident:.3} s, every device at {:.3} s",
                        times[0]
                    );
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
                                    (&e.a, &e.b),
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
                            // the round in parts of `local_steps`: after each, a slab's rows are
                            // exact where its neighbour is on this device (whose halo GPU copies
                            // then refresh) and still hold the round's cone where it is not
                            let mut enc = gpu.device.create_command_encoder(&Default::default());
                            let mut done = 0;
                            for part in split_steps(ts, lay.local_steps) {
                                done += part;
                                let cone = radius * (ts - done) as i64;
                                for slab in held.iter_mut() {
                                    let [below, above] = lay
                                        .neighbours(job, slab.index)
                                        .map(|o| o.is_some_and(|o| device_of(o) != d));
                                    let target = (
                                        slab.z.0 - if below { cone } else { 0 },
                                        slab.z.1 + if above { cone } else { 0 },
                                    );
                                    let result = kernel.record_region_steps(
                                        gpu,
                                        &mut enc,
                                        (&slab.cur, &slab.other),
                                        slab.held,
                                        target,
                                        part,
                                    );
                                    // later copies and steps read the result where it is
                                    if !std::ptr::eq(result, &slab.cur) {
                                        std::mem::swap(&mut slab.cur, &mut slab.other);
                                    }
                                }
                                copy_local_halos(&mut enc, &held, runs, |o| device_of(o) == d, rb);
                            }
                            if let Err(e) = gpu.checked(|| gpu.queue.submit([enc.finish()])) {
                                fail(e, &mut own);
                            }
                        }
                        if last {
                            break;
                        }
                        // map the rows other devices need as soon as their own steps are done,
                        // while the slabs still compute
                        let mut mapped = false;
                        if let Some(idx) = edge_done {
                            let ready: Vec<_> = edges
                                .iter()
                                .map(|e| transfer::request_read(&e.readback))
                                .collect();
                            let r = gpu.wait_for(idx);
                            times[1] += t.elapsed().as_secs_f64();
                            let t = Instant::now();
                            match r {
                                Err(e) => fail(e, &mut own),
                                Ok(()) => {
                                    mapped = true;
                                    for rx in ready {
                                        if let Err(e) = transfer::wait_mapped(gpu, rx) {
                                            mapped = false;
                                            fail(e, &mut own);
                                        }
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
                            // each slab's halo rows from other devices: copied out of the
                            // owner's mapped readback into this device's staging, queued behind
                            // this round's steps
                            let mut enc = gpu.device.create_command_encoder(&Default::default());
                            let mut staged = Vec::new();
                            for (local, slab) in held.iter().enumerate() {
                                for (r, run) in runs[slab.index].iter().enumerate() {
                                    if device_of(run.owner) == d {
                                        continue;
                                    }
                                    let at = (run.row - slab.held.0) as u64 * rb as u64;
                                    let bytes = run.len as u64 * rb as u64;
                                    let Some(stage) = stages[local][r].as_mut() else {
                                        continue;
                                    };
                                    if let Some(rx) = stage.ready.take() {
                                        if let Err(e) = transfer::wait_mapped(gpu, rx) {
                                            fail(e, &mut own);
                                            continue;
                                        }
                                    }
                                    let bands = published[run.owner]
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner());
                                    // a run lies in one published band (they are merged unions)
                                    let band = bands
                                        .iter()
                                        .find(|b| {
                                            run.from >= b.first
                                                && run.from + run.len <= b.first + b.rows
                                        })
                                        .expect("a halo run lies in its owner's published rows");
                                    transfer::copy_mapped(
                                        &band.buffer,
                                        (run.from - band.first) as u64 * rb as u64,
                                        &stage.buffer,
                                        0,
                                        bytes as usize,
                                    );
                                    stage.buffer.unmap();
                                    enc.copy_buffer_to_buffer(
                                        &stage.buffer,
                                        0,
                                        &slab.cur,
                                        at,
                                        bytes,
                                    );
                                    staged.push((local, r));
                                }
                            }
                            match gpu.checked(|| gpu.queue.submit([enc.finish()])) {
                                Ok(_) => {
                                    for (local, r) in staged {
                                        if let Some(stage) = stages[local][r].as_mut() {
                                            stage.ready =
                                                Some(transfer::request_write(&stage.buffer));
                                        }
                                    }
                                }
                                Err(e) => fail(e, &mut own),
                            }
                        }
                        times[2] += t.elapsed().as_secs_f64();
                        // the bands stay mapped until everyone has read them
                        let t = Instant::now();
                        barrier.wait();
                        times[4] += t.elapsed().as_secs_f64();
                        if mapped {
                            for e in &edges {
                                e.readback.unmap();
                            }
                        }
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
        local_steps: lay.local_steps,
        ..Default::default()
    };
    for r in results {
        let t = r?;
        stats.upload_s = stats.upload_s.max(t[0]);
        stats.compute_s = stats.compute_s.max(t[1]);
        stats.compute_each_s.push(t[1]);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stencil::{GridShape, Stencil};
    use crate::KeyType;

    fn job(shape: &[usize], stencil: Stencil, boundary: Boundary, steps: u32) -> StencilJob {
        StencilJob {
            shape: GridShape::new(shape).unwrap(),
            stencil,
            boundary,
            cval: 0.0,
            steps,
            dtype: KeyType::F32,
        }
    }

    #[test]
    fn split_steps_cuts_runs_and_a_rest() {
        assert_eq!(split_steps(64, 16), [16, 16, 16, 16]);
        assert_eq!(split_steps(13, 4), [4, 4, 4, 1]);
        assert_eq!(split_steps(3, 8), [3]);
        assert_eq!(split_steps(5, 0), [1, 1, 1, 1, 1]);
    }

    #[test]
    fn cone_rows_sum_the_rows_each_step_computes() {
        for (avail, radius, ts) in [(16, 1, 16), (64, 1, 64), (7, 2, 5), (3, 2, 9), (0, 1, 4)] {
            let by_step: i64 = (1..=ts).map(|i| avail.min(radius * (ts - i))).sum();
            assert_eq!(
                cone_rows(avail, radius, ts as u64),
                by_step as f64,
                "{avail} {radius} {ts}"
            );
        }
    }

    #[test]
    fn layouts_exchange_through_the_host_only_where_it_pays() {
        let gib2 = 2u64 << 30;
        let cube = job(
            &[1024, 1024, 1024],
            Stencil::star(3, 1).unwrap(),
            Boundary::Reflect,
            64,
        );
        // one device: nothing crosses the link; its slabs exchange every 16 steps
        let one = plan_layout(&cube, 1, gib2).unwrap();
        assert_eq!(
            (one.per_device, one.local_steps, one.local_halo),
            (4, 16, 16)
        );
        // two and four devices: one round, the halos to other devices computed redundantly,
        // no exchange through the host; slabs of one device still exchange every 16 steps
        let two = plan_layout(&cube, 2, gib2).unwrap();
        assert_eq!((two.per_device, two.round_steps, two.halo), (2, 64, 64));
        assert_eq!((two.local_steps, two.local_halo), (16, 16));
        assert_eq!(two.held(&cube, 0), (0, 256 + 16));
        assert_eq!(two.held(&cube, 1), (256 - 16, 512 + 64));
        assert!(two.cost(&cube) < SlabLayout::with_rounds(&cube, 2, 2, 64, 64).cost(&cube));
        let four = plan_layout(&cube, 4, gib2).unwrap();
        assert_eq!((four.per_device, four.round_steps), (1, 64));
        assert!(four.cost(&cube) < SlabLayout::with_slabs(&cube, 4, 1).cost(&cube));
        // four devices: the inner two own fewer planes, by one cone of 64 steps (2016 planes
        // stepped, 31.5 over 64 steps), so that every device steps as many planes
        let parts: Vec<usize> = four.slabs.iter().map(Range::len).collect();
        assert_eq!(parts, [272, 240, 240, 272]);
        let even = SlabLayout {
            slabs: crate::multi::split_even(1024, 4, 1),
            ..four.clone()
        };
        assert!(four.cost(&cube) < 0.96 * even.cost(&cube), "{four:?}");
        // wrap: every device has two sides, and two devices both sit at an edge: even parts
        let ring = job(
            &[1024, 64, 64],
            Stencil::star(3, 1).unwrap(),
            Boundary::Wrap,
            64,
        );
        let parts: Vec<usize> = plan_layout(&ring, 4, gib2)
            .unwrap()
            .slabs
            .iter()
            .map(Range::len)
            .collect();
        assert_eq!(parts, [256; 4]);
        let parts: Vec<usize> = two.slabs.iter().map(Range::len).collect();
        assert_eq!(parts, [256; 4]);
        // slabs shorter than two host halos exchange locally once a round
        let short = SlabLayout::with_rounds(&cube, 2, 8, 64, 16);
        assert_eq!(short.local_steps, 64);
        // many steps: exchanges pay against halos of thousands of rows, computed twice
        let long = job(
            &[32768, 32768],
            Stencil::star(2, 2).unwrap(),
            Boundary::Wrap,
            4096,
        );
        let lay = plan_layout(&long, 2, gib2).unwrap();
        assert!(lay.round_steps < 4096, "{lay:?}");
        assert!(lay.cost(&long) <= SlabLayout::with_rounds(&long, 2, 4, 4096, 4096).cost(&long));
        // every chosen layout fits the binding
        for l in [&one, &two, &four] {
            assert!(l.fits(&cube, gib2));
        }
        assert!(lay.fits(&long, gib2));
    }
}
