//! Scheduler suite (METHODS.md method 5): many small independent sorts, dependent sort → scan
//! pairs, and chains of dependent sorts (10 each, or GPUSORT_BENCH_CHAIN), as one merged launch against one dispatch chain per task recorded into
//! the same single submit (the honest baseline: what a caller without the scheduler records),
//! safe mode, and, for equal sizes, the segmented sort. GPU-resident, GPU timestamps.

use gpusort_core::bench::random_u32;
use gpusort_core::device::transfer;
use gpusort_core::scan::{ScanJob, ScanOp};
use gpusort_core::schedule::{Batch, Mode, Scheduler, Work};
use gpusort_core::{KeyType, SortJob, SortOrder};

use super::{measure, Case, Ctx};
use crate::{Error, Result};

const SORT: Work = Work::Sort {
    key_type: KeyType::U32,
    descending: false,
};
const SCAN: Work = Work::Scan {
    key_type: KeyType::U32,
    op: ScanOp::Add,
    inclusive: false,
};

/// Tasks per chain in the chained case (each sorts its predecessor's result the other way):
/// 10, or the `chain` knob.
fn chain_len(knobs: &super::Knobs) -> usize {
    knobs
        .chain
        .as_deref()
        .and_then(|v| v.parse().ok())
        .filter(|&c| c >= 1)
        .unwrap_or(10)
}

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Independent,
    Pairs,
    Chains,
}

