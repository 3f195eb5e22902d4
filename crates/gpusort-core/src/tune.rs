//! Measure the fastest tuning of the sort, the scans and the stencils on one device: the
//! candidate configurations are timed one parameter at a time, the others held at their best so
//! far, and every candidate's result is checked, so a tuning can be slower but never wrong. The
//! thresholds (where `Auto` takes the radix sort, the MSD path, the segmented radix path) are
//! the sizes from which the faster choice stays faster. `gpusort tune` and `gpusort.tune()` run
//! it and store the result (the `tuning` module, with the `serde` feature); later runs on the
//! same adapter, driver and version start from it.

use crate::bench::{random_u32, GpuTimer, Stats};
use crate::device::transfer;
use crate::error::{Error, Result};
use crate::keys::order::{fingerprint, Fingerprint};
use crate::scan::{CompactJob, Predicate, ScanJob, ScanOp, Scanner};
use crate::{scan, sort, stencil, Algorithm, Gpu, KeyType, SortJob, SortOrder, Sorter};

/// What a tuning run measured: the fastest tuning of each family, and how much faster than the
/// defaults it ran the cases timed (1.0 where the defaults were kept).
#[derive(Clone, Debug)]
pub struct Tuned {
    pub sort: sort::SortTuning,
    pub scan: scan::ScanTuning,
    pub stencil: stencil::StencilTuning,
    pub sort_gain: f64,
    pub scan_gain: f64,
    pub stencil_gain: f64,
}

/// Time the candidates on `gpu` and return the fastest. `quick`: small sizes and a few
/// candidates (seconds; what a software adapter gets anyway). `say` hears one line a decision.
pub fn measure(gpu: &Gpu, quick: bool, say: &dyn Fn(&str)) -> Result<Tuned> {
    let t = Tuner::new(gpu, quick || gpu.is_software(), say);
    let (sort, sort_gain) = t.sort()?;
    let (scan, scan_gain) = t.scan()?;
    let (stencil, stencil_gain) = t.stencil()?;
    Ok(Tuned {
        sort,
        scan,
        stencil,
        sort_gain,
        scan_gain,
        stencil_gain,
    })
}

struct Tuner<'a> {
    gpu: &'a Gpu,
    timer: GpuTimer,
    quick: bool,
    say: &'a dyn Fn(&str),
    reps: usize,
    warm: std::time::Duration,
}

