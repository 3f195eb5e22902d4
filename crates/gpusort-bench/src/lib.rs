//! `gpusort bench` as a library: where gpusort stands on this machine, with baselines from the
//! same run. The CLI turns its flags into [`Options`] and calls [`run`]; each suite's rows are
//! printed and exported (JSON, Markdown, SVG) as they are measured.
//!
//! Sort suite, per size: a vec4 copy of the keys (the bandwidth bound), the vectorised bitonic
//! sort, the plain one-dispatch-per-step bitonic sort (METHODS.md method 2), and the CPU
//! (sort_unstable, and rayon's par_sort_unstable on all cores). GPU cases are GPU-resident and
//! timed with GPU timestamps where the device has them. Every GPU result is checked once.

mod compare;
pub mod keysets;
mod matrix;
mod multi;
mod plot;
mod sched;
mod stencil;

use std::io::Write;
use std::path::PathBuf;

use gpusort_core::bench::{
    masked_u32_buffers, random_u32_buffers, CopyKernel, GpuTimer, PlainBitonic, Stats,
};
use gpusort_core::device::transfer;
use gpusort_core::sort::method_host_syncs;
use gpusort_core::{KeyType, SortJob, SortOrder, Sorter};
use indicatif::ProgressBar;
use rayon::slice::ParallelSliceMut;
use serde::Serialize;

pub use gpusort_files::Error;

/// A bench step's outcome: its value, or one line for the user (`Error`).
pub type Result<T = (), E = Error> = std::result::Result<T, E>;

/// `--warmup`'s default on a hardware GPU: after a second of CPU work a GPU's clock can fall to a
/// fifth of its peak, and a kernel timed then looks 2-4x slower (BENCHMARKS.md).
const DEFAULT_WARMUP_MS: u64 = 500;

/// One bench run: what it measures and where it reports (`gpusort bench`'s flags; their help
/// text says what each does).
pub struct Options {
    /// Small sizes and few repetitions; a software adapter runs it unless `sizes` are given.
    pub quick: bool,
    /// sort, scan, transfer, stencil, sched, multi, datafusion.
    pub suites: Vec<String>,
    /// Sizes as powers of two (empty: each suite's default).
    pub sizes: Vec<u32>,
    pub reps: Option<usize>,
    /// Tasks per case of the sched suite.
    pub tasks: Option<usize>,
    /// Skip the CPU baselines.
    pub gpu_only: bool,
    /// Milliseconds each GPU case repeats untimed before it is timed.
    pub warmup: Option<u64>,
    /// Key types (u32, i32, f32, u64, i64, f64) and key sets (`keysets`, or "all") of the sort
    /// matrix; stencils by name, or "all".
    pub dtypes: Vec<String>,
    pub keys: Vec<String>,
    pub stencils: Vec<String>,
    /// Exports, rewritten as each part of a suite is measured, and a saved run to compare with.
    pub json: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    pub compare: Option<PathBuf>,
    /// The tunings the sorts and scans run with (the front end's tuning file, or defaults).
    pub sort_tuning: gpusort_core::sort::SortTuning,
    pub scan_tuning: gpusort_core::scan::ScanTuning,
    /// Measuring knobs (a `--features measure` CLI reads them; none change a result).
    pub knobs: Knobs,
    /// Who is measuring: the version and commit the report names.
    pub version: &'static str,
    pub commit: &'static str,
    /// Progress of the cases (hidden where the front end shows none).
    pub bar: ProgressBar,
    /// Say nothing but the results.
    pub quiet: bool,
}

/// What a measuring run narrows a case to; never a result.
#[derive(Clone, Debug, Default)]
pub struct Knobs {
    /// The radix sort on a key-bit range only, e.g. 24..32 for one pass.
    pub radix_bits: Option<std::ops::Range<u32>>,
    /// The random keys ANDed with a hex mask, e.g. "ff00ffff".
    pub key_mask: Option<String>,
    /// Only the GPU sorts whose names contain this.
    pub sorts: Option<String>,
    /// The compaction's pivots, comma-separated.
    pub compact_pivot: Option<String>,
    /// The sched suite's chain length.
    pub chain: Option<String>,
}

/// Runs the datafusion suite (sizes, repetitions, the bar, and where each part goes): the table
/// engine lives with the front end that has it.
pub type TableSuite<'a> =
    dyn FnMut(&[u32], usize, &ProgressBar, &mut dyn FnMut(Vec<Case>) -> Result) -> Result + 'a;

#[derive(Serialize, Debug, Clone)]
pub struct Case {
    pub suite: String,
    /// Why the case did not run on this device (its stats are then empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub case: String,
    pub n: u64,
    pub stats: Stats,
    /// Throughput in `unit` from the median.
    pub throughput: f64,
    pub unit: String,
    /// Median time relative to the vectorised sort of the same size (> 1: slower than it).
    pub relative: f64,
    /// Host-ordered dispatches, where the case has them.
    pub dispatches: Option<u64>,
    pub note: String,
    /// Printed already, as it was measured ([`Ctx::show`]): not again with its suite's part.
    #[serde(skip)]
    pub(crate) shown: bool,
}

#[derive(Serialize)]
struct Report {
    /// The export's layout (bumped when fields change meaning).
    schema: u32,
    gpusort_version: &'static str,
    commit: &'static str,
    /// When the run started, UTC (RFC 3339).
    date: String,
    device: String,
    backend: String,
    driver: String,
    time_source: gpusort_core::bench::TimeSource,
    /// How long each GPU case repeated untimed before it was timed (--warmup).
    warmup_ms: u128,
    cases: Vec<Case>,
}

pub fn measure(reps: usize, f: impl FnMut() -> Result<f64, Error>) -> Result<Stats, Error> {
    measure_warm(reps, std::time::Duration::ZERO, f)
}

/// `measure` of a GPU case: after its warm-up run, the case repeats untimed for `warm` (see
/// `BenchArgs::warmup`).
pub(crate) fn measure_warm(
    reps: usize,
    warm: std::time::Duration,
    mut f: impl FnMut() -> Result<f64, Error>,
) -> Result<Stats, Error> {
    f()?; // warm-up: pipelines, caches, allocations
    let start = std::time::Instant::now();
    while start.elapsed() < warm {
        f()?;
    }
    let samples = (0..reps).map(|_| f()).collect::<Result<Vec<_>, _>>()?;
    Ok(Stats::of(samples))
}