/// `tasks` tasks per case; `sizes` keys per task (as powers of two).
pub(super) fn suite(ctx: &Ctx<'_>, tasks: usize, sizes: &[u32]) -> Result<Vec<Case>, Error> {
    let (gpu, timer, bar, reps) = (ctx.gpu, ctx.timer, ctx.bar, ctx.reps);
    let merged = Scheduler::new(gpu)?.with_mode(Mode::Merged);
    let safe = Scheduler::new(gpu)?.with_mode(Mode::Safe);
    let sorter = ctx
        .sorter()?
        .with_algorithm(gpusort_core::Algorithm::Bitonic);
    let scanner = ctx.scanner()?;
    let mut cases = Vec::new();
    let mut cases_to_run: Vec<(u32, Shape)> =
        sizes.iter().map(|&s| (s, Shape::Independent)).collect();
    // the dependent cases at the smallest size
    cases_to_run.push((sizes[0], Shape::Pairs));
    cases_to_run.push((sizes[0], Shape::Chains));
    bar.inc_length(cases_to_run.len() as u64 * 4);
    let chain = chain_len(ctx.knobs);
    for (log, shape) in cases_to_run {
        let dependent = shape == Shape::Pairs;
        let n = 1usize << log;
        // regions of data: one per task, per pair, or per chain
        let regions = if shape == Shape::Chains {
            tasks.div_ceil(chain)
        } else {
            tasks
        };
        let words = regions * n;
        if let Some(why) = super::too_big(gpu, words as u64 * 4) {
            let case = format!("{tasks} tasks of 2^{log}");
            cases.push(super::skipped("sched", n as u64, &case, why));
            bar.inc(4);
            continue;
        }
        let data = random_u32(words, log as u64);
        let pristine = transfer::buffer_from(gpu, "sched pristine", &data)?;
        let work = transfer::storage_buffer(gpu, "sched work", words as u64 * 4)?;
        let restore = |enc: &mut wgpu::CommandEncoder| {
            enc.copy_buffer_to_buffer(&pristine, 0, &work, 0, words as u64 * 4)
        };
        let mut batch = Batch::default();
        for t in 0..regions {
            let off = (t * n) as u32;
            match shape {
                Shape::Independent => {
                    batch.add(SORT, off, n as u32, &[]);
                }
                Shape::Pairs => {
                    let s = batch.add(SORT, off, n as u32, &[]);
                    batch.add(SCAN, off, n as u32, &[s]);
                }
                Shape::Chains => {
                    let mut prev: Vec<usize> = Vec::new();
                    for d in 0..chain {
                        prev = vec![batch.add(chain_sort(chain, d), off, n as u32, &prev)];
                    }
                }
            }
        }
        let what = match shape {
            Shape::Independent => format!("{tasks} sorts"),
            Shape::Pairs => format!("{tasks} sort→scan pairs"),
            Shape::Chains => format!("{regions} chains of {chain} sorts"),
        };
        let mut these = Vec::new();
        for (name, sched) in [("merged launch", &merged), ("safe mode", &safe)] {
            bar.set_message(format!("{what} of 2^{log}: {name}"));
            let mut stats = None;
            let st = measure(reps, || {
                Ok(timer.time(gpu, restore, |enc| {
                    stats = Some(sched.record(gpu, enc, &batch, &work)?);
                    Ok(())
                })?)
            })?;
            check_segments(gpu, &work, n, regions, dependent, name)?;
            let (stats, recorded) = stats.expect("measured at least once");
            let deferred = recorded.deferred(gpu)?;
            these.push(case(
                &what,
                n,
                name,
                st,
                batch.tasks.len(),
                stats.dispatches as u64,
                format!(
                    "{} phases, {} workgroups, {} launches, {deferred} deferred",
                    stats.phases, stats.blocks, stats.launches
                ),
            ));
            bar.inc(1);
        }

        // the baseline: each task's own buffer and its own chain of dispatches, one submit
        bar.set_message(format!("{what} of 2^{log}: one chain per task"));
        let bufs: Vec<wgpu::Buffer> = (0..regions)
            .map(|_| transfer::storage_buffer(gpu, "sched task", n as u64 * 4))
            .collect::<Result<_, _>>()?;
        let outs: Vec<wgpu::Buffer> = if dependent {
            (0..regions)
                .map(|_| transfer::storage_buffer(gpu, "sched task scan", n as u64 * 4))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let restore_all = |enc: &mut wgpu::CommandEncoder| {
            for (t, b) in bufs.iter().enumerate() {
                enc.copy_buffer_to_buffer(&pristine, (t * n * 4) as u64, b, 0, n as u64 * 4);
            }
        };
        let mut dispatches = 0u64;
        let st = measure(reps, || {
            Ok(timer.time(gpu, restore_all, |enc| {
                dispatches = 0;
                for (t, b) in bufs.iter().enumerate() {
                    let sorts = if shape == Shape::Chains { chain } else { 1 };
                    for d in 0..sorts {
                        let descending = shape == Shape::Chains
                            && matches!(
                                chain_sort(chain, d),
                                Work::Sort {
                                    descending: true,
                                    ..
                                }
                            );
                        let job = SortJob {
                            key_type: KeyType::U32,
                            order: SortOrder {
                                descending,
                                segment_size: None,
                            },
                            keys: b,
                            n: n as u32,
                            values: None,
                            permutation: None,
                        };
                        let s = sorter.record(gpu, enc, &job)?;
                        dispatches += (s.network_dispatches + s.codec_dispatches) as u64;
                    }
                    if dependent {
                        scanner.record_scan(
                            gpu,
                            enc,
                            &ScanJob {
                                src: b,
                                dst: &outs[t],
                                n: n as u32,
                                key_type: KeyType::U32,
                                op: ScanOp::Add,
                                inclusive: false,
                                carry: None,
                            },
                        )?;
                        dispatches += 1;
                    }
                }
                Ok(())
            })?)
        })?;
        check_segments(
            gpu,
            bufs.last().expect("one task at least"),
            n,
            1,
            false,
            "one chain per task",
        )?;
        these.push(case(
            &what,
            n,
            "one dispatch chain per task",
            st,
            batch.tasks.len(),
            dispatches,
            "Sorter (+ Scanner) per task, one submit".into(),
        ));
        bar.inc(1);

        if shape == Shape::Independent {
            bar.set_message(format!("{what} of 2^{log}: segmented sort"));
            let job = SortJob {
                key_type: KeyType::U32,
                order: SortOrder {
                    descending: false,
                    segment_size: Some(n as u32),
                },
                keys: &work,
                n: words as u32,
                values: None,
                permutation: None,
            };
            let mut dispatches = 0u64;
            let st = measure(reps, || {
                Ok(timer.time(gpu, restore, |enc| {
                    let s = sorter.record(gpu, enc, &job)?;
                    dispatches = (s.network_dispatches + s.codec_dispatches) as u64;
                    Ok(())
                })?)
            })?;
            check_segments(gpu, &work, n, tasks, false, "segmented sort")?;
            these.push(case(
                &what,
                n,
                "segmented sort (equal sizes only)",
                st,
                tasks,
                dispatches,
                "one Sorter call with --segment-size".into(),
            ));
        }
        bar.inc(1);
        let ours = these[0].stats.median_s;
        for c in &mut these {
            c.relative = c.stats.median_s / ours;
        }
        cases.extend(these);
    }
    Ok(cases)
}

/// Sort `d` of a chain of `chain`: alternately descending and ascending, ending ascending.
fn chain_sort(chain: usize, d: usize) -> Work {
    Work::Sort {
        key_type: KeyType::U32,
        descending: (chain - 1 - d) % 2 == 1,
    }
}

fn case(
    what: &str,
    n: usize,
    name: &str,
    stats: gpusort_core::bench::Stats,
    tasks: usize,
    dispatches: u64,
    note: String,
) -> Case {
    Case {
        skipped: None,
        suite: "sched".into(),
        case: format!("{what}: {name}"),
        n: n as u64,
        stats: stats.clone(),
        throughput: (tasks * n) as f64 / stats.median_s / 1e9,
        unit: "GKeys/s".into(),
        relative: 0.0,
        dispatches: Some(dispatches),
        note,
        shown: false,
    }
}

/// Each of `tasks` segments of `n` sorted (or, after the exclusive sum scan of a sorted
/// segment, non-decreasing with a first element of 0 as long as the sum did not wrap).
fn check_segments(
    gpu: &gpusort_core::Gpu,
    buf: &wgpu::Buffer,
    n: usize,
    tasks: usize,
    scanned: bool,
    what: &str,
) -> Result {
    let v: Vec<u32> = transfer::read_vec(gpu, buf, n * tasks)?;
    let bad = v.chunks(n).position(|seg| {
        if scanned {
            seg[0] != 0
        } else {
            seg.windows(2).any(|w| w[0] > w[1])
        }
    });
    match bad {
        Some(s) => Err(Error::runtime(format!(
            "bench: {what} gave a wrong segment {s} on {}",
            gpu.adapter.name
        ))),
        None => Ok(()),
    }
}