impl<'a> Tuner<'a> {
    fn new(gpu: &'a Gpu, quick: bool, say: &'a dyn Fn(&str)) -> Tuner<'a> {
        Tuner {
            gpu,
            timer: GpuTimer::new(gpu),
            quick,
            say,
            reps: if quick { 3 } else { 7 },
            warm: std::time::Duration::from_millis(if gpu.is_software() { 0 } else { 150 }),
        }
    }

    fn say(&self, line: String) {
        (self.say)(&line)
    }

    /// Median seconds of `record` after `restore`: once untimed (pipelines, caches,
    /// allocations), then untimed for the warm-up (an idle GPU lowers its clocks), then timed.
    fn time(
        &self,
        restore: &dyn Fn(&mut wgpu::CommandEncoder),
        record: &dyn Fn(&mut wgpu::CommandEncoder) -> Result<()>,
    ) -> Result<f64> {
        let run = || self.timer.time(self.gpu, restore, record);
        run()?;
        let start = std::time::Instant::now();
        while start.elapsed() < self.warm {
            run()?;
        }
        let samples = (0..self.reps).map(|_| run()).collect::<Result<Vec<_>>>()?;
        Ok(Stats::of(samples).median_s)
    }

    /// The time of a sort of `keys` (keys only, or an argsort) with `sorter`, checked.
    fn sort_time(
        &self,
        sorter: &Sorter,
        keys: &Uploaded,
        argsort: bool,
        segment: Option<u32>,
    ) -> Result<f64> {
        let gpu = self.gpu;
        let words = keys.host.len();
        let n = if keys.wide { words / 2 } else { words };
        let job = SortJob {
            key_type: if keys.wide {
                KeyType::U64
            } else {
                KeyType::U32
            },
            order: SortOrder {
                descending: false,
                segment_size: segment,
            },
            keys: &keys.work,
            n: n as u32,
            values: None,
            permutation: argsort.then_some(&keys.perm),
        };
        let restore = |enc: &mut wgpu::CommandEncoder| {
            enc.copy_buffer_to_buffer(&keys.pristine, 0, &keys.work, 0, words as u64 * 4)
        };
        let t = self.time(&restore, &|enc| sorter.record(gpu, enc, &job).map(|_| ()))?;
        let got: Vec<u32> = transfer::read_vec(gpu, &keys.work, words)?;
        // each segment (or the whole) in order, and the same keys as were uploaded
        let segments = segment.map_or(n, |s| s as usize).max(1);
        let (ordered, print) = match keys.wide {
            true => {
                let got = wide_keys(&got);
                (
                    got.chunks(segments).all(|c| c.is_sorted()),
                    fingerprint(&got),
                )
            }
            false => (
                got.chunks(segments).all(|c| c.is_sorted()),
                fingerprint(&got),
            ),
        };
        if !ordered || print != keys.fingerprint {
            return Err(Error::VerificationFailed(format!(
                "tune: a candidate sort of {n} keys is wrong on {}",
                gpu.adapter.name
            )));
        }
        Ok(t)
    }

    /// Steps a pass of the stencils whose default `KernelChoice::for_device` sets (2-D stars of
    /// radius 1 and 2, the 3-D radius-1 star): one step a pass and every pass in registers this
    /// device runs, each checked against one step a pass bit for bit; the fastest is kept. The
    /// gain: the defaults' time over the tuned ones', summed over the three stencils.
    fn stencil(&self) -> Result<(stencil::StencilTuning, f64)> {
        use crate::stencil::{
            Blocking, Boundary, GridShape, KernelChoice, Stencil, StencilJob, StencilKernel,
        };
        let gpu = self.gpu;
        // a multiple of every K measured, so that each runs whole passes only
        const STEPS: u32 = 24;
        let mut tuning = stencil::StencilTuning::default();
        let (mut default_total, mut tuned_total) = (0.0, 0.0);
        let (side, cube) = if self.quick { (64, 16) } else { (4096, 256) };
        for (dims, radius) in [(2, 1), (2, 2), (3, 1)] {
            let extents = match dims {
                2 => vec![side, side],
                _ => vec![cube, cube, cube],
            };
            let job = StencilJob {
                shape: GridShape::new(&extents)?,
                stencil: Stencil::star(dims, radius)?,
                boundary: Boundary::Reflect,
                cval: 0.0,
                steps: STEPS,
                dtype: KeyType::F32,
            };
            let mut candidates: Vec<Option<Blocking>> = vec![None];
            if dims == 2 {
                let ks: &[u32] = if self.quick {
                    &[2, 4]
                } else {
                    &[2, 3, 4, 6, 8]
                };
                candidates.extend(
                    ks.iter()
                        .filter_map(|&k| Blocking::lanes(gpu, &job, k))
                        .map(Some),
                );
            } else {
                let shapes = Blocking::plane_shapes(gpu, &job)
                    .into_iter()
                    .filter(|b| b.steps >= 2);
                match self.quick {
                    true => candidates.extend(shapes.take(2).map(Some)),
                    false => candidates.extend(shapes.map(Some)),
                }
            }
            if candidates.len() == 1 {
                continue; // nothing in registers here (no subgroups): the defaults
            }
            let cells = job.shape.cells();
            let host: Vec<f32> = crate::bench::random_unit_f32(cells, 77);
            let bytes = cells as u64 * 4;
            let pristine = transfer::buffer_from(gpu, "tune grid", &host)?;
            let a = transfer::storage_buffer(gpu, "tune grid a", bytes)?;
            let b = transfer::storage_buffer(gpu, "tune grid b", bytes)?;
            let restore = |enc: &mut wgpu::CommandEncoder| {
                enc.copy_buffer_to_buffer(&pristine, 0, &a, 0, bytes)
            };
            let default = KernelChoice::for_device(gpu, &job).blocking;
            let (mut want, mut timed) = (None::<Vec<u32>>, Vec::new());
            for blocking in candidates {
                let choice = KernelChoice {
                    blocking,
                    ..KernelChoice::for_job(&job)
                };
                let kernel = StencilKernel::with_choice(gpu, &job, choice)?;
                let secs = self.time(&restore, &|enc| {
                    kernel.record_steps(gpu, enc, &a, &b, STEPS).map(|_| ())
                })?;
                // the steps once more from the grid, read back: every candidate's bytes alike
                let mut enc = gpu.device.create_command_encoder(&Default::default());
                restore(&mut enc);
                let out = kernel.record_steps(gpu, &mut enc, &a, &b, STEPS)?;
                gpu.queue.submit([enc.finish()]);
                let got: Vec<u32> = transfer::read_vec(gpu, out, cells)?;
                match &want {
                    None => want = Some(got),
                    Some(w) if *w != got => {
                        return Err(Error::VerificationFailed(format!(
                            "tune: {dims}-D star r{radius} with {blocking:?} differs from one \
                             step a pass on {}",
                            gpu.adapter.name
                        )))
                    }
                    Some(_) => {}
                }
                timed.push((secs, blocking));
            }
            let (best_secs, best) = timed
                .iter()
                .copied()
                .min_by(|x, y| x.0.total_cmp(&y.0))
                .expect("candidates");
            let default_secs = timed
                .iter()
                .find(|t| t.1 == default)
                .map_or(best_secs, |t| t.0);
            // within 2% of the default (noise): keep the default
            let keep = best_secs * 1.02 >= default_secs;
            let (secs, chosen) = if keep {
                (default_secs, default)
            } else {
                (best_secs, best)
            };
            default_total += default_secs;
            tuned_total += secs;
            let k = chosen.map_or(1, |b| b.steps);
            if !keep {
                match (dims, radius) {
                    (2, 1) => tuning.lanes_3_rows = Some(k),
                    (2, _) => tuning.lanes_5_rows = Some(k),
                    _ => {
                        tuning.planes_r1 =
                            Some(chosen.map_or([1, 0, 0], |b| [b.steps, b.workgroup, b.tile_rows]))
                    }
                }
            }
            self.say(format!(
                "stencil, {dims}-D star r{radius}: {k} step{} a pass{} ({:.3} ms a step at {cells} \
                 cells)",
                if k == 1 { "" } else { "s" },
                if keep { " (the default)" } else { "" },
                secs * 1e3 / STEPS as f64
            ));
        }
        Ok((tuning, default_total / tuned_total.max(f64::MIN_POSITIVE)))
    }

    fn sort(&self) -> Result<(sort::SortTuning, f64)> {
        let gpu = self.gpu;
        let n = if self.quick { 1 << 14 } else { 1 << 24 };
        let keys = Uploaded::new(gpu, random_u32(n, 1))?;
        let radix = |t: sort::SortTuning| -> Result<Sorter> {
            Sorter::new(gpu)?
                .with_algorithm(Algorithm::Radix)
                .with_tuning(gpu, t)
        };
        let mut best = sort::SortTuning::default();
        let default_time = self.sort_time(&radix(best)?, &keys, false, None)?
            + self.sort_time(&radix(best)?, &keys, true, None)?;
        // (what, argsort, values, quick values, how to set it)
        type Candidate<'c> = (
            &'c str,
            bool,
            &'c [u32],
            &'c [u32],
            fn(&mut sort::SortTuning, u32),
        );
        let candidates: [Candidate; 5] = [
            // 0: the default (512 with subgroups where the tile fits, else 256); 384 is CUB's
            // sm90 sweep (first, since the keys an invocation are counted for it)
            ("invocations a workgroup", false, &[0, 384], &[0], |t, v| {
                t.wg = (v != 0).then_some(v)
            }),
            (
                "keys an invocation",
                false,
                &[6, 7, 8, 9, 10, 11, 12],
                &[8, 9],
                |t, v| t.items = v,
            ),
            (
                "keys an invocation, argsort",
                true,
                &[5, 6, 7, 8, 9],
                &[7, 8],
                |t, v| t.payload_items = v,
            ),
            (
                "keys an invocation, first pass",
                false,
                &[8, 9, 10, 11, 12],
                &[9, 10],
                |t, v| t.unstable_items = v,
            ),
            ("look-back window", false, &[2, 4, 8], &[4], |t, v| {
                t.window = v
            }),
        ];
        for (what, argsort, full, quick, set) in candidates {
            let values = if self.quick { quick } else { full };
            let mut timed = Vec::new();
            for &v in values {
                let mut t = best;
                set(&mut t, v);
                timed.push((self.sort_time(&radix(t)?, &keys, argsort, None)?, v));
            }
            let (secs, v) = timed
                .iter()
                .copied()
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .expect("candidates");
            set(&mut best, v);
            let shown = match v {
                0 => "the default".to_string(),
                v => v.to_string(),
            };
            self.say(format!(
                "sort, {what}: {shown} ({:.3} ms at 2^{})",
                secs * 1e3,
                n.ilog2()
            ));
        }
        let tuned_time = self.sort_time(&radix(best)?, &keys, false, None)?
            + self.sort_time(&radix(best)?, &keys, true, None)?;
        // within noise of the defaults (or behind them): keep the defaults' shapes
        let gain = default_time / tuned_time;
        if gain <= 1.0 {
            let d = sort::SortTuning::default();
            (
                best.wg,
                best.items,
                best.payload_items,
                best.unstable_items,
                best.window,
            ) = (d.wg, d.items, d.payload_items, d.unstable_items, d.window);
        }
        // keys-only sorts of 64-bit keys hold their own count of keys an invocation; the
        // default stays unless another count is more than 2% faster (noise)
        let wide = Uploaded::wide(gpu, random_u32(2 * n, 2))?;
        let counts: &[u32] = if self.quick {
            &[6, 9]
        } else {
            &[4, 5, 6, 7, 8, 9]
        };
        let mut timed = Vec::new();
        for &v in counts {
            let t = sort::SortTuning {
                wide_items: v,
                ..best
            };
            timed.push((self.sort_time(&radix(t)?, &wide, false, None)?, v));
        }
        let default_items = sort::SortTuning::default().wide_items;
        let (secs, v) = timed
            .iter()
            .copied()
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .expect("candidates");
        best.wide_items = match timed.iter().find(|t| t.1 == default_items) {
            Some(&(d, _)) if secs * 1.02 >= d => default_items,
            _ => v,
        };
        self.say(format!(
            "sort, keys an invocation, 64-bit keys only: {} ({:.3} ms at 2^{})",
            best.wide_items,
            secs * 1e3,
            n.ilog2()
        ));
        // argsorts of 64-bit keys may have workgroups of their own size; the default (the
        // largest the device allows) stays unless another is more than 2% faster
        let mut timed = Vec::new();
        for v in [None, Some(512), Some(256)] {
            let t = sort::SortTuning {
                wide_payload_wg: v,
                ..best
            };
            timed.push((self.sort_time(&radix(t)?, &wide, true, None)?, v));
        }
        let (secs, v) = timed
            .iter()
            .copied()
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .expect("candidates");
        best.wide_payload_wg = if secs * 1.02 >= timed[0].0 { None } else { v };
        self.say(format!(
            "sort, invocations a workgroup, 64-bit argsorts: {} ({:.3} ms at 2^{})",
            best.wide_payload_wg
                .map_or("the largest that fits".to_string(), |w| w.to_string()),
            secs * 1e3,
            n.ilog2()
        ));
        // where the faster choice stays faster, from the smallest size up (argsorts with
        // `payload`)
        let from = |sizes: &[u32], a: &Sorter, b: &Sorter, payload: bool| -> Result<Option<u32>> {
            let mut faster = Vec::new();
            for &log in sizes {
                let generated = random_u32(1 << log, log as u64);
                let k = Uploaded::new(gpu, generated)?;
                let b_wins =
                    self.sort_time(b, &k, payload, None)? < self.sort_time(a, &k, payload, None)?;
                faster.push((log, b_wins));
            }
            Ok(stays_faster_from(faster))
        };
        let bitonic = Sorter::new(gpu)?
            .with_algorithm(Algorithm::Bitonic)
            .with_tuning(gpu, best)?;
        let sizes: Vec<u32> = if self.quick {
            vec![10, 12]
        } else {
            (17..=23).collect()
        };
        let payload_sizes: Vec<u32> = if self.quick {
            vec![10, 12]
        } else {
            (13..=20).collect()
        };
        // keys only, and with a payload (argsorts): one switch point each
        let with_radix = radix(best)?;
        for (payload, sizes, what) in [
            (false, &sizes, "sort, radix from"),
            (true, &payload_sizes, "sort, radix from, argsorts"),
        ] {
            let at = from(sizes, &bitonic, &with_radix, payload)?.map_or(u32::MAX, |l| 1 << l);
            match payload {
                false => best.radix_from = at,
                true => best.payload_radix_from = at,
            }
            self.say(format!("{what}: {}", keys_from(at)));
        }
        let lsd = radix(sort::SortTuning {
            msd_from: u32::MAX,
            ..best
        })?;
        let msd = radix(sort::SortTuning {
            msd_from: 0,
            ..best
        })?;
        let sizes: Vec<u32> = if self.quick {
            vec![12, 14]
        } else {
            (21..=26).collect()
        };
        best.msd_from = from(&sizes, &lsd, &msd, false)?.map_or(u32::MAX, |l| 1 << l);
        self.say(format!("sort, MSD path from: {}", keys_from(best.msd_from)));
        // segmented sorts of n keys: from which segment size the radix path is faster
        let bitonic = Sorter::new(gpu)?
            .with_algorithm(Algorithm::Bitonic)
            .with_tuning(gpu, best)?;
        let seg_radix = radix(best)?;
        let mut faster = Vec::new();
        for log in (8..=20)
            .step_by(if self.quick { 4 } else { 2 })
            .filter(|&l| 1 << (l + 2) <= n)
        {
            let s = Some(1u32 << log);
            let radix_wins = self.sort_time(&seg_radix, &keys, false, s)?
                < self.sort_time(&bitonic, &keys, false, s)?;
            faster.push((log, radix_wins));
        }
        best.segmented_radix_from = stays_faster_from(faster).map_or(u32::MAX, |l| 1 << l);
        self.say(format!(
            "sort, segmented radix from segments of: {}",
            keys_from(best.segmented_radix_from)
        ));
        Ok((best, gain.max(1.0)))
    }

    /// The time of an exclusive sum scan and a compaction of `data` with `scanner`, checked.
    fn scan_time(&self, scanner: &Scanner, data: &ScanInput) -> Result<f64> {
        let gpu = self.gpu;
        let n = data.sums.len();
        let scan = ScanJob {
            src: &data.src,
            dst: &data.dst,
            n: n as u32,
            key_type: KeyType::U32,
            op: ScanOp::Add,
            inclusive: false,
            carry: None,
        };
        let t_scan = self.time(&|_| {}, &|enc| scanner.record_scan(gpu, enc, &scan))?;
        let sums: Vec<u32> = transfer::read_vec(gpu, &data.dst, n)?;
        let compact = CompactJob {
            src: &data.src,
            dst: &data.dst,
            counts: &data.counts,
            n: n as u32,
            payload: None,
            predicate: Predicate::Below(1u32 << 31),
            keep: true,
            base_slot: None,
            count_slot: 0,
        };
        let t_compact = self.time(&|_| {}, &|enc| scanner.record_compact(gpu, enc, &compact))?;
        let kept = transfer::read_vec::<u32>(gpu, &data.counts, 1)?[0] as usize;
        if sums != data.sums || kept != data.kept {
            return Err(Error::VerificationFailed(format!(
                "tune: a candidate scan of {n} elements is wrong on {}",
                gpu.adapter.name
            )));
        }
        Ok(t_scan + t_compact)
    }

    fn scan(&self) -> Result<(scan::ScanTuning, f64)> {
        let gpu = self.gpu;
        let n = if self.quick { 1 << 16 } else { 1 << 26 };
        let data = ScanInput::new(gpu, &random_u32(n, 2))?;
        let with =
            |t: scan::ScanTuning| -> Result<Scanner> { Scanner::new(gpu)?.with_tuning(gpu, t) };
        let mut best = scan::ScanTuning::default().fitted(gpu);
        let default_time = self.scan_time(&with(best)?, &data)?;
        type Set = fn(&mut scan::ScanTuning, u32);
        let shapes: &[u32] = if self.quick {
            &[0, 1]
        } else {
            &[0, 1, 2, 3, 4]
        };
        let candidates: [(&str, &[u32], &[u32], Set); 5] = [
            ("shape (invocations x rounds)", shapes, &[0, 1], |t, v| {
                (t.scan_wg, t.scan_rounds) = SCAN_SHAPES[v as usize]
            }),
            (
                "looping workgroups",
                &[0, 528, 1024, 2048],
                &[0, 1024],
                |t, v| {
                    t.scan_workgroups = v;
                    t.compact_workgroups = v;
                },
            ),
            ("status stride", &[2, 8, 32], &[32], |t, v| {
                t.state_stride = v
            }),
            ("compaction rounds", &[8, 10, 12], &[10], |t, v| {
                t.compact_rounds = v
            }),
            ("look-back window", &[8, 16, 32], &[32], |t, v| t.window = v),
        ];
        for (what, full, quick, set) in candidates {
            let values = if self.quick { quick } else { full };
            let mut timed = Vec::new();
            for &v in values {
                let mut t = best;
                set(&mut t, v);
                if t.fitted(gpu) != t {
                    continue; // more invocations than the device takes
                }
                timed.push((self.scan_time(&with(t)?, &data)?, v));
            }
            if let Some((secs, v)) = timed.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0)) {
                set(&mut best, v);
                let shown = match what.starts_with("shape") {
                    true => format!("{} x {}", best.scan_wg, best.scan_rounds),
                    false => v.to_string(),
                };
                self.say(format!(
                    "scan, {what}: {shown} ({:.3} ms at 2^{})",
                    secs * 1e3,
                    n.ilog2()
                ));
            }
        }
        let tuned_time = self.scan_time(&with(best)?, &data)?;
        let gain = default_time / tuned_time;
        if gain <= 1.0 {
            return Ok((scan::ScanTuning::default().fitted(gpu), 1.0));
        }
        Ok((best, gain))
    }
}

