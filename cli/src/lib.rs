//! The `gpusort` command line as a library: flags (clap), file formats, commands, errors. The
//! binary (main.rs) only parses, installs signal handling and reports; the fuzz targets and
//! tests reach the parsers through here. Every piece of GPU work goes through gpusort-core.

pub mod bench;
pub mod error;
pub mod files;
pub mod fuzzing;
pub mod info;
pub mod many;
pub mod progress;
pub mod scan;
pub mod sort;
pub mod stencil;

use clap::{Parser, Subcommand, ValueEnum};
use gpusort_core::GpuOptions;

use crate::error::CliError;

/// Call `$f::<T>(args)` with `T` the Rust type of a `KeyType`, for the types listed (others are
/// a usage error).
#[macro_export]
macro_rules! for_dtype {
    ($dtype:expr, $f:ident $args:tt; $($t:ident),+) => {{
        let dtype = $dtype;
        $( if dtype == <$t as gpusort_core::SortKey>::TYPE { return $f::<$t> $args; } )+
        Err($crate::error::CliError::usage(format!("{} is not supported by this command", dtype)))
    }};
}

/// A size given to `flag`: `1048576`, `512K`, `512M`, `8G`, `8GiB`, `1T` (binary multiples).
pub fn parse_bytes(flag: &str, s: &str) -> Result<u64, CliError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => u32::MAX,
    };
    match num.parse::<u64>() {
        Ok(n) if n > 0 && shift != u32::MAX => n.checked_mul(1u64 << shift).ok_or(()),
        _ => Err(()),
    }
    .map_err(|_| {
        CliError::usage(format!(
            "{flag} '{s}' is not a positive size (examples: 536870912, 512M, 8G)"
        ))
    })
}

#[derive(Parser, Debug)]
#[command(
    name = "gpusort",
    version,
    about = "Sort binary files and .npy arrays on the GPU (wgpu: Vulkan, Metal, DX12)"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Args, Debug, Clone)]
pub struct Global {
    /// Graphics backend to use.
    #[arg(
        long,
        global = true,
        env = "GPUSORT_BACKEND",
        value_enum,
        default_value = "auto"
    )]
    pub backend: Backend,
    /// Adapter to use: a substring of its name, or its index in `gpusort info`.
    #[arg(long, global = true, env = "GPUSORT_ADAPTER")]
    pub adapter: Option<String>,
    /// Force every kernel onto its non-subgroup path.
    #[arg(long, global = true, env = "GPUSORT_NO_SUBGROUPS", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_subgroups: bool,
    /// More log output (-v info, -vv debug); RUST_LOG also works.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors: no progress, no notes.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Progress bars: on a terminal (auto), always, or never.
    #[arg(long, global = true, value_enum, default_value = "auto")]
    pub progress: progress::When,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Backend {
    Auto,
    Vulkan,
    Metal,
    Dx12,
    Gl,
}

impl Global {
    pub fn gpu_options(&self) -> GpuOptions {
        let backend = match self.backend {
            Backend::Auto => None,
            Backend::Vulkan => Some("vulkan"),
            Backend::Metal => Some("metal"),
            Backend::Dx12 => Some("dx12"),
            Backend::Gl => Some("gl"),
        };
        GpuOptions {
            backend: backend.map(String::from),
            adapter: self.adapter.clone(),
            no_subgroups: self.no_subgroups,
        }
    }

    pub fn gpu(&self) -> Result<gpusort_core::Gpu, CliError> {
        Ok(gpusort_core::Gpu::new(&self.gpu_options())?)
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List adapters, the one gpusort picks, and the limits that matter.
    Info(info::InfoArgs),
    /// Sort a raw binary or .npy file.
    Sort(sort::SortArgs),
    /// Prefix sums (and max/min/and/or/xor scans) of a file.
    Scan(scan::ScanArgs),
    /// Stable partition around a pivot; prints the split index.
    Partition(scan::PartitionArgs),
    /// Keep the elements matching a predicate, in order; prints how many.
    Compact(scan::CompactArgs),
    /// Jacobi steps of a stencil over a 2-D or 3-D grid, streamed when it does not fit the GPU.
    Stencil(stencil::StencilArgs),
    /// Benchmark gpusort against baselines measured in the same run.
    Bench(bench::BenchArgs),
}

/// Logging to stderr at the level -v/-q ask for (RUST_LOG overrides).
pub fn init_logging(g: &Global) {
    let default = match (g.quiet, g.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "{default},wgpu_hal=error,wgpu_core=error,naga=error"
        ))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

/// Run one parsed command.
pub fn run(cli: &Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Info(a) => info::run(&cli.global, a),
        Command::Sort(a) => sort::run(&cli.global, a),
        Command::Scan(a) => scan::run_scan(&cli.global, a),
        Command::Partition(a) => scan::run_partition(&cli.global, a),
        Command::Compact(a) => scan::run_compact(&cli.global, a),
        Command::Stencil(a) => stencil::run(&cli.global, a),
        Command::Bench(a) => bench::run(&cli.global, a),
    }
}