impl Case {
    /// A measured row: throughput `units / median` in `unit`, relative time 1 and no note until
    /// [`Case::relative_to`] and [`Case::with_note`] set them.
    pub fn measured(
        suite: &str,
        case: String,
        n: u64,
        stats: Stats,
        units: f64,
        unit: &str,
    ) -> Case {
        Case {
            skipped: None,
            suite: suite.into(),
            case,
            n,
            throughput: units / stats.median_s,
            unit: unit.into(),
            relative: 1.0,
            stats,
            dispatches: None,
            note: String::new(),
            shown: false,
        }
    }

    /// Relative time against a baseline median of `base_s` seconds.
    pub fn relative_to(mut self, base_s: f64) -> Case {
        self.relative = self.stats.median_s / base_s;
        self
    }

    pub fn with_note(mut self, note: String) -> Case {
        self.note = note;
        self
    }
}

/// A row for a case the device cannot run, saying why.
fn skipped(suite: &str, n: u64, case: &str, why: String) -> Case {
    Case {
        suite: suite.into(),
        skipped: Some(why.clone()),
        case: case.into(),
        n,
        stats: Stats::of(Vec::new()),
        throughput: 0.0,
        unit: String::new(),
        relative: 0.0,
        dispatches: None,
        note: format!("skipped: {why}"),
        shown: false,
    }
}

/// Why `bytes` in one buffer cannot run on this device, if they cannot.
fn too_big(gpu: &gpusort_core::Gpu, bytes: u64) -> Option<String> {
    (bytes > gpu.max_binding()).then(|| {
        format!(
            "{} MiB in one buffer; {} binds at most {} MiB",
            bytes >> 20,
            gpu.adapter.name,
            gpu.max_binding() >> 20
        )
    })
}

/// The suites, in the order a run measures them.
const SUITES: [&str; 7] = [
    "sort",
    "scan",
    "transfer",
    "stencil",
    "sched",
    "multi",
    "datafusion",
];

/// What a run's options name, checked before anything is measured.
struct Checked {
    dtypes: Vec<KeyType>,
    key_sets: Vec<String>,
    /// None: every stencil
    stencil_names: Option<Vec<String>>,
    baseline: Option<compare::Baseline>,
}

