//! The `gpusort` command line as a library: flags (clap), file formats, commands, errors. The
//! binary (main.rs) only parses, installs signal handling and reports; the fuzz targets and
//! tests reach the parsers through here. Every piece of GPU work goes through gpusort-core.

pub mod bench;
pub mod error;
pub mod fuzzing;
pub mod info;
pub mod many;
mod measure;
pub mod progress;
pub mod scan;
pub mod sort;
pub mod stencil;
pub mod table;
pub mod tune;
pub mod tuning;

use clap::{Parser, Subcommand, ValueEnum};
use gpusort_core::GpuOptions;

use crate::error::CliError;

/// Call `$f::<T>(args)` with `T` the Rust type of a `KeyType`, for the types listed (others are
/// a usage error).
#[macro_export]
macro_rules! for_dtype {
    ($dtype:expr, $f:ident $args:tt; $($t:ident),+) => {{
        let dtype = $dtype;
        // a closure, so that the `return` leaves the macro and not the function it is used in
        (|| {
            $( if dtype == <$t as gpusort_core::SortKey>::TYPE { return $f::<$t> $args; } )+
            Err($crate::error::CliError::usage(format!("{} is not supported by this command", dtype)))
        })()
    }};
}

/// The outcome lines of a command ("sorted … -> out.bin", its time split): queued with
/// [`outcome!`] and printed once every output is in place, so a job that fails in its final step
/// (an input that changed, a full disk, a closed pipe) prints its failure alone.
pub static OUTCOME: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Queue an outcome line (as `eprintln!` formats it) for after the final step.
#[macro_export]
macro_rules! outcome {
    ($($arg:tt)*) => {
        $crate::OUTCOME
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!($($arg)*))
    };
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
    about = "Sort, scan, partition and stencil binary files and .npy arrays on the GPU (wgpu: Vulkan, Metal, DX12)",
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Where jobs run: auto (a hardware GPU if there is one, else the CPU engine), cpu, gpu
    /// (any GPU adapter, software ones too), or one graphics backend.
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
    /// Several GPUs for one job: all, a count (2), or a list of adapter indices or name
    /// substrings (0,1; an adapter named twice gives two devices on it). One device by default.
    #[arg(long, global = true, value_name = "all|N|LIST")]
    pub devices: Option<String>,
    /// Spread every sort over --devices, also where one device would sort it whole faster
    /// (tests and measurements: the results are the same).
    #[arg(long, global = true, hide = true)]
    pub spread_always: bool,
    /// Kernel shapes from a JSON file instead of the stored tuning, for experiments: the
    /// defaults with the fields it names, e.g. {"sort": {"items": 10}} (`gpusort tune` stores
    /// measured ones; the fields are gpusort-core's `SortTuning`, `ScanTuning` and `StencilTuning`).
    #[arg(long, global = true, value_name = "FILE")]
    pub tuning: Option<std::path::PathBuf>,
    /// Force every kernel onto its non-subgroup path.
    #[arg(long, global = true, env = "GPUSORT_NO_SUBGROUPS", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_subgroups: bool,
    /// More log output (-v info, -vv debug); RUST_LOG also works.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors: no progress, no notes, no outcome line.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// After the outcome line, where the time went (also with -v).
    #[arg(long, global = true)]
    pub timings: bool,
    /// Progress bars: on a terminal (auto), always, or never.
    #[arg(long, global = true, value_enum, default_value = "auto")]
    pub progress: progress::When,
    /// Do not flush outputs to disk before renaming them into place (scratch results): still
    /// written whole to a temporary file and renamed, never half-written under the final name,
    /// but a crash of the machine may lose them. The flush costs 0.5-0.9 s a GiB on some disks.
    #[arg(long, global = true)]
    pub no_sync: bool,
    /// Replace outputs that are read-only, and write through outputs that have other hard
    /// links (every name then sees the result) instead of refusing them.
    #[arg(long, global = true)]
    pub force: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Backend {
    Auto,
    Cpu,
    Gpu,
    Vulkan,
    Metal,
    Dx12,
    Gl,
}