/// The scan shapes tried: (invocations, vec4 rounds) per workgroup.
const SCAN_SHAPES: [(u32, u32); 5] = [(256, 8), (512, 8), (512, 4), (256, 16), (1024, 4)];

fn keys_from(v: u32) -> String {
    match v {
        u32::MAX => "never (the alternative was faster at every size tried)".into(),
        v => format!("2^{} keys", v.ilog2()),
    }
}

/// Keys on the GPU for the sort candidates: uploaded once, restored before each sort.
struct Uploaded {
    host: Vec<u32>,
    /// The words are 64-bit keys, low word first.
    wide: bool,
    fingerprint: Fingerprint,
    pristine: wgpu::Buffer,
    work: wgpu::Buffer,
    perm: wgpu::Buffer,
}

/// 64-bit keys from their words, low word first (as a GPU buffer holds them).
fn wide_keys(words: &[u32]) -> Vec<u64> {
    words
        .chunks_exact(2)
        .map(|w| (w[1] as u64) << 32 | w[0] as u64)
        .collect()
}

impl Uploaded {
    fn new(gpu: &Gpu, host: Vec<u32>) -> Result<Uploaded> {
        Uploaded::of(gpu, host, false)
    }

    /// 64-bit keys made of `host`'s words in pairs.
    fn wide(gpu: &Gpu, host: Vec<u32>) -> Result<Uploaded> {
        Uploaded::of(gpu, host, true)
    }