/// Every name and path of `opts` checked: one clear error before any measuring.
fn checked(opts: &Options) -> Result<Checked> {
    for s in &opts.suites {
        if !SUITES.contains(&s.as_str()) {
            return Err(Error::usage(format!(
                "unknown suite '{s}' (available: {})",
                SUITES.join(", ")
            )));
        }
    }
    if let Some(&bad) = opts.sizes.iter().find(|&&s| !(1..=31).contains(&s)) {
        return Err(Error::usage(format!(
            "size 2^{bad} is out of range (1..=31)"
        )));
    }
    // the exports follow the output rules, checked before anything is measured: each a file of
    // its own that can be written, none the --compare baseline
    let exports: Vec<gpusort_files::Written> = [
        ("--json", &opts.json),
        ("--markdown", &opts.markdown),
        ("--plot", &opts.plot),
    ]
    .into_iter()
    .filter_map(|(flag, p)| {
        p.as_deref().map(|path| gpusort_files::Written {
            flag,
            path,
            replaces: None,
        })
    })
    .collect();
    for w in &exports {
        gpusort_files::check_output_path(w.path)?;
    }
    let baseline_input: Vec<gpusort_files::Named> = opts
        .compare
        .as_deref()
        .map(|path| gpusort_files::Named {
            flag: "--compare",
            path,
        })
        .into_iter()
        .collect();
    gpusort_files::check_distinct(&baseline_input, &exports)?;
    let dtypes = opts
        .dtypes
        .iter()
        .map(|d| {
            gpusort_core::KeyType::parse(d).map_err(|e| Error::usage(format!("--dtypes: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let key_sets = key_sets(&opts.keys)?;
    let stencil_names = stencil::names(&opts.stencils)?;
    // a saved run to compare with: read before anything is measured, so a bad file fails fast
    let baseline = match &opts.compare {
        Some(p) => Some(compare::Baseline::load(p)?),
        None => None,
    };
    Ok(Checked {
        dtypes,
        key_sets,
        stencil_names,
        baseline,
    })
}

/// Measure `opts.suites` on `gpu` (the multi suite on `group()`'s devices, the datafusion suite
/// through `tables`), printing each part as it is measured.
pub fn run(
    gpu: &gpusort_core::Gpu,
    group: &dyn Fn() -> Result<gpusort_core::multi::DeviceGroup>,
    tables: &mut TableSuite<'_>,
    opts: &Options,
) -> Result {
    let Checked {
        dtypes,
        key_sets,
        stencil_names,
        baseline,
    } = checked(opts)?;
    // a software adapter runs the quick set unless sizes are given: the full one takes hours
    let quick = opts.quick || (gpu.is_software() && opts.sizes.is_empty());
    if quick && !opts.quick && !opts.quiet {
        eprintln!(
            "gpusort: {} is a software adapter: running the quick set (--sizes chooses others)",
            gpu.adapter.name
        );
    }
    let sizes_for = |default: &[u32]| -> Vec<u32> {
        if !opts.sizes.is_empty() {
            opts.sizes.clone()
        } else if quick {
            vec![12, 14, 16]
        } else {
            default.to_vec()
        }
    };
    let reps = opts.reps.unwrap_or(if quick { 3 } else { 10 }).max(1);
    let timer = GpuTimer::new(gpu);
    let copy = CopyKernel::new(gpu)?;
    let bar = &opts.bar;
    let ctx = Ctx {
        gpu,
        timer: &timer,
        copy: &copy,
        bar,
        reps,
        sort_tuning: opts.sort_tuning,
        scan_tuning: opts.scan_tuning,
        knobs: &opts.knobs,
        cpu: !opts.gpu_only,
        warm: std::time::Duration::from_millis(opts.warmup.unwrap_or(if gpu.is_software() {
            0
        } else {
            DEFAULT_WARMUP_MS
        })),
    };
    let mut report = Report {
        schema: 1,
        gpusort_version: opts.version,
        commit: opts.commit,
        date: gpusort_core::tuning::utc_now(),
        device: gpu.adapter.name.clone(),
        backend: gpu.adapter.backend.clone(),
        driver: format!("{} {}", gpu.adapter.driver, gpu.adapter.driver_info)
            .trim()
            .to_string(),
        time_source: timer.source(),
        warmup_ms: ctx.warm.as_millis(),
        cases: Vec::new(),
    };
    println!(
        "device: {} ({}), times: {}, warm-up {} ms a GPU case",
        report.device, report.backend, report.time_source, report.warmup_ms
    );
    println!(
        "driver: {}; gpusort {} ({})",
        report.driver, report.gpusort_version, report.commit
    );
    // Each part of a suite (a size, or one datafusion source) is printed and exported as soon as
    // it is measured: the first line comes within seconds, and a run cut short keeps its parts.
    for suite in SUITES
        .iter()
        .filter(|s| opts.suites.iter().any(|a| a == *s))
    {
        bar.suspend(|| print_header(suite));
        let mut cases: Vec<Case> = Vec::new();
        let mut emit = |part: Vec<Case>| -> Result {
            bar.suspend(|| print_rows(part.iter().filter(|c| !c.shown)));
            report.cases.extend(part.iter().cloned());
            export(&report, opts)?;
            cases.extend(part);
            Ok(())
        };
        match *suite {
            "sort" => {
                for &log in &sizes_for(&[16, 18, 20, 22, 24, 26]) {
                    emit(sort_suite(&ctx, &[log])?)?;
                    emit(matrix::suite(&ctx, &[log], &dtypes, &key_sets)?)?;
                }
            }
            "scan" => {
                for &log in &sizes_for(&[20, 24, 28]) {
                    emit(scan_suite(&ctx, &[log])?)?;
                }
            }
            "transfer" => {
                for &log in &sizes_for(&[24, 28]) {
                    emit(transfer_suite(&ctx, &[log])?)?;
                }
            }
            "stencil" => {
                for &log in &sizes_for(&[24, 28]) {
                    emit(stencil::suite(&ctx, &[log], quick, &stencil_names)?)?;
                }
            }
            "multi" => {
                let group = group()?;
                for &log in &sizes_for(&[28, 31]) {
                    emit(multi::suite(&ctx, &group, &[log], quick)?)?;
                }
            }
            "datafusion" => tables(
                &sizes_for(&[24, 27]),
                opts.reps.unwrap_or(if quick { 2 } else { 3 }).max(1),
                bar,
                &mut emit,
            )?,
            _ => {
                let tasks = opts.tasks.unwrap_or(if quick { 100 } else { 1000 }).max(1);
                let sizes = if !opts.sizes.is_empty() {
                    opts.sizes.clone()
                } else if quick {
                    vec![12]
                } else {
                    vec![12, 16]
                };
                for &log in &sizes {
                    emit(sched::suite(&ctx, tasks, &[log])?)?;
                }
            }
        }
        bar.suspend(|| {
            print_summary(&cases);
            if let Some(b) = &baseline {
                compare::print(b, &cases);
            }
        });
    }
    bar.finish_and_clear();
    Ok(())
}

/// Write the JSON and Markdown exports of what was measured so far, in place at once (each
/// file atomically; a bench's exports are reports, not one job's outputs).
fn export(report: &Report, opts: &Options) -> Result {
    if let Some(p) = &opts.json {
        let text = serde_json::to_string_pretty(report).expect("serialisable");
        gpusort_files::Output::write_bytes_now(p, text.as_bytes())?;
    }
    if let Some(p) = &opts.markdown {
        gpusort_files::Output::write_bytes_now(p, markdown(report).as_bytes())?;
    }
    if let Some(p) = &opts.plot {
        let title = format!(
            "gpusort {} ({}) on {}, {}",
            report.gpusort_version, report.commit, report.device, report.date
        );
        plot::write(p, &title, &report.cases)?;
    }
    Ok(())
}

/// Records one sort into an encoder; returns its dispatches and, for a radix sort, which of its
/// paths was recorded (a note for the report).
type RecordSort<'a> =
    dyn Fn(&mut wgpu::CommandEncoder) -> gpusort_core::Result<(usize, Option<&'static str>)> + 'a;

/// What a radix sort recorded, in the report's words.
fn radix_path(st: &gpusort_core::SortStats) -> Option<&'static str> {
    match (st.algorithm, st.radix_msd, st.radix_unstable_first) {
        (gpusort_core::Algorithm::Radix, true, _) => Some(
            "one histogram read, then MSD: top digit, next digit per bucket, a local sort per \
             tile of 16-bit buckets (LSD passes where a bucket is too large)",
        ),
        (gpusort_core::Algorithm::Radix, false, true) => {
            Some("one histogram read + 4 one-sweep passes, the first unstable")
        }
        (gpusort_core::Algorithm::Radix, false, false) => {
            Some("one histogram read + 4 one-sweep passes")
        }
        _ => None,
    }
}

/// What every suite measures with.
struct Ctx<'a> {
    gpu: &'a gpusort_core::Gpu,
    sort_tuning: gpusort_core::sort::SortTuning,
    scan_tuning: gpusort_core::scan::ScanTuning,
    knobs: &'a Knobs,
    timer: &'a GpuTimer,
    copy: &'a CopyKernel,
    bar: &'a ProgressBar,
    reps: usize,
    /// Measure the CPU baselines (off with --gpu-only).
    cpu: bool,
    /// Untimed repetitions of each GPU case before it is timed (--warmup).
    warm: std::time::Duration,
}

impl Ctx<'_> {
    /// A sorter with the run's tuning.
    fn sorter(&self) -> Result<Sorter, Error> {
        Ok(Sorter::new(self.gpu)?.with_tuning(self.gpu, self.sort_tuning)?)
    }

    /// A scanner with the run's tuning.
    fn scanner(&self) -> Result<gpusort_core::Scanner, Error> {
        Ok(gpusort_core::Scanner::new(self.gpu)?.with_tuning(self.gpu, self.scan_tuning)?)
    }

    /// Print a finished case's row at once (a long suite talks while it works) and mark it
    /// shown; its part's export still carries it.
    fn show(&self, mut case: Case) -> Case {
        self.bar.suspend(|| print_rows([&case]));
        case.shown = true;
        case
    }
}

/// The vec4 copy kernel from `src` to `dst`: the bandwidth bound of a suite, in the same run.
fn measure_copy(ctx: &Ctx<'_>, src: &wgpu::Buffer, dst: &wgpu::Buffer) -> Result<Stats, Error> {
    measure_warm(ctx.reps, ctx.warm, || {
        Ok(ctx.timer.time(
            ctx.gpu,
            |_| {},
            |enc| {
                ctx.copy.record(ctx.gpu, enc, src, dst);
                Ok(())
            },
        )?)
    })
}

fn sort_suite(ctx: &Ctx<'_>, sizes: &[u32]) -> Result<Vec<Case>, Error> {
    let (gpu, timer, bar, reps) = (ctx.gpu, ctx.timer, ctx.bar, ctx.reps);
    bar.inc_length((sizes.len() * 8) as u64);
    let plain = PlainBitonic::new(gpu)?;
    let sorter = ctx
        .sorter()?
        .with_algorithm(gpusort_core::Algorithm::Bitonic);
    let mut radix_sorter = ctx.sorter()?.with_algorithm(gpusort_core::Algorithm::Radix);
    // measuring knob: the radix sort on a key-bit range only, e.g. "24..32" for one pass
    let radix_bits = ctx.knobs.radix_bits.clone();
    if let Some(bits) = &radix_bits {
        radix_sorter = radix_sorter.with_key_bits(bits.clone());
    }
    // measuring knob: the random keys ANDed with a hex mask, e.g. "ff00ffff" (the second digit
    // the same in every key: the radix MSD path falls back to the LSD passes)
    let key_mask = ctx
        .knobs
        .key_mask
        .clone()
        .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or(u32::MAX);
    // measuring knob: only the GPU sorts whose names contain this, e.g. "radix (8" (the copy
    // baseline always runs)
    let only = ctx.knobs.sorts.clone().unwrap_or_default();
    let mut cases = Vec::new();
    for &log in sizes {
        let n = 1usize << log;
        if let Some(why) = too_big(gpu, n as u64 * 4) {
            cases.push(skipped("sort", n as u64, "u32 sorts", why));
            bar.inc(8);
            continue;
        }
        let (pristine, work) = masked_u32_buffers(gpu, n, log as u64, key_mask)?;
        let restore = |enc: &mut wgpu::CommandEncoder| {
            enc.copy_buffer_to_buffer(&pristine, 0, &work, 0, (n * 4) as u64)
        };
        let case = |name: &str, stats: Stats, throughput: f64, unit: &str, d: Option<u64>, note| {
            sort_case(n, name, stats, throughput, unit, d, note)
        };
        let mut these = Vec::new();

        bar.set_message(format!("2^{log}: copy"));
        let st = measure_copy(ctx, &pristine, &work)?;
        these.push(case(
            "vec4 copy (bound)",
            st.clone(),
            8.0 * n as f64 / st.median_s / 1e9,
            "GB/s",
            Some(1),
            "read+write bytes".into(),
        ));
        bar.inc(1);

        let job = SortJob {
            key_type: KeyType::U32,
            order: SortOrder::default(),
            keys: &work,
            n: n as u32,
            values: None,
            permutation: None,
        };
        let perm = transfer::storage_buffer(gpu, "bench permutation", n as u64 * 4)?;
        let argsort_job = SortJob {
            permutation: Some(&perm),
            ..job
        };
        let copy_t = these[0].stats.median_s;
        let tile = Sorter::workgroup_size(gpu, 1) * 16;
        let formula = method_host_syncs(n as u64, 4, tile / 16);
        let recorded = |st: gpusort_core::SortStats| (st.network_dispatches, radix_path(&st));
        let gpu_sorts: [(&str, &RecordSort); 4] = [
            ("bitonic (vectorised)", &|enc| {
                Ok(recorded(sorter.record(gpu, enc, &job)?))
            }),
            ("radix (8-bit digits)", &|enc| {
                Ok(recorded(radix_sorter.record(gpu, enc, &job)?))
            }),
            ("radix argsort (key + index)", &|enc| {
                Ok(recorded(radix_sorter.record(gpu, enc, &argsort_job)?))
            }),
            ("bitonic (plain, method 2)", &|enc| {
                Ok((plain.record(gpu, enc, &work), None))
            }),
        ];
        for (name, record) in gpu_sorts {
            if !name.contains(only.as_str()) {
                bar.inc(1);
                continue;
            }
            bar.set_message(format!("2^{log}: {name}"));
            let (mut dispatches, mut path) = (0, None);
            let st = measure_warm(reps, ctx.warm, || {
                Ok(timer.time(gpu, restore, |enc| {
                    (dispatches, path) = record(enc)?;
                    Ok(())
                })?)
            })?;
            // where the MSD path was recorded, whether it ran or fell back on the GPU
            let outcome = match name.starts_with("radix") {
                true => radix_sorter.radix_msd_outcome(gpu)?,
                false => None,
            };
            let bits = radix_bits.clone().filter(|_| name.starts_with("radix"));
            // a measuring build's sort.probe / sort.stop (--tuning) take parts of the radix sort out
            if !(name.starts_with("radix") && radix_sorter.tuning().measuring()) {
                check_sorted(gpu, &work, n, name, bits)?;
            }
            let note = match name {
                "bitonic (vectorised)" => format!(
                    "tile {tile}; method formula (2 vec4/thread) {formula} global syncs; {:.1} copies of time",
                    st.median_s / copy_t
                ),
                _ => {
                    use gpusort_core::sort::radix::MsdOutcome;
                    let how = match outcome {
                        None => String::new(),
                        Some(MsdOutcome::Ran {
                            dense_buckets,
                            ranged,
                        }) => {
                            let mut how = String::new();
                            if ranged {
                                how += " [relative to the keys' range]";
                            }
                            if dense_buckets > 0 {
                                how += &format!(" [{dense_buckets} buckets by msd_dense]");
                            }
                            how
                        }
                        Some(MsdOutcome::FellBack) => " [fell back to the LSD passes]".into(),
                        Some(MsdOutcome::LsdAtOnce) => " [LSD passes at once]".into(),
                    };
                    format!("{}{how}", path.unwrap_or_default())
                }
            };
            these.push(case(
                name,
                st.clone(),
                n as f64 / st.median_s / 1e9,
                "GKeys/s",
                Some(dispatches as u64),
                note,
            ));
            bar.inc(1);
        }

        if ctx.cpu {
            cpu_sorts(ctx, &pristine, log, &mut these)?;
        } else {
            bar.inc(2);
        }

        // relative to the vectorised bitonic sort (0 where GPUSORT_BENCH_SORTS left it out)
        let ours = these
            .iter()
            .find(|c| c.case == "bitonic (vectorised)")
            .map(|c| c.stats.median_s);
        for c in &mut these {
            c.relative = ours.map_or(0.0, |o| c.stats.median_s / o);
        }
        cases.extend(these);
    }
    Ok(cases)
}

fn sort_case(
    n: usize,
    name: &str,
    stats: Stats,
    throughput: f64,
    unit: &str,
    dispatches: Option<u64>,
    note: String,
) -> Case {
    Case {
        skipped: None,
        suite: "sort".into(),
        case: name.into(),
        n: n as u64,
        stats,
        throughput,
        unit: unit.into(),
        relative: 0.0,
        dispatches,
        note,
        shown: false,
    }
}

/// The CPU sort baselines of one size: sort_unstable on one core, par_sort_unstable on all.
fn cpu_sorts(
    ctx: &Ctx<'_>,
    pristine: &wgpu::Buffer,
    log: u32,
    these: &mut Vec<Case>,
) -> Result<(), Error> {
    let (gpu, bar, reps) = (ctx.gpu, ctx.bar, ctx.reps);
    let n = 1usize << log;
    let keys: Vec<u32> = transfer::read_vec(gpu, pristine, n)?;
    let cpu_reps = if n >= 1 << 24 { reps.min(3) } else { reps };
    let all_cores = format!(
        "CPU par_sort_unstable ({} threads)",
        rayon::current_num_threads()
    );
    type Sort = fn(&mut [u32]);
    let sorts: [(&str, Sort); 2] = [
        ("CPU sort_unstable (1 core)", |v| v.sort_unstable()),
        (&all_cores, |v| v.par_sort_unstable()),
    ];
    for (name, sort) in sorts {
        bar.set_message(format!("2^{log}: {name}"));
        let st = measure(cpu_reps, || {
            let mut v = keys.clone();
            let t = std::time::Instant::now();
            sort(&mut v);
            Ok(t.elapsed().as_secs_f64())
        })?;
        let rate = n as f64 / st.median_s / 1e9;
        these.push(sort_case(
            n,
            name,
            st,
            rate,
            "GKeys/s",
            None,
            "wall clock".into(),
        ));
        bar.inc(1);
    }
    Ok(())
}

/// Scan suite: exclusive u32 sum scan and compaction against a vec4 copy of the same data.
fn scan_suite(ctx: &Ctx<'_>, sizes: &[u32]) -> Result<Vec<Case>, Error> {
    use gpusort_core::scan::{CompactJob, Predicate, ScanJob, ScanOp};
    let (gpu, timer, bar, reps) = (ctx.gpu, ctx.timer, ctx.bar, ctx.reps);
    let scanner = ctx.scanner()?;
    // (of the same tuning: scan.no_lookback in measuring builds skips its look-back too)
    let scanner64 = scanner.scanner64(gpu);
    let paths = if scanner.uses_subgroups() {
        "subgroup kernels"
    } else {
        "workgroup-memory kernels"
    };
    bar.inc_length((sizes.len() * 6) as u64);
    let mut cases = Vec::new();
    for &log in sizes {
        let n = 1usize << log;
        if let Some(why) = too_big(gpu, n as u64 * 4) {
            cases.push(ctx.show(skipped("scan", n as u64, "u32 scans and compactions", why)));
            bar.inc(6);
            continue;
        }
        let (src, dst) = random_u32_buffers(gpu, n, log as u64 + 100)?;
        let counts = transfer::storage_buffer(gpu, "bench counts", 16)?;
        let case = |name: &str, stats: Stats, bytes: f64, relative: f64, note: String| Case {
            skipped: None,
            suite: "scan".into(),
            case: name.into(),
            n: n as u64,
            stats: stats.clone(),
            throughput: bytes / stats.median_s / 1e9,
            unit: "GB/s".into(),
            relative,
            dispatches: Some(1),
            note,
            shown: false,
        };
        bar.set_message(format!("2^{log}: copy"));
        let copy_st = measure_copy(ctx, &src, &dst)?;
        let copy_gbs = 8.0 * n as f64 / copy_st.median_s / 1e9;
        cases.push(ctx.show(case(
            "vec4 copy (bound)",
            copy_st.clone(),
            8.0 * n as f64,
            1.0,
            "read+write bytes".into(),
        )));
        bar.inc(1);

        bar.set_message(format!("2^{log}: exclusive sum scan"));
        let st = measure_warm(reps, ctx.warm, || {
            Ok(timer.time(
                gpu,
                |_| {},
                |enc| {
                    scanner.record_scan(
                        gpu,
                        enc,
                        &ScanJob {
                            src: &src,
                            dst: &dst,
                            n: n as u32,
                            key_type: KeyType::U32,
                            op: ScanOp::Add,
                            inclusive: false,
                            carry: None,
                        },
                    )
                },
            )?)
        })?;
        let input: Vec<u32> = transfer::read_vec(gpu, &src, n)?;
        let got: Vec<u32> = transfer::read_vec(gpu, &dst, n)?;
        // scan.no_lookback (--tuning, measuring builds) measures the scan without its look-back: wrong by design
        let unchecked = scanner.tuning().no_lookback;
        if !unchecked && got != gpusort_core::reference::scan::scan(&input, ScanOp::Add, false) {
            return Err(Error::runtime(format!(
                "bench: the scan of 2^{log} differs from the CPU's on {}",
                gpu.adapter.name
            )));
        }
        let gbs = 8.0 * n as f64 / st.median_s / 1e9;
        cases.push(ctx.show(case(
            "exclusive sum scan u32",
            st.clone(),
            8.0 * n as f64,
            st.median_s / copy_st.median_s,
            format!(
                "{:.0}% of copy bandwidth; {paths}{}{}",
                100.0 * gbs / copy_gbs,
                if unchecked {
                    "; look-back off (measurement only, unchecked)"
                } else {
                    ""
                },
                look_back_counts(gpu, &scanner, 0)?
            ),
        )));
        bar.inc(1);

        bar.set_message(format!("2^{log}: compaction"));
        // GPUSORT_BENCH_COMPACT_PIVOT (measuring builds) moves the pivot (0 keeps nothing,
        // 4294967295 nearly all), to measure the compaction's reads apart from its writes; a
        // comma-separated list measures each in turn on the same buffers (the CPU baseline uses
        // the last)
        let pivots: Vec<u32> = ctx
            .knobs
            .compact_pivot
            .clone()
            .map(|v| v.split(',').filter_map(|p| p.trim().parse().ok()).collect())
            .filter(|p: &Vec<u32>| !p.is_empty())
            .unwrap_or(vec![1u32 << 31]);
        bar.inc_length(pivots.len() as u64 - 1);
        let mut bytes = 0.0;
        let mut pivot = 0;
        let job = CompactJob {
            src: &src,
            dst: &dst,
            counts: &counts,
            n: n as u32,
            payload: None,
            predicate: Predicate::Below(0),
            keep: true,
            base_slot: None,
            count_slot: 0,
        };
        // scan.compact_probe (--tuning, measuring builds) skips parts of the compaction: its output is wrong by design too
        let compact_unchecked = unchecked || scanner.tuning().compact_probe != 0;
        for &this_pivot in &pivots {
            pivot = this_pivot;
            let st = measure_warm(reps, ctx.warm, || {
                Ok(timer.time(
                    gpu,
                    |_| {},
                    |enc| {
                        scanner.record_compact(
                            gpu,
                            enc,
                            &CompactJob {
                                predicate: Predicate::Below(pivot),
                                ..job
                            },
                        )
                    },
                )?)
            })?;
            let want: Vec<u32> = input.iter().copied().filter(|&x| x < pivot).collect();
            let kept = if compact_unchecked {
                want.len()
            } else {
                transfer::read_vec::<u32>(gpu, &counts, 1)?[0] as usize
            };
            if !compact_unchecked && transfer::read_vec::<u32>(gpu, &dst, kept)? != want {
                return Err(Error::runtime(format!(
                    "bench: the compaction of 2^{log} differs from the CPU's on {}",
                    gpu.adapter.name
                )));
            }
            bytes = 4.0 * (n + kept) as f64;
            let gbs = bytes / st.median_s / 1e9;
            cases.push(ctx.show(case(
                &if pivot == 1 << 31 {
                    "compaction u32 (x < 2^31)".to_string()
                } else {
                    format!("compaction u32 (x < {pivot})")
                },
                st.clone(),
                bytes,
                st.median_s / copy_st.median_s,
                format!(
                    "pivot {pivot}, kept {kept}; {:.0}% of copy bandwidth; {paths}{}",
                    100.0 * gbs / copy_gbs,
                    look_back_counts(gpu, &scanner, 1)?
                ),
            )));
            bar.inc(1);
        }

        if ctx.cpu {
            // CPU baselines: a sequential loop, as a user would write it
            bar.set_message(format!("2^{log}: CPU scan and compaction"));
            let cpu_reps = if n >= 1 << 24 { reps.min(3) } else { reps };
            let st = measure(cpu_reps, || {
                let t = std::time::Instant::now();
                let mut acc = 0u32;
                let out: Vec<u32> = input
                    .iter()
                    .map(|&x| {
                        let before = acc;
                        acc = acc.wrapping_add(x);
                        before
                    })
                    .collect();
                std::hint::black_box(&out);
                Ok(t.elapsed().as_secs_f64())
            })?;
            cases.push(ctx.show(case(
                "CPU exclusive sum scan (1 core)",
                st.clone(),
                8.0 * n as f64,
                st.median_s / copy_st.median_s,
                "wall clock".into(),
            )));
            let st = measure(cpu_reps, || {
                let t = std::time::Instant::now();
                let out: Vec<u32> = input.iter().copied().filter(|&x| x < pivot).collect();
                std::hint::black_box(&out);
                Ok(t.elapsed().as_secs_f64())
            })?;
            cases.push(ctx.show(case(
                "CPU compaction (1 core)",
                st.clone(),
                bytes,
                st.median_s / copy_st.median_s,
                "wall clock".into(),
            )));
            for c in cases.iter_mut().rev().take(2) {
                c.dispatches = None; // the CPU cases
            }
        }
        bar.inc(1);

        // 64-bit elements (Scanner64::record, GPU-resident), against the copy of their bytes
        bar.set_message(format!("2^{log}: exclusive sum scan u64"));
        // (a scan and a copy of buffers beyond one binding run in pieces: one buffer's limit)
        let bytes = n as u64 * 8;
        if bytes > gpu.limits.max_buffer_size {
            let why = format!("{} MiB in one buffer on {}", bytes >> 20, gpu.adapter.name);
            cases.push(ctx.show(skipped("scan", n as u64, "u64 scans", why)));
            bar.inc(2);
            continue;
        }
        let (src, dst) = random_u32_buffers(gpu, 2 * n, log as u64 + 200)?;
        let copy_st = measure_copy(ctx, &src, &dst)?;
        cases.push(ctx.show(case(
            "vec4 copy of the u64 bytes (bound)",
            copy_st.clone(),
            16.0 * n as f64,
            1.0,
            "read+write bytes".into(),
        )));
        bar.inc(1);
        let job = ScanJob {
            src: &src,
            dst: &dst,
            n: n as u32,
            key_type: KeyType::U64,
            op: ScanOp::Add,
            inclusive: false,
            carry: None,
        };
        let st = measure_warm(reps, ctx.warm, || {
            Ok(timer.time(gpu, |_| {}, |enc| scanner64.record(gpu, enc, &job))?)
        })?;
        let input: Vec<u64> = transfer::read_vec(gpu, &src, n)?;
        let got: Vec<u64> = transfer::read_vec(gpu, &dst, n)?;
        if !scanner.tuning().no_lookback
            && got != gpusort_core::reference::scan::scan64(&input, ScanOp::Add, false)
        {
            return Err(Error::runtime(format!(
                "bench: the u64 scan of 2^{log} differs from the CPU's on {}",
                gpu.adapter.name
            )));
        }
        cases.push(ctx.show(Case {
            dispatches: Some(1),
            ..case(
                "exclusive sum scan u64",
                st.clone(),
                16.0 * n as f64,
                st.median_s / copy_st.median_s,
                format!(
                    "{:.0}% of the copy of its bytes; one dispatch a binding (tiles chained by a look-back)",
                    100.0 * copy_st.median_s / st.median_s
                ),
            )
        }));
        bar.inc(1);
    }
    Ok(cases)
}

/// Transfer suite: host -> GPU and GPU -> host bandwidth of the transfer layer by staging chunk
/// size, through imported host memory (where the device can) and through wgpu's mapped buffers,
/// wall clock (transfers are CPU work too), round trip checked.
fn transfer_suite(ctx: &Ctx<'_>, sizes: &[u32]) -> Result<Vec<Case>, Error> {
    let (gpu, bar, reps) = (ctx.gpu, ctx.bar, ctx.reps.min(5));
    let chunks: [u64; 4] = [4 << 20, 16 << 20, 64 << 20, 256 << 20];
    let paths: Vec<bool> = if gpu.can_import_host_memory() {
        vec![true, false]
    } else {
        vec![false]
    };
    let default_path = gpu.host_memory_import();
    bar.inc_length((sizes.len() * chunks.len() * paths.len()) as u64);
    let mut cases = Vec::new();
    for &log in sizes {
        let n = 1usize << log;
        let bytes = (n * 4) as u64;
        if bytes > gpu.limits.max_buffer_size {
            let why = format!(
                "{} MiB in one buffer; {} allows at most {} MiB",
                bytes >> 20,
                gpu.adapter.name,
                gpu.limits.max_buffer_size >> 20
            );
            cases.push(ctx.show(skipped("transfer", n as u64, "transfers", why)));
            bar.inc((chunks.len() * paths.len()) as u64);
            continue;
        }
        let host: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
        let mut back = vec![0u32; n];
        let buf = transfer::storage_buffer(gpu, "bench transfer", bytes)?;
        for &imported in &paths {
            gpu.set_host_memory_import(imported)?;
            let path = if imported {
                "imported host memory"
            } else {
                "mapped staging"
            };
            for &chunk in chunks.iter().filter(|&&c| c <= bytes.max(4 << 20)) {
                bar.set_message(format!(
                    "2^{log}: transfers in {} MiB chunks, {path}",
                    chunk >> 20
                ));
                let up = measure(reps, || {
                    let t = std::time::Instant::now();
                    transfer::upload_chunked(gpu, &buf, 0, bytemuck::cast_slice(&host), chunk)?;
                    gpu.wait()?; // until the last chunk is on the GPU
                    Ok(t.elapsed().as_secs_f64())
                })?;
                back.fill(0);
                let down = measure(reps, || {
                    let t = std::time::Instant::now();
                    transfer::download_chunked(
                        gpu,
                        &buf,
                        0,
                        bytemuck::cast_slice_mut(&mut back),
                        chunk,
                    )?;
                    Ok(t.elapsed().as_secs_f64())
                })?;
                if back != host {
                    return Err(Error::runtime(format!(
                        "bench: a transfer round trip of 2^{log} u32 ({path}) came back different"
                    )));
                }
                for (name, st) in [
                    ("upload (host -> GPU)", up),
                    ("download (GPU -> host)", down),
                ] {
                    cases.push(ctx.show(
                        Case::measured(
                            "transfer",
                            format!("{name}, {path}, {} MiB chunks", chunk >> 20),
                            n as u64,
                            st,
                            bytes as f64 / 1e9,
                            "GB/s",
                        )
                        .with_note(format!(
                            "{} MiB, wall clock, ring of {} staging buffers ({path}), {} CPU threads",
                            bytes >> 20,
                            transfer::RING_SLOTS,
                            rayon::current_num_threads()
                        )),
                    ));
                }
                bar.inc(1);
            }
        }
    }
    gpu.set_host_memory_import(default_path)?;
    // the bound: a PinnedBuffer's transfers (the copy engine alone on imported host memory, no
    // CPU copy), and what making one costs (what a zero-copy import of a caller's pages pays)
    for &log in sizes {
        let bytes = (4usize << log) as u64;
        if bytes > gpu.limits.max_buffer_size {
            continue;
        }
        let buf = transfer::storage_buffer(gpu, "bench transfer bound", bytes)?;
        let mut runs = Vec::new();
        for _ in 0..reps.max(1) + 1 {
            match transfer::pinned_copy_seconds(gpu, &buf, bytes)? {
                Some(r) => runs.push(r),
                None => break,
            }
        }
        if runs.len() < 2 {
            continue;
        }
        runs.remove(0); // warm-up
        let pick =
            |f: fn(&(f64, f64, f64)) -> f64| -> Stats { Stats::of(runs.iter().map(f).collect()) };
        for (name, st) in [
            (
                "pinned buffer (imported once), one copy: host -> GPU",
                pick(|r| r.1),
            ),
            (
                "pinned buffer (imported once), one copy: GPU -> host",
                pick(|r| r.2),
            ),
            (
                "making a pinned buffer (importing, pinning pages)",
                pick(|r| r.0),
            ),
        ] {
            cases.push(ctx.show(
                Case::measured("transfer", name.into(), bytes / 4, st, bytes as f64 / 1e9, "GB/s")
                    .with_note(format!(
                        "{} MiB in one copy by the copy engine (gpusort_core::PinnedBuffer), no CPU copy, wall clock around submit and wait; the bound the ring approaches",
                        bytes >> 20
                    )),
            ));
        }
    }
    Ok(cases)
}

/// With the scan tuning's `counters` (`--tuning`), the last repetition's look-back counts for a case's note.
fn look_back_counts(
    gpu: &gpusort_core::Gpu,
    scanner: &gpusort_core::scan::Scanner,
    family: usize,
) -> Result<String, Error> {
    Ok(match scanner.look_back_counters(gpu, family)? {
        Some([rounds, silent, fallbacks, most, started]) => format!(
            "; look-back of the last run: {rounds} walk rounds, {silent} silent reads, {fallbacks} fallbacks; tiles in progress: at most {most}, summed at each start {started}"
        ),
        None => String::new(),
    })
}

/// Whether `buf` holds `n` u32 keys in order (on the key bits `bits` only, when given).
fn check_sorted(
    gpu: &gpusort_core::Gpu,
    buf: &wgpu::Buffer,
    n: usize,
    what: &str,
    bits: Option<std::ops::Range<u32>>,
) -> Result {
    let v: Vec<u32> = transfer::read_vec(gpu, buf, n)?;
    let bits = bits.unwrap_or(0..32);
    let key = |x: &u32| gpusort_core::reference::radix::key_on_bits(x, false, &bits);
    if v.windows(2).any(|w| key(&w[0]) > key(&w[1])) {
        return Err(Error::runtime(format!(
            "bench: {what} produced an unsorted result on {}",
            gpu.adapter.name
        )));
    }
    Ok(())
}

fn fmt_time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

fn rows(cases: &[Case]) -> Vec<[String; 7]> {
    cases
        .iter()
        .map(|c| {
            let measured = c.skipped.is_none();
            [
                format!("2^{}", (c.n as f64).log2() as u32),
                c.case.clone(),
                if measured {
                    format!(
                        "{} [{} … {}]",
                        fmt_time(c.stats.median_s),
                        fmt_time(c.stats.min_s),
                        fmt_time(c.stats.max_s)
                    )
                } else {
                    "-".into()
                },
                if measured {
                    format!("{:.3} {}", c.throughput, c.unit)
                } else {
                    "-".into()
                },
                if measured && c.relative > 0.0 {
                    format!("{:.2}×", c.relative)
                } else {
                    String::new()
                },
                c.dispatches.map(|d| d.to_string()).unwrap_or_default(),
                c.note.clone(),
            ]
        })
        .collect()
}

/// "relative time": in the sort suite, over the vectorised bitonic sort's; in the sched suite,
/// over the merged launch's; in the scan suite,
/// over the copy's.
const HEADER: [&str; 7] = [
    "n",
    "case",
    "median [min … max]",
    "throughput",
    "relative time",
    "dispatches",
    "note",
];

/// The widest a terminal table gets; min/max, dispatches and notes are in the exports.
const TABLE_WIDTH: usize = 100;

/// The terminal table's columns (n, case, median, throughput, relative time): fixed, since rows
/// are printed as they are measured, within [`TABLE_WIDTH`] columns.
const COLUMNS: [usize; 5] = [5, 40, 10, 22, 13];

/// One row of the terminal table, each cell cut or padded to its column.
fn table_line(cells: [&str; 5]) -> String {
    let text = cells
        .iter()
        .zip(COLUMNS)
        .map(|(c, w)| format!("{:<w$}", cut(c, w)))
        .collect::<Vec<_>>()
        .join("  ");
    cut(text.trim_end(), TABLE_WIDTH)
}

fn cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut t: String = s.chars().take(w - 1).collect();
    t.push('…');
    t
}

/// A suite's title and the table's header, before its first case is measured.
fn print_header(suite: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\n{suite}");
    let _ = writeln!(
        out,
        "{}",
        table_line(["n", "case", "median", "throughput", "relative time"])
    );
    let _ = out.flush();
}

/// Cases as they are measured, a line each.
fn print_rows<'c>(cases: impl IntoIterator<Item = &'c Case>) {
    let mut out = std::io::stdout().lock();
    for c in cases {
        let measured = c.skipped.is_none();
        let cells = [
            format!("2^{}", (c.n as f64).log2() as u32),
            c.case.clone(),
            if measured {
                fmt_time(c.stats.median_s)
            } else {
                "skipped".into()
            },
            if measured {
                format!("{:.3} {}", c.throughput, c.unit)
            } else {
                c.skipped.clone().unwrap_or_default()
            },
            if measured && c.relative > 0.0 {
                format!("{:.2}×", c.relative)
            } else {
                String::new()
            },
        ];
        let _ = writeln!(out, "{}", table_line(cells.each_ref().map(String::as_str)));
    }
    let _ = out.flush();
}

/// The line under a suite's table.
fn print_summary(cases: &[Case]) {
    let skipped = cases.iter().filter(|c| c.skipped.is_some()).count();
    println!(
        "{} cases measured{}; min/max, dispatches and notes in --json / --markdown",
        cases.len() - skipped,
        if skipped > 0 {
            format!(", {skipped} skipped (too large for this device)")
        } else {
            String::new()
        }
    );
}

fn markdown(r: &Report) -> String {
    let mut s = format!(
        "Device: {} ({}); times from {}; each GPU case warmed up for {} ms.\n\n",
        r.device, r.backend, r.time_source, r.warmup_ms
    );
    s.push_str(&format!(
        "| {} |\n|{}|\n",
        HEADER.join(" | "),
        ["---"; 7].join("|")
    ));
    for row in rows(&r.cases) {
        s.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    s
}

/// `--keys`: names from `keysets::KEY_SETS`, or `all`; `help` lists them (a usage error, so
/// nothing runs).
pub fn key_sets(asked: &[String]) -> Result<Vec<String>, Error> {
    let names: Vec<&str> = keysets::KEY_SETS.iter().map(|(n, _)| *n).collect();
    if asked.iter().any(|a| a == "all") {
        return Ok(names.iter().map(|n| n.to_string()).collect());
    }
    for a in asked {
        if !names.contains(&a.as_str()) {
            let list: Vec<String> = keysets::KEY_SETS
                .iter()
                .map(|(n, what)| format!("{n} ({what})"))
                .collect();
            return Err(Error::usage(format!(
                "--keys {a}: the key sets are {}, or all",
                list.join(", ")
            )));
        }
    }
    Ok(asked.to_vec())
}