impl Global {
    /// Whether to print the time split after the outcome line.
    pub fn show_timings(&self) -> bool {
        !self.quiet && (self.timings || self.verbose > 0)
    }

    pub fn gpu_options(&self) -> GpuOptions {
        let mut o = self.gpu_options_base();
        o.adapter = self.adapter.clone().or_else(|| self.one_device());
        o
    }

    fn gpu_options_base(&self) -> GpuOptions {
        let backend = match self.backend {
            Backend::Auto | Backend::Cpu | Backend::Gpu => None,
            Backend::Vulkan => Some("vulkan"),
            Backend::Metal => Some("metal"),
            Backend::Dx12 => Some("dx12"),
            Backend::Gl => Some("gl"),
        };
        GpuOptions {
            backend: backend.map(String::from),
            adapter: self.adapter.clone(),
            no_subgroups: self.no_subgroups,
            // measuring: the composed kernels as compiled, for the shader_stats example
            dump_wgsl: std::env::var_os("GPUSORT_DUMP_WGSL").map(Into::into),
            // beside the stored tuning: a second run does not compile its shaders again
            pipeline_cache: tuning::file().and_then(|f| f.parent().map(|d| d.join("pipelines"))),
            no_host_import: false,
        }
    }

    /// Where this command's jobs run: the CPU engine with `--backend cpu`, and with `auto` when
    /// there is no adapter or only software ones (lavapipe, WARP) and no `--adapter` was named;
    /// the GPU otherwise (`--backend gpu` or a named backend runs on a software adapter too,
    /// which is how the tests exercise the kernels).
    pub fn engine(&self) -> Result<Engine, CliError> {
        // one decision per process: many-file jobs ask once a file
        static DECIDED: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
        if let Some(e) = DECIDED.get() {
            return Ok(*e);
        }
        let e = self.decide_engine()?;
        Ok(*DECIDED.get_or_init(|| e))
    }

    fn decide_engine(&self) -> Result<Engine, CliError> {
        use gpusort_core::engine::{choose, Backend as Asked, Choice, CpuReason};
        let asked = match self.backend {
            Backend::Auto => Asked::Auto,
            Backend::Cpu => Asked::Cpu,
            _ => Asked::Gpu,
        };
        let named = self.adapter.is_some() || self.names_devices();
        Ok(match choose(asked, named, &self.gpu_options())? {
            Choice::Gpu => Engine::Gpu,
            Choice::Cpu {
                why: CpuReason::SoftwareOnly,
            } => Engine::Cpu {
                why: "no hardware GPU; --backend gpu uses the software adapter",
            },
            Choice::Cpu { why } => Engine::Cpu { why: why.words() },
        })
    }

    /// With `--devices`: the adapter selectors it names, one a device (resolved once).
    pub fn device_selectors(&self) -> Result<Option<Vec<String>>, CliError> {
        static RESOLVED: std::sync::OnceLock<Option<Vec<String>>> = std::sync::OnceLock::new();
        if let Some(r) = RESOLVED.get() {
            return Ok(r.clone());
        }
        let Some(spec) = &self.devices else {
            return Ok(None);
        };
        if self.adapter.is_some() {
            return Err(CliError::usage(
                "--adapter and --devices both choose devices: give one of them",
            ));
        }
        let spec = gpusort_core::multi::DeviceSpec::parse(spec).map_err(as_flag)?;
        let options = GpuOptions {
            adapter: None,
            ..self.gpu_options_base()
        };
        let selectors = spec.selectors(&options).map_err(as_flag)?;
        Ok(RESOLVED.get_or_init(|| Some(selectors)).clone())
    }

    /// Whether `--devices` names adapters itself (a list): then, as with `--adapter`, the job
    /// runs on them even where they are software ones.
    fn names_devices(&self) -> bool {
        self.devices
            .as_deref()
            .and_then(|s| gpusort_core::multi::DeviceSpec::parse(s).ok())
            .is_some_and(|s| matches!(s, gpusort_core::multi::DeviceSpec::List(_)))
    }

