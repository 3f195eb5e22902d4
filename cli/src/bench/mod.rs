//! `gpusort bench`: its flags, turned into the bench library's options (crates/gpusort-bench), and
//! the datafusion suite (the `sql` feature: DataFusion).

#[cfg(feature = "sql")]
mod datafusion;

use std::path::PathBuf;

use crate::error::{CliError, CliResult};
use crate::Global;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Small sizes and few repetitions (under a minute on a software adapter).
    #[arg(long)]
    pub quick: bool,
    /// Suites to run: sort, scan, transfer, stencil, sched; and, not in the default set, multi
    /// (each job on 1..N devices of --devices) and datafusion (ORDER BY in DataFusion, its own
    /// sort against GpuSortExec).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sort,scan,transfer,stencil,sched"
    )]
    pub suite: Vec<String>,
    /// Sizes as powers of two, e.g. 16,20,24 (default per suite, e.g. sort 16..26 step 2; quick
    /// and on a software adapter: 12,14,16, the sched suite 12). Sizes the device cannot hold
    /// show as skipped rows.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<u32>,
    /// Timed repetitions per case (after one warm-up).
    #[arg(long)]
    pub reps: Option<usize>,
    /// Tasks per case of the sched suite (default 1000; quick: 100).
    #[arg(long)]
    pub tasks: Option<usize>,
    /// Skip the CPU baselines of the sort and scan suites.
    #[arg(long)]
    pub gpu_only: bool,
    /// Milliseconds each GPU case repeats untimed before it is timed (default 500 on a hardware
    /// GPU, 0 on a software adapter): an idle GPU lowers its clocks, and cases timed right after
    /// CPU work (checks, baselines) would otherwise run at a fraction of them.
    #[arg(long, value_name = "MS")]
    pub warmup: Option<u64>,
    /// Write the results as JSON: version, commit, device, driver, date and every sample.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The key types the sort suite's matrix measures (u32, i32, f32, u64, i64, f64).
    #[arg(long, value_delimiter = ',', default_value = "u32,i32,f32,u64,i64,f64")]
    pub dtypes: Vec<String>,
    /// The key sets it measures them on, by name, or `all` (`gpusort bench --keys help` lists
    /// them).
    #[arg(long, value_delimiter = ',', default_value = "uniform")]
    pub keys: Vec<String>,
    /// The stencils the stencil suite measures, by name (2d-star-r1 .. 2d-star-r4, 2d-box-r1 ..
    /// 2d-box-r4, 3d-star-r1 .. 3d-star-r4, 3d-box-r1, 3d-box-r2), or `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    pub stencils: Vec<String>,
    /// Print each case's change against a run saved with --json (same device or not: it says).
    #[arg(long, value_name = "OLD.json")]
    pub compare: Option<PathBuf>,
    /// Write the results as a Markdown table.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Draw throughput against size, one line per case, as an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Where the datafusion suite writes its Parquet datasets (kept; default: a temporary
    /// folder, removed).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

pub fn run(g: &Global, args: &BenchArgs) -> CliResult {
    let gpu = g.gpu()?;
    let (sort_tuning, scan_tuning) = crate::tuning::tunings(&gpu);
    let opts = gpusort_bench::Options {
        quick: args.quick,
        suites: args.suite.clone(),
        sizes: args.sizes.clone(),
        reps: args.reps,
        tasks: args.tasks,
        gpu_only: args.gpu_only,
        warmup: args.warmup,
        dtypes: args.dtypes.clone(),
        keys: args.keys.clone(),
        stencils: args.stencils.clone(),
        json: args.json.clone(),
        markdown: args.markdown.clone(),
        plot: args.plot.clone(),
        compare: args.compare.clone(),
        sort_tuning,
        scan_tuning,
        knobs: knobs(),
        version: env!("CARGO_PKG_VERSION"),
        commit: env!("GPUSORT_COMMIT"),
        bar: crate::progress::bar(g.progress, g.quiet, 0, "cases"),
        quiet: g.quiet,
    };
    let group = || g.group().map_err(bench_error);
    #[cfg(feature = "sql")]
    let mut tables =
        |sizes: &[u32],
         reps: usize,
         bar: &indicatif::ProgressBar,
         emit: &mut dyn FnMut(Vec<gpusort_bench::Case>) -> gpusort_bench::Result| {
            // a device of its own: DataFusion's engine keeps it for its operators
            let gpu = g.gpu().map_err(bench_error)?;
            datafusion::suite(gpu, sizes, reps, args.data_dir.as_deref(), bar, emit)
        };
    #[cfg(not(feature = "sql"))]
    let mut tables =
        |_: &[u32],
         _: usize,
         _: &indicatif::ProgressBar,
         _: &mut dyn FnMut(Vec<gpusort_bench::Case>) -> gpusort_bench::Result| {
            Err(gpusort_bench::Error::usage(
            "the datafusion suite needs DataFusion: this gpusort was built without the `sql` feature (--features sql)",
        ))
        };
    gpusort_bench::run(&gpu, &group, &mut tables, &opts)?;
    Ok(())
}

/// The measuring knobs `GPUSORT_BENCH_*` (bench/*.sh), read by `--features measure` builds only.
fn knobs() -> gpusort_bench::Knobs {
    use crate::measure::bench_knob;
    gpusort_bench::Knobs {
        radix_bits: bench_knob("RADIX_BITS").and_then(|v| crate::sort::parse_key_bits(&v).ok()),
        key_mask: bench_knob("KEY_MASK"),
        sorts: bench_knob("SORTS"),
        compact_pivot: bench_knob("COMPACT_PIVOT"),
        chain: bench_knob("CHAIN"),
    }
}

/// A CLI error where the bench library's callbacks return theirs.
fn bench_error(e: CliError) -> gpusort_bench::Error {
    gpusort_bench::Error {
        message: e.message,
        code: e.code,
    }
}