    fn of(gpu: &Gpu, host: Vec<u32>, wide: bool) -> Result<Uploaded> {
        let bytes = host.len() as u64 * 4;
        Ok(Uploaded {
            wide,
            fingerprint: match wide {
                true => fingerprint(&wide_keys(&host)),
                false => fingerprint(&host),
            },
            pristine: transfer::buffer_from(gpu, "tune keys", &host)?,
            work: transfer::storage_buffer(gpu, "tune sorted", bytes)?,
            perm: transfer::storage_buffer(gpu, "tune permutation", bytes)?,
            host,
        })
    }
}

/// The scan candidates' input on the GPU, with the results every candidate must give.
struct ScanInput {
    src: wgpu::Buffer,
    dst: wgpu::Buffer,
    counts: wgpu::Buffer,
    sums: Vec<u32>,
    kept: usize,
}

impl ScanInput {
    fn new(gpu: &Gpu, data: &[u32]) -> Result<ScanInput> {
        Ok(ScanInput {
            src: transfer::buffer_from(gpu, "tune scan input", data)?,
            dst: transfer::storage_buffer(gpu, "tune scan output", data.len() as u64 * 4)?,
            counts: transfer::storage_buffer(gpu, "tune counts", 16)?,
            sums: crate::reference::scan::scan(data, ScanOp::Add, false),
            kept: data.iter().filter(|&&x| x < 1 << 31).count(),
        })
    }
}

/// The smallest size (log2) from which the alternative is faster at every larger size measured,
/// given (size, alternative faster) in increasing size.
fn stays_faster_from(faster: Vec<(u32, bool)>) -> Option<u32> {
    faster
        .iter()
        .rev()
        .take_while(|(_, f)| *f)
        .last()
        .map(|(log, _)| *log)
}

#[cfg(test)]
mod tests {
    use super::stays_faster_from;

    #[test]
    fn a_threshold_is_where_the_alternative_stays_faster() {
        assert_eq!(
            stays_faster_from(vec![(10, false), (12, true), (14, true)]),
            Some(12)
        );
        assert_eq!(
            stays_faster_from(vec![(10, true), (12, false), (14, true)]),
            Some(14)
        );
        assert_eq!(stays_faster_from(vec![(10, true), (12, false)]), None);
        assert_eq!(stays_faster_from(vec![]), None);
    }
}