    /// `--devices` that resolves to one device: that adapter.
    fn one_device(&self) -> Option<String> {
        match self.device_selectors() {
            Ok(Some(s)) if s.len() == 1 => s.into_iter().next(),
            _ => None,
        }
    }

    /// Whether this job runs on several devices (`--devices` naming more than one, on the GPU).
    pub fn several_devices(&self) -> Result<bool, CliError> {
        Ok(matches!(self.engine()?, Engine::Gpu)
            && self.device_selectors()?.is_some_and(|s| s.len() > 1))
    }

    /// Every device `--devices` names (one, the usual, without it).
    pub fn group(&self) -> Result<gpusort_core::multi::DeviceGroup, CliError> {
        match self.device_selectors()? {
            Some(s) if s.len() > 1 => Ok(gpusort_core::multi::DeviceGroup::open(
                &self.gpu_options(),
                &gpusort_core::multi::DeviceSpec::List(s),
            )
            .map_err(as_flag)?),
            _ => Ok(gpusort_core::multi::DeviceGroup::from_gpus(vec![
                self.gpu()?
            ])?),
        }
    }

    /// The GPU context; says on stderr when `auto` had to fall back to OpenGL.
    pub fn gpu(&self) -> Result<gpusort_core::Gpu, CliError> {
        let gpu = gpusort_core::Gpu::new(&self.gpu_options()).map_err(as_flag)?;
        if let Some(note) = fallback_note(&gpu.adapter.backend, &gpu.adapter.name, self.backend) {
            if !self.quiet {
                eprintln!("gpusort: note: {note}");
            }
        }
        Ok(gpu)
    }
}

/// A library error about a setting, named as the flag that sets it: the library says
/// "devices '0': …" and "adapter \"x\": …", the CLI's user typed `--devices` and `--adapter`.
fn as_flag(e: gpusort_core::Error) -> CliError {
    let mut err = CliError::from(e);
    for word in ["devices", "adapter"] {
        if err.message.starts_with(&format!("invalid input: {word} ")) {
            err.message = err.message.replacen("invalid input: ", "--", 1);
        }
    }
    err
}

/// Where a command's jobs run (see [`Global::engine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// `gpusort_core::cpu_engine` on all cores; `why` for the outcome line.
    Cpu {
        why: &'static str,
    },
    Gpu,
}

impl Engine {
    /// How outcome lines name the CPU engine: "the CPU engine (N threads; why)".
    pub fn cpu_words(why: &str) -> String {
        format!(
            "the CPU engine ({} threads; {why})",
            rayon::current_num_threads()
        )
    }
}

/// What to tell a user whose job runs on OpenGL although they did not ask for it: GL is the
/// last resort (`auto` takes it only when no Vulkan, Metal or DX12 adapter exists) and far
/// slower for compute.
pub fn fallback_note(backend: &str, adapter: &str, asked: Backend) -> Option<String> {
    (backend.eq_ignore_ascii_case("gl") && !matches!(asked, Backend::Gl)).then(|| {
        format!(
            "no Vulkan, Metal or DX12 adapter was found, so this runs on {adapter} through OpenGL, \
             which is far slower; install your GPU's Vulkan driver (or Mesa's mesa-vulkan-drivers \
             for a software one), or pass --backend gl to choose OpenGL"
        )
    })
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
    /// Run a SQL query over Parquet, Arrow and CSV tables (DataFusion, with sorts on the GPU).
    Sql(table::SqlArgs),
    /// Jacobi steps of a stencil over a 2-D or 3-D grid, streamed when it does not fit the GPU.
    Stencil(stencil::StencilArgs),
    /// Benchmark gpusort against baselines measured in the same run.
    Bench(bench::BenchArgs),
    /// Measure the fastest kernel configurations on this GPU and keep them for later runs.
    Tune(tune::TuneArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish) to stdout.
    Completions(CompletionsArgs),
    /// Print the man page (roff) to stdout: `gpusort man > gpusort.1`.
    Man,
}

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `gpusort completions SHELL` and `gpusort man`: generated from the clap definitions.
fn generate_help_files(command: &Command) -> Result<(), CliError> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    match command {
        Command::Completions(a) => {
            clap_complete::generate(a.shell, &mut cmd, "gpusort", &mut out);
            Ok(())
        }
        _ => clap_mangen::Man::new(cmd)
            .render(&mut out)
            .map_err(|e| CliError::runtime(format!("cannot write the man page: {e}"))),
    }
}

