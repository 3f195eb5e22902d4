//! `gpusort`: a thin binary over gpusort-core. Parses flags, reads and writes files, shows
//! progress and reports errors; every piece of GPU work goes through the library.

mod bench;
mod error;
mod files;
mod info;
mod progress;
mod scan;
mod sort;
mod stencil;

use std::process::ExitCode;

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

fn init_logging(g: &Global) {
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

fn main() -> ExitCode {
    // Mesa's Vulkan drivers print an error per instance when XDG_RUNTIME_DIR is unset (headless
    // servers, containers); compute needs no display, so point it somewhere harmless. Done first,
    // before any thread exists.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = e.print(); // --help, --version
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // one line, like every other error; `--help` has the details
            let text = e.render().to_string();
            let first = text
                .lines()
                .take_while(|l| !l.trim().is_empty() && !l.starts_with("Usage:"))
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ");
            let first = first.trim_start_matches("error: ");
            eprintln!("gpusort: {first} (see gpusort --help)");
            return ExitCode::from(2);
        }
    };
    init_logging(&cli.global);
    // A file-size limit (ulimit -f) or similar must surface as a write error we can clean up
    // after, not as SIGXFSZ killing the process with a temporary file left behind.
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_IGN at startup, before any other thread runs.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    // Ctrl-C / SIGTERM: remove temporary outputs; inputs are never written, so they stay intact.
    let _ = ctrlc::set_handler(|| {
        files::remove_pending();
        eprintln!("gpusort: interrupted; no output was written");
        std::process::exit(130);
    });
    let result = match &cli.command {
        Command::Info(a) => info::run(&cli.global, a),
        Command::Sort(a) => sort::run(&cli.global, a),
        Command::Scan(a) => scan::run_scan(&cli.global, a),
        Command::Partition(a) => scan::run_partition(&cli.global, a),
        Command::Compact(a) => scan::run_compact(&cli.global, a),
        Command::Stencil(a) => stencil::run(&cli.global, a),
        Command::Bench(a) => bench::run(&cli.global, a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpusort: {}", e.message);
            ExitCode::from(e.code as u8)
        }
    }
}