/// `gpusort SUBCOMMAND` when the command line names one, else `gpusort`: where an error's reader
/// finds help.
pub fn help_command() -> String {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    std::env::args()
        .skip(1)
        .find(|a| names.contains(a))
        .map_or_else(|| "gpusort".to_string(), |s| format!("gpusort {s}"))
}

/// Colour only on a terminal, and never with NO_COLOR set (no-color.org).
pub fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
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
        .with_ansi(colour_on_stderr())
        .with_target(false)
        .init();
}

/// Run one parsed command, then its final step: every output of the job is put in place
/// together, or, when the command failed, none is (files/job.rs).
pub fn run(cli: &Cli) -> Result<(), CliError> {
    tuning::use_file(cli.global.tuning.as_deref())?;
    gpusort_files::set_durable(!cli.global.no_sync);
    gpusort_files::set_force(cli.global.force);
    // a bad --devices is a usage error even where the job would run on the CPU engine
    if let Some(spec) = &cli.global.devices {
        gpusort_core::multi::DeviceSpec::parse(spec).map_err(as_flag)?;
        if cli.global.adapter.is_some() {
            return Err(CliError::usage(
                "--adapter and --devices both choose devices: give one of them",
            ));
        }
        if matches!(cli.global.backend, Backend::Cpu) {
            return Err(CliError::usage(
                "--devices chooses GPUs, and --backend cpu runs on the CPU engine: give one of them",
            ));
        }
    }
    let result = match &cli.command {
        Command::Info(a) => info::run(&cli.global, a),
        Command::Sort(a) => sort::run(&cli.global, a),
        Command::Scan(a) => scan::run_scan(&cli.global, a),
        Command::Partition(a) => scan::run_partition(&cli.global, a),
        Command::Compact(a) => scan::run_compact(&cli.global, a),
        Command::Sql(a) => table::sql(&cli.global, a),
        Command::Stencil(a) => stencil::run(&cli.global, a),
        Command::Bench(a) => bench::run(&cli.global, a),
        Command::Tune(a) => tune::run(&cli.global, a),
        c @ (Command::Completions(_) | Command::Man) => generate_help_files(c),
    };
    match result {
        Ok(()) => {
            let done = gpusort_files::finish().inspect_err(|_| {
                OUTCOME.lock().unwrap_or_else(|p| p.into_inner()).clear();
            })?;
            for line in std::mem::take(&mut *OUTCOME.lock().unwrap_or_else(|p| p.into_inner())) {
                eprintln!("{line}");
            }
            if let Some(s) = done.flush_wait_s.filter(|_| cli.global.show_timings()) {
                eprintln!("time: final flush {s:.3} s");
            }
            Ok(())
        }
        Err(mut e) => {
            gpusort_files::abandon();
            if e.code == 1 && !e.message.contains("written") {
                e.message.push_str("; no output was written");
            }
            Err(e)
        }
    }
}

/// A number given for elements of type `T` (`--pivot`, `--below`, `--at-least`, `--cval`):
/// refused unless `T` holds it — integers in range, floats that stay finite and nonzero when
/// rounded to `T` (an explicit `inf` or `-inf` is exact and accepted; NaN is left to the caller).
pub fn parse_value<T: gpusort_core::SortKey + std::str::FromStr>(
    flag: &str,
    s: &str,
) -> Result<T, CliError> {
    use gpusort_core::KeyType;
    let t = s.trim();
    let range = match T::TYPE {
        KeyType::U32 => format!("0 to {}", u32::MAX),
        KeyType::I32 => format!("{} to {}", i32::MIN, i32::MAX),
        KeyType::U64 => format!("0 to {}", u64::MAX),
        KeyType::I64 => format!("{} to {}", i64::MIN, i64::MAX),
        KeyType::F32 => format!(
            "finite values up to ±{:e}, the smallest nonzero ±{:e}, or ±inf",
            f32::MAX,
            f32::from_bits(1)
        ),
        KeyType::F64 => format!(
            "finite values up to ±{:e}, the smallest nonzero ±{:e}, or ±inf",
            f64::MAX,
            f64::from_bits(1)
        ),
    };
    let refuse = || CliError::usage(format!("{flag} {s} is not a valid {} ({range})", T::TYPE));
    let v: T = t.parse().map_err(|_| refuse())?;
    if matches!(T::TYPE, KeyType::F32 | KeyType::F64) {
        let x = match T::TYPE {
            KeyType::F32 => t.parse::<f32>().map(f64::from),
            _ => t.parse::<f64>(),
        }
        .map_err(|_| refuse())?;
        let word = t.trim_start_matches(['+', '-']).to_ascii_lowercase();
        let said_inf = word == "inf" || word == "infinity";
        let mantissa = word.split('e').next().unwrap_or("");
        let said_nonzero = mantissa.chars().any(|c| ('1'..='9').contains(&c));
        if (x.is_infinite() && !said_inf) || (x == 0.0 && said_nonzero) {
            return Err(refuse());
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fall_back_to_opengl_is_said_unless_asked_for() {
        let note = fallback_note("Gl", "llvmpipe (LLVM 19.1.7, 256 bits)", Backend::Auto).unwrap();
        assert!(
            note.contains("llvmpipe") && note.contains("mesa-vulkan-drivers"),
            "{note}"
        );
        assert!(fallback_note("Gl", "llvmpipe", Backend::Gl).is_none());
        assert!(fallback_note("Vulkan", "llvmpipe", Backend::Auto).is_none());
    }

    #[test]
    fn values_a_dtype_cannot_hold_are_refused() {
        let refused =
            |r: Result<f32, CliError>| r.is_err_and(|e| e.code == 2 && e.message.contains("f32"));
        assert!(refused(parse_value::<f32>("--pivot", "1e39")));
        assert!(refused(parse_value::<f32>("--pivot", "-1e40")));
        assert!(refused(parse_value::<f32>("--pivot", "1e-50")));
        assert!(parse_value::<f64>("--cval", "1e400").is_err());
        assert!(parse_value::<f64>("--cval", "-1e-400").is_err());
        assert_eq!(parse_value::<f32>("--pivot", "inf").unwrap(), f32::INFINITY);
        assert_eq!(
            parse_value::<f32>("--pivot", "-inf").unwrap(),
            f32::NEG_INFINITY
        );
        assert_eq!(parse_value::<f32>("--pivot", "0").unwrap(), 0.0);
        assert_eq!(
            parse_value::<f32>("--pivot", "-0.0e5").unwrap().to_bits(),
            (-0.0f32).to_bits()
        );
        assert_eq!(parse_value::<f32>("--pivot", "0.1").unwrap(), 0.1f32);
        assert_eq!(
            parse_value::<f32>("--pivot", "3.4028235e38").unwrap(),
            f32::MAX
        );
        assert_eq!(parse_value::<f64>("--pivot", "1e39").unwrap(), 1e39);
        assert!(parse_value::<u32>("--pivot", "-1").is_err());
        assert!(parse_value::<u32>("--pivot", "4294967296").is_err());
        assert!(parse_value::<i32>("--pivot", "1.5").is_err());
        assert_eq!(
            parse_value::<i64>("--pivot", "-9223372036854775808").unwrap(),
            i64::MIN
        );
    }
}
