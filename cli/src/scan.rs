//! `gpusort scan`, `gpusort partition` and `gpusort compact`: same formats, errors, crash-safe
//! output and progress as `gpusort sort` (the file and output handling is shared, in files.rs).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use clap::ValueEnum;
use gpusort_core::reference::check::{self, ScanCheck};
use gpusort_core::scan::scan64::Scanner64;
use gpusort_core::scan::streamed::{ScanStream, SplitDrain, SplitStream};
use gpusort_core::scan::{Predicate, ScanOp, Scanner};
use gpusort_core::schedule::Test;
use gpusort_core::{Error as CoreError, Gpu, KeyType, SortKey};

use crate::error::{CliError, CliResult};
use crate::sort::Dtype;
use crate::{for_dtype, many, progress, Engine, Global};
use gpusort_files::{
    check_distinct, check_output_path, is_std, open_values, output_format, resolve_output, shown,
    Carver, Format, Input, Landed, Named, Output, Prefault, Sink, Written,
};

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Op {
    Add,
    Max,
    Min,
    And,
    Or,
    Xor,
}

impl From<Op> for ScanOp {
    fn from(o: Op) -> ScanOp {
        match o {
            Op::Add => ScanOp::Add,
            Op::Max => ScanOp::Max,
            Op::Min => ScanOp::Min,
            Op::And => ScanOp::And,
            Op::Or => ScanOp::Or,
            Op::Xor => ScanOp::Xor,
        }
    }
}

/// Input, output and checking flags the three commands share.
#[derive(clap::Args, Debug)]
pub struct Io {
    /// Inputs: raw little-endian binary (needs --dtype) or .npy (1-D, C order). Several inputs
    /// run as one job and need --out-dir.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Output file (the input's format). Default: INPUT's name with a suffix before the extension.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Write each result to DIR under its input's file name.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Element type of a raw input; for .npy it must match the header if given.
    #[arg(long, value_enum)]
    pub dtype: Option<Dtype>,
    /// Check the result against the CPU before writing it.
    #[arg(long)]
    pub verify: bool,
}

#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    #[command(flatten)]
    pub io: Io,
    /// Exclusive scan (element i gets the elements before it); inclusive by default.
    #[arg(long)]
    pub exclusive: bool,
    /// The operator: add, max, min, and, or, xor for integers; add for floats.
    #[arg(long, value_enum, default_value = "add")]
    pub op: Op,
}

#[derive(clap::Args, Debug)]
pub struct PartitionArgs {
    #[command(flatten)]
    pub io: Io,
    /// Elements before P in the sort order go first, the rest after; both keep their order.
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    pub pivot: String,
    /// A u32 payload (4-byte elements) to move with the elements.
    #[arg(long, requires = "values_out")]
    pub values: Option<PathBuf>,
    /// Where the payload goes, moved or kept with the elements (u32; .npy if the name ends in .npy).
    #[arg(long, requires = "values")]
    pub values_out: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("predicate").required(true).args(["below", "at_least", "nonzero"])))]
pub struct CompactArgs {
    #[command(flatten)]
    pub io: Io,
    /// Keep elements before P in the sort order.
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    pub below: Option<String>,
    /// Keep elements not before P.
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    pub at_least: Option<String>,
    /// Keep numerically nonzero elements (±0.0 are zero, NaN is not).
    #[arg(long)]
    pub nonzero: bool,
    /// A u32 payload (4-byte elements) to keep along with the elements.
    #[arg(long, requires = "values_out")]
    pub values: Option<PathBuf>,
    /// Where the payload goes, moved or kept with the elements (u32; .npy if the name ends in .npy).
    #[arg(long, requires = "values")]
    pub values_out: Option<PathBuf>,
}

fn parse_pivot<T: SortKey + FromStr>(flag: &str, s: &str) -> Result<T, CliError> {
    crate::parse_value::<T>(flag, s)
}

struct Prepared {
    input: Input,
    dest: PathBuf,
    /// The result's format (output.rs: a name given with -o decides).
    format: Format,
    values: Option<Input>,
}

fn prepare(
    io: &Io,
    suffix: &str,
    values: Option<&Path>,
    values_out: Option<&Path>,
) -> Result<Prepared, CliError> {
    let path = &io.inputs[0];
    let input = Input::open(path, io.dtype.map(Into::into))?;
    let dest = resolve_output(&input, io.output.as_deref(), false, suffix)?;
    let values = values.map(|p| open_values(p, &input)).transpose()?;
    if let Some(p) = values_out {
        check_output_path(p)?;
    }
    let mut inputs = vec![Named {
        flag: "",
        path: &input.path,
    }];
    if let Some(v) = &values {
        inputs.push(Named {
            flag: "--values",
            path: &v.path,
        });
    }
    let mut outputs = vec![Written {
        flag: "-o",
        path: &dest,
        replaces: None,
    }];
    if let Some(p) = values_out {
        outputs.push(Written {
            flag: "--values-out",
            path: p,
            replaces: None,
        });
    }
    check_distinct(&inputs, &outputs)?;
    let format = output_format(&input, io.output.as_deref());
    Ok(Prepared {
        input,
        dest,
        format,
        values,
    })
}

/// Where a command's scans and splits run: the GPU with its scan kernels, started once per
/// command, or the CPU engine.
#[allow(clippy::large_enum_variant)] // one a command
enum Device {
    Gpu {
        gpu: Gpu,
        scanner: Scanner,
    },
    /// `--devices` naming several: one part of each file a device (single-file jobs).
    Group {
        group: gpusort_core::multi::DeviceGroup,
        scanners: Vec<Scanner>,
    },
    Cpu {
        why: &'static str,
    },
}

impl Device {
    /// The command's devices; `several` where the job can spread over `--devices` (many-file
    /// scans and splits run on the first of them).
    fn start(g: &Global, several: bool) -> Result<Device, CliError> {
        Ok(match g.engine()? {
            Engine::Cpu { why } => Device::Cpu { why },
            Engine::Gpu if several && g.several_devices()? => {
                let group = g.group()?;
                let scanners = group
                    .gpus()
                    .iter()
                    .map(|gpu| crate::tuning::scanner(gpu))
                    .collect::<Result<Vec<_>, _>>()?;
                Device::Group { group, scanners }
            }
            Engine::Gpu => {
                let gpu = g.gpu()?;
                let scanner = crate::tuning::scanner(&gpu)?;
                Device::Gpu { gpu, scanner }
            }
        })
    }

    /// Keep it (and the job's input) until the process ends (gpusort_files::exit), pipeline caches
    /// saved.
    fn keep(self, job: Prepared) {
        match &self {
            Device::Gpu { gpu, .. } => gpu.save_pipeline_cache(),
            Device::Group { group, .. } => {
                group.gpus().iter().for_each(|g| g.save_pipeline_cache())
            }
            Device::Cpu { .. } => {}
        }
        gpusort_files::exit::keep((self, job));
    }

    /// A one-file job: the device started, `run` on it, the time split, then the device and the
    /// job's input kept.
    fn run_one(
        g: &Global,
        p: Prepared,
        job: &str,
        run: impl FnOnce(&Prepared, &Device) -> CliResult,
    ) -> CliResult {
        let t = Instant::now();
        let dev = Device::start(g, true)?;
        let start_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        run(&p, &dev)?;
        dev.time_split(g, start_s, job, t.elapsed().as_secs_f64());
        dev.keep(p);
        Ok(())
    }

    /// With -v or --timings, where a one-file job's time went: starting the device, then the
    /// job itself — chunks uploaded, computed, downloaded and written, overlapped — with its
    /// outputs' flush started (waited for in the final step, which reports it).
    fn time_split(&self, g: &Global, start_s: f64, job: &str, job_s: f64) {
        if !g.show_timings() {
            return;
        }
        let start = match self {
            Device::Gpu { .. } => format!("GPU start {start_s:.3} s, "),
            Device::Group { .. } => format!("GPUs' start {start_s:.3} s, "),
            Device::Cpu { .. } => String::new(),
        };
        let moved = match self {
            Device::Cpu { .. } => "",
            _ => "transfers and ",
        };
        crate::outcome!(
            "time: {start}{job}, {moved}{} {job_s:.3} s",
            gpusort_files::write_words()
        );
    }

    /// How outcome lines name it.
    fn words(&self) -> String {
        match self {
            Device::Gpu { gpu, .. } => gpu.adapter.name.clone(),
            Device::Group { group, .. } => group.describe(),
            Device::Cpu { why } => Engine::cpu_words(why),
        }
    }
}

/// The progress bar of a one-file job, in elements.
fn job_bar(g: &Global, what: &str, p: &Prepared, dev: &Device) -> indicatif::ProgressBar {
    let bar = progress::bar(g.progress, g.quiet, p.input.len as u64, "elements");
    bar.set_message(format!("{what} {} on {}", p.input.dtype, dev.words()));
    bar
}

fn check_op(op: Op, dtype: KeyType) -> CliResult {
    let supported = match dtype.is_wide() {
        true => gpusort_core::scan::scan64::supports(dtype, op.into()),
        false => ScanOp::from(op).code(dtype).is_some(),
    };
    if !supported {
        return Err(CliError::usage(format!(
            "a {} scan of {dtype} is not supported (integers: add, max, min, and, or, xor; floats: add)",
            op.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()
        )));
    }
    Ok(())
}

pub fn run_scan(g: &Global, a: &ScanArgs) -> CliResult {
    if many::is_many(&a.io.inputs, a.io.out_dir.as_deref()) {
        return scan_many(g, a);
    }
    let p = prepare(&a.io, "scan", None, None)?;
    check_op(a.op, p.input.dtype)?;
    Device::run_one(
        g,
        p,
        "scan",
        |p, dev| for_dtype!(p.input.dtype, scan_typed(g, a, p, dev, a.op.into()); u32, i32, f32, u64, i64, f64),
    )
}

/// `gpusort scan a b c --out-dir DIR`.
fn scan_many(g: &Global, a: &ScanArgs) -> CliResult {
    many::reject_single_file_flags(&[("-o/--output", a.io.output.is_some())])?;
    let files = many::open_all(
        &a.io.inputs,
        a.io.dtype.map(Into::into),
        a.io.out_dir.as_deref(),
        false,
        false,
        false,
    )?;
    for input in &files.inputs {
        check_op(a.op, input.dtype)?;
    }
    let start = Instant::now();
    let bar = progress::bar(g.progress, g.quiet, files.inputs.len() as u64, "files");
    if let Engine::Cpu { why } = g.engine()? {
        for (input, dest) in files.inputs.iter().zip(&files.dests) {
            let p = Prepared {
                input: Input::open(&input.path, Some(input.dtype))?,
                dest: dest.clone(),
                format: input.format,
                values: None,
            };
            let (op, inclusive, verify) = (a.op.into(), !a.exclusive, a.io.verify);
            for_dtype!(input.dtype, scan_on_cpu(&p, op, inclusive, verify); u32, i32, f32, u64, i64, f64)?;
            bar.inc(1);
        }
        bar.finish_and_clear();
        note(
            g,
            format!(
                "scanned {} files with {} in {:.3} s{}",
                files.inputs.len(),
                Engine::cpu_words(why),
                start.elapsed().as_secs_f64(),
                if a.io.verify { ", verified" } else { "" }
            ),
        );
        return Ok(());
    }
    // with --devices, the files scanned one by one are dealt out to the devices; the merged
    // launch of the small ones runs on the first
    let group = g.group()?;
    let gpu: &Gpu = group.first();
    let sched = gpusort_core::schedule::Scheduler::new(gpu)?;
    let lens: Vec<usize> = files.inputs.iter().map(|i| i.len).collect();
    let (small, large): (Vec<usize>, Vec<usize>) = (0..files.inputs.len())
        .partition(|&f| gpusort_core::schedule::scan_merges(files.inputs[f].dtype, lens[f]));
    many::run_merged(
        gpu,
        &sched,
        &files,
        &small,
        |_| 0,
        |_, input, offset| {
            let work = gpusort_core::schedule::Work::Scan {
                key_type: input.dtype,
                op: a.op.into(),
                inclusive: !a.exclusive,
            };
            vec![(work, offset, input.len as u32)]
        },
        |f, words| {
            let input = &files.inputs[f];
            if a.io.verify {
                let data: Vec<u32> = input.to_vec();
                check::scanned_words(input.dtype, &data, words, a.op.into(), !a.exclusive)?;
            }
            Output::write_all(
                &files.dests[f],
                input.format,
                input.dtype,
                bytemuck::cast_slice(words),
            )?;
            bar.inc(1);
            Ok(())
        },
    )?;
    if !large.is_empty() {
        let dealt = many::deal(&large, &lens, group.len());
        let scanners = group
            .gpus()
            .iter()
            .map(|gpu| {
                let scanner = crate::tuning::scanner(gpu)?;
                let scanner64 = scanner.scanner64(gpu);
                Ok((scanner, scanner64))
            })
            .collect::<CliResult<Vec<_>>>()?;
        many::on_devices(&dealt, |d, f| {
            let (gpu, (scanner, scanner64)): (&Gpu, _) = (&group.gpus()[d], &scanners[d]);
            let (input, dest) = (&files.inputs[f], &files.dests[f]);
            let hidden = indicatif::ProgressBar::hidden();
            let how = FileScan {
                op: a.op.into(),
                inclusive: !a.exclusive,
                verify: a.io.verify,
                bar: &hidden,
            };
            for_dtype!(input.dtype, scan_file(gpu, (scanner, scanner64), input, dest, input.format, &how); u32, i32, f32, u64, i64, f64)?;
            bar.inc(1);
            Ok(())
        })?;
    }
    bar.finish_and_clear();
    note(
        g,
        format!(
            "scanned {} files in {:.3} s: {} together in shared GPU launches, {} one by one{}",
            files.inputs.len(),
            start.elapsed().as_secs_f64(),
            small.len(),
            large.len(),
            if a.io.verify { " (verified)" } else { "" }
        ),
    );
    Ok(())
}

/// Elements per chunk of a streamed job of `len` elements: `GPUSORT_STREAM_CHUNK_BYTES` (for
/// tests and measurements; capped by the device's largest binding) or the library's choice for
/// a one-job process (`chunk_elements_one_shot`: a command makes its staging for this job).
fn chunk_elements(gpu: &Gpu, dtype: KeyType, len: usize) -> usize {
    use gpusort_core::scan::streamed;
    match std::env::var("GPUSORT_STREAM_CHUNK_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(bytes) => streamed::chunk_elements(gpu, dtype.size(), Some(bytes)),
        None => streamed::chunk_elements_one_shot(gpu, dtype.size(), len),
    }
}

/// What a scan of a file asks, whichever devices run it: the operator, inclusive or not,
/// whether `--verify` checks the results, and the bar that counts the elements written.
struct FileScan<'a> {
    op: ScanOp,
    inclusive: bool,
    verify: bool,
    bar: &'a indicatif::ProgressBar,
}

/// Scan one file in chunks (gpusort_core::scan::streamed): each chunk's results are checked
/// (--verify) and written while later chunks are on the GPU, so files of any size scan in
/// bounded GPU memory. Returns the number of elements.
fn scan_file<T: SortKey>(
    gpu: &Gpu,
    (scanner, scanner64): (&Scanner, &Scanner64),
    input: &Input,
    dest: &Path,
    format: Format,
    how: &FileScan<'_>,
) -> CliResult<usize> {
    let FileScan {
        op,
        inclusive,
        verify,
        bar,
    } = *how;
    let data = input.elements::<T>();
    let mut out = Output::create(dest)?;
    // through a map of the output whose pages come in while the first chunks are on the GPU
    // (positioned writes where it cannot be mapped), as sort_direct's
    let mut mapped = out.mapped(format, T::TYPE, data.len() as u64)?;
    std::thread::scope(|s| -> CliResult {
        if let Some(m) = &mapped {
            let pages = m.prefault();
            s.spawn(move || pages.run());
        }
        let w = match mapped {
            Some(_) => None,
            None => Some(out.positioned(format, T::TYPE, data.len() as u64)?),
        };
        let mut check = verify.then(|| ScanCheck::new::<T>(op, inclusive));
        let size = T::TYPE.size() as u64;
        if let Some(m) = mapped.as_mut().filter(|_| !T::TYPE.is_wide()) {
            // each chunk drained straight into its place in the output's map (aligned for T
            // after any .npy header), then checked and its writeback started on the writer thread
            let (elements, writeback) = m.elements_mut();
            if let Ok(out) = bytemuck::try_cast_slice_mut::<u8, T>(elements) {
                let landed = |at: usize, piece: &[T]| -> Result<(), CoreError> {
                    if let Some(c) = check.as_mut() {
                        c.check(&data[at..at + piece.len()], piece, at)?;
                    }
                    writeback.started(at as u64 * size, std::mem::size_of_val(piece));
                    bar.inc(piece.len() as u64);
                    Ok(())
                };
                let chunk = chunk_elements(gpu, T::TYPE, data.len());
                scanner.scan_into(
                    gpu,
                    &data,
                    out,
                    &ScanStream::new(op, inclusive, chunk),
                    landed,
                )?;
                return Ok(());
            }
        }
        let sink = |at: usize, piece: &[T]| -> Result<(), CoreError> {
            if let Some(c) = check.as_mut() {
                c.check(&data[at..at + piece.len()], piece, at)?;
            }
            let bytes: &[u8] = bytemuck::cast_slice(piece);
            match (mapped.as_mut(), &w) {
                (Some(m), _) => m.write_at(at as u64 * size, bytes),
                (None, Some(w)) => w
                    .write_at(at as u64 * size, bytes)
                    .map_err(|e| CoreError::Io(e.message))?,
                (None, None) => unreachable!("a map or a writer"),
            }
            bar.inc(piece.len() as u64);
            Ok(())
        };
        let job = ScanStream::new(op, inclusive, chunk_elements(gpu, T::TYPE, data.len()));
        if T::TYPE.is_wide() {
            scanner64.scan_streamed(gpu, &data, &job, sink)?;
        } else {
            scanner.scan_streamed(gpu, &data, &job, sink)?;
        }
        Ok(())
    })?;
    // unmapped by the process's end (gpusort_files::exit): its pages are already the file's
    if let Some(m) = mapped {
        gpusort_files::exit::keep(m.into_map());
    }
    out.commit()?;
    Ok(data.len())
}

/// A scan of one file over several devices (gpusort_core::multi::scan): one part a device,
/// each chunk written at its place as it lands. `--verify` keeps a copy of the results and
/// checks them in order at the end.
fn scan_file_group<T: SortKey>(
    group: &gpusort_core::multi::DeviceGroup,
    scanners: &[Scanner],
    p: &Prepared,
    how: &FileScan<'_>,
) -> CliResult<usize> {
    let FileScan {
        op,
        inclusive,
        verify,
        bar,
    } = *how;
    let data = p.input.elements::<T>();
    let mut out = Output::create(&p.dest)?;
    {
        let w = out.positioned(p.format, T::TYPE, data.len() as u64)?;
        let size = T::TYPE.size();
        let copy = std::sync::Mutex::new(if verify {
            vec![T::zeroed(); data.len()]
        } else {
            Vec::new()
        });
        let sink = |at: usize, piece: &[T]| -> Result<(), CoreError> {
            if verify {
                copy.lock().unwrap_or_else(|e| e.into_inner())[at..at + piece.len()]
                    .copy_from_slice(piece);
            }
            w.write_at((at * size) as u64, bytemuck::cast_slice(piece))
                .map_err(|e| CoreError::Io(e.message))?;
            bar.inc(piece.len() as u64);
            Ok(())
        };
        let chunk = chunk_elements(group.first(), T::TYPE, data.len());
        let job = ScanStream::new(op, inclusive, chunk);
        gpusort_core::multi::scan::scan_streamed(group, scanners, &data, &job, &sink)?;
        if verify {
            let got = copy.into_inner().unwrap_or_else(|e| e.into_inner());
            ScanCheck::new::<T>(op, inclusive).check(&data, &got, 0)?;
        }
    }
    out.commit()?;
    Ok(data.len())
}

fn scan_typed<T: SortKey>(
    g: &Global,
    a: &ScanArgs,
    p: &Prepared,
    dev: &Device,
    op: ScanOp,
) -> CliResult {
    let bar = job_bar(g, "scanning", p, dev);
    let t = Instant::now();
    let how = FileScan {
        op,
        inclusive: !a.exclusive,
        verify: a.io.verify,
        bar: &bar,
    };
    let n = match dev {
        Device::Gpu { gpu, scanner } => scan_file::<T>(
            gpu,
            (scanner, &scanner.scanner64(gpu)),
            &p.input,
            &p.dest,
            p.format,
            &how,
        )?,
        Device::Group { group, scanners } => scan_file_group::<T>(group, scanners, p, &how)?,
        Device::Cpu { .. } => scan_on_cpu::<T>(p, op, !a.exclusive, a.io.verify)?,
    };
    bar.finish_and_clear();
    note(
        g,
        format!(
            "scanned {n} {} elements with {} in {:.3} s -> {}{}",
            T::TYPE,
            dev.words(),
            t.elapsed().as_secs_f64(),
            shown(&p.dest),
            if a.io.verify { ", verified" } else { "" }
        ),
    );
    Ok(())
}

/// A scan on the CPU engine, straight into the output's memory map (files larger than RAM
/// go through the page cache). Returns the number of elements.
fn scan_on_cpu<T: SortKey>(
    p: &Prepared,
    op: ScanOp,
    inclusive: bool,
    verify: bool,
) -> CliResult<usize> {
    let data = p.input.elements::<T>();
    let mut out = Output::create(&p.dest)?;
    let mut map = out.map_array(p.format, T::TYPE, &[data.len()])?;
    if let Some(m) = map.as_mut() {
        let dst: &mut [T] = bytemuck::cast_slice_mut(&mut m[..]);
        gpusort_core::cpu_engine::scan(&data, dst, op, inclusive)?;
        if verify {
            ScanCheck::new::<T>(op, inclusive).check(&data, dst, 0)?;
        }
        m.flush()
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", shown(&p.dest))))?;
    }
    drop(map);
    out.commit()?;
    Ok(data.len())
}

/// A pivot's bits for a split of `dtype` elements (64-bit types: 0; they are checked by
/// parsing, and split one file at a time).
fn pivot_bits(flag: &str, s: &str, dtype: KeyType) -> Result<u32, CliError> {
    Ok(match dtype {
        KeyType::U32 => parse_pivot::<u32>(flag, s)?,
        KeyType::I32 => parse_pivot::<i32>(flag, s)? as u32,
        KeyType::F32 => parse_pivot::<f32>(flag, s)?.to_bits(),
        KeyType::U64 => parse_pivot::<u64>(flag, s).map(|_| 0)?,
        KeyType::I64 => parse_pivot::<i64>(flag, s).map(|_| 0)?,
        KeyType::F64 => parse_pivot::<f64>(flag, s).map(|_| 0)?,
    })
}

/// Partition (`keep_rest`) or compaction of many files. Every input is opened, every
/// destination checked and every pivot parsed first. Files of 32-bit elements up to
/// `schedule::MERGED_SCAN_MAX` are split together in merged launches; the others one
/// after another on the same GPU context (`single`). Prints "COUNT<TAB>INPUT" per file.
fn split_many(
    g: &Global,
    io: &Io,
    keep_rest: bool,
    test_for: impl Fn(KeyType) -> Result<Test, CliError>,
    mut single: impl FnMut(&Prepared, &Device) -> CliResult,
) -> CliResult {
    let files = many::open_all(
        &io.inputs,
        io.dtype.map(Into::into),
        io.out_dir.as_deref(),
        false,
        false,
        false,
    )?;
    let tests = files
        .inputs
        .iter()
        .map(|i| test_for(i.dtype))
        .collect::<Result<Vec<_>, _>>()?;
    let bar = progress::bar(g.progress, g.quiet, files.inputs.len() as u64, "files");
    let dev = Device::start(g, false)?;
    let Device::Gpu { gpu, .. } = &dev else {
        // the CPU engine takes each file in turn
        for (input, dest) in files.inputs.iter().zip(&files.dests) {
            let input = Input::open(&input.path, Some(input.dtype))?;
            let p = Prepared {
                format: input.format,
                input,
                dest: dest.clone(),
                values: None,
            };
            single(&p, &dev)?;
            bar.inc(1);
        }
        bar.finish_and_clear();
        return Ok(());
    };
    let sched = gpusort_core::schedule::Scheduler::new(gpu)?;
    let (small, large): (Vec<usize>, Vec<usize>) = (0..files.inputs.len()).partition(|&f| {
        let i = &files.inputs[f];
        gpusort_core::schedule::scan_merges(i.dtype, i.len)
    });
    many::run_merged(
        gpu,
        &sched,
        &files,
        &small,
        |i| i.len + 1,
        |f, input, offset| {
            let n = input.len as u32;
            let work = gpusort_core::schedule::Work::Split {
                key_type: input.dtype,
                test: tests[f],
                keep_rest,
                dst: offset + n,
                count_at: offset + 2 * n,
            };
            vec![(work, offset, n)]
        },
        |f, span| {
            let input = &files.inputs[f];
            let n = input.len;
            let count = span[2 * n] as usize;
            let out = &span[n..if keep_rest { 2 * n } else { n + count }];
            if io.verify {
                let (want, wcount) =
                    gpusort_core::schedule::split(input.dtype, &span[..n], tests[f], keep_rest);
                if want != out || wcount as usize != count {
                    return Err(CliError::runtime(format!(
                        "verification failed for {}: the result differs from the CPU's; it was not written",
                        input.path.display()
                    )));
                }
            }
            Output::write_all(
                &files.dests[f],
                input.format,
                input.dtype,
                bytemuck::cast_slice(out),
            )?;
            println!("{count}\t{}", input.path.display());
            bar.inc(1);
            Ok(())
        },
    )?;
    for f in large {
        let input = Input::open(&files.inputs[f].path, Some(files.inputs[f].dtype))?;
        let p = Prepared {
            format: input.format,
            input,
            dest: files.dests[f].clone(),
            values: None,
        };
        single(&p, &dev)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// A partition (`rest`) or compaction on the CPU engine, in memory. Returns (elements matched,
/// elements in all).
fn split_on_cpu<T: SortKey>(
    p: &Prepared,
    pred: Predicate<T>,
    rest: bool,
    values_out: Option<&Path>,
    verify: bool,
) -> CliResult<(usize, usize)> {
    let data = p.input.elements::<T>();
    let values = p.values.as_ref().map(|v| v.elements::<u32>());
    let (out, moved, kept) =
        gpusort_core::cpu_engine::split(&data, values.as_deref(), &pred, rest)?;
    if verify {
        check::split(
            &data,
            values.as_deref(),
            &pred,
            0..data.len(),
            check::SplitParts::of(&out, moved.as_deref(), kept, rest),
        )?;
    }
    Output::write_all(&p.dest, p.format, T::TYPE, bytemuck::cast_slice(&out))?;
    if let (Some(path), Some(m)) = (values_out, &moved) {
        Output::write_all(
            path,
            Format::for_output(path),
            KeyType::U32,
            bytemuck::cast_slice(m),
        )?;
    }
    Ok((kept, data.len()))
}

/// The split index or kept count on stdout: alone for one file, with the input's path for many;
/// on stderr when the result itself goes to standard output.
fn print_count(many: bool, count: usize, p: &Prepared) {
    if is_std(&p.dest) {
        eprintln!("{count}");
    } else if many {
        println!("{count}\t{}", p.input.path.display());
    } else {
        println!("{count}");
    }
}

fn note(g: &Global, s: String) {
    if !g.quiet {
        crate::outcome!("{s}");
    }
}

pub fn run_partition(g: &Global, a: &PartitionArgs) -> CliResult {
    if many::is_many(&a.io.inputs, a.io.out_dir.as_deref()) {
        many::reject_single_file_flags(&[
            ("-o/--output", a.io.output.is_some()),
            ("--values", a.values.is_some()),
        ])?;
        return split_many(
            g,
            &a.io,
            true,
            |dtype| Ok(Test::Below(pivot_bits("--pivot", &a.pivot, dtype)?)),
            |p, dev| for_dtype!(p.input.dtype, partition_typed(g, a, p, dev); u32, i32, f32, u64, i64, f64),
        );
    }
    let p = prepare(
        &a.io,
        "partitioned",
        a.values.as_deref(),
        a.values_out.as_deref(),
    )?;
    Device::run_one(
        g,
        p,
        "partition",
        |p, dev| for_dtype!(p.input.dtype, partition_typed(g, a, p, dev); u32, i32, f32, u64, i64, f64),
    )
}

/// Partition (`rest`) or compaction of one file, chunk by chunk (gpusort_core::scan::streamed): each
/// chunk's matching elements are checked (`verify`) and appended to the output while later
/// chunks are on the GPU; with `rest` the others go to a temporary file beside it (never
/// committed, removed when dropped), which follows them once every chunk is through. The .npy
/// headers are written last, with the count. Returns (elements matched, elements in all).
fn split_file<T: SortKey>(
    p: &Prepared,
    dev: &Device,
    pred: Predicate<T>,
    rest: bool,
    values_out: Option<&Path>,
    verify: bool,
    bar: &indicatif::ProgressBar,
) -> CliResult<(usize, usize)> {
    let (gpu, scanner) = match dev {
        Device::Gpu { gpu, scanner } => (gpu, scanner),
        Device::Group { group, scanners } => {
            return split_file_group(p, (group, scanners), pred, rest, values_out, verify, bar)
        }
        Device::Cpu { .. } => return split_on_cpu(p, pred, rest, values_out, verify),
    };
    let data = p.input.elements::<T>();
    let values = p.values.as_ref().map(|v| v.elements::<u32>());
    let n = data.len() as u64;
    let mut out = Output::create(&p.dest)?;
    let mut vals_out = match values_out {
        Some(path) => Some((Output::create(path)?, Format::for_output(path))),
        None => None,
    };
    // a partition's other elements wait beside their output (never committed, removed when
    // dropped) until the matching ones are all through
    let aside_for = |path: &Path| {
        if rest {
            Output::aside(path).map(Some)
        } else {
            Ok(None)
        }
    };
    let mut aside = aside_for(&p.dest)?;
    let mut vals_aside = match values_out {
        Some(path) => aside_for(path)?,
        None => None,
    };
    // the outputs mapped at their longest where that pays (Output::sink), their pages faulted
    // in while the first chunks are on the GPU (as scan_file's); Sink::finish cuts them to length
    let mut w = out.sink(p.format, T::TYPE, n, rest)?;
    let mut vw = match vals_out.as_mut() {
        Some((o, format)) => Some(o.sink(*format, KeyType::U32, n, rest)?),
        None => None,
    };
    let mut r = match aside.as_mut() {
        Some(o) => Some(o.sink(Format::Raw, T::TYPE, n, false)?),
        None => None,
    };
    let mut vr = match vals_aside.as_mut() {
        Some(o) => Some(o.sink(Format::Raw, KeyType::U32, n, false)?),
        None => None,
    };
    let pages: Vec<Prefault> = [Some(&w), vw.as_ref(), r.as_ref(), vr.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|s| s.prefault())
        .collect();
    let has_values = values.is_some();
    let matched = {
        // each chunk drained straight into its place in the mapped outputs (Sink::ends); the
        // others' elements are held and appended on the writer thread
        let (mut wc, mut ws) = ends(Some(&mut w));
        let (mut rc, mut rs) = ends(r.as_mut());
        let (mut vwc, mut vws) = ends(vw.as_mut());
        let (mut vrc, mut vrs) = ends(vr.as_mut());
        std::thread::scope(|s| -> CliResult<usize> {
            for p in pages {
                s.spawn(move || p.run());
            }
            let io = |e: gpusort_files::Error| CoreError::Io(e.message);
            let chunk = chunk_elements(gpu, T::TYPE, data.len());
            let drain = |c: SplitDrain<'_, T>| -> gpusort_files::Result<SplitLanded<'_, T>> {
                let (k, others) = (c.kept, c.len() - c.kept);
                Ok(SplitLanded {
                    range: c.range.clone(),
                    kept: Landed::drain(wc.as_mut(), k, |room| c.elements_into(0, room))?,
                    others: rest
                        .then(|| {
                            Landed::drain(rc.as_mut(), others, |room| c.elements_into(k, room))
                        })
                        .transpose()?,
                    values: has_values
                        .then(|| Landed::drain(vwc.as_mut(), k, |room| c.payload_into(0, room)))
                        .transpose()?,
                    values_others: (has_values && rest)
                        .then(|| {
                            Landed::drain(vrc.as_mut(), others, |room| c.payload_into(k, room))
                        })
                        .transpose()?,
                })
            };
            let landed = |d: gpusort_files::Result<SplitLanded<'_, T>>| -> Result<(), CoreError> {
                let d = d.map_err(io)?;
                if verify {
                    check::split(
                        &data,
                        values.as_deref(),
                        &pred,
                        d.range.clone(),
                        check::SplitParts {
                            kept: d.kept.as_slice(),
                            others: d.others.as_ref().map(|o| o.as_slice()),
                            values: d.values.as_ref().map(|v| v.as_slice()),
                            values_others: d.values_others.as_ref().map(|v| v.as_slice()),
                        },
                    )?;
                }
                d.kept.append_to(ws.as_deref_mut()).map_err(io)?;
                if let Some(o) = &d.others {
                    o.append_to(rs.as_deref_mut()).map_err(io)?;
                }
                if let Some(v) = &d.values {
                    v.append_to(vws.as_deref_mut()).map_err(io)?;
                }
                if let Some(v) = &d.values_others {
                    v.append_to(vrs.as_deref_mut()).map_err(io)?;
                }
                bar.inc(d.range.len() as u64);
                Ok(())
            };
            let job = SplitStream {
                payload: values.as_deref(),
                predicate: pred,
                chunk,
                rest,
            };
            Ok(scanner.split_streamed_with(gpu, &data, &job, drain, landed)?)
        })?
    };
    if let Some(r) = &r {
        w.append_sink(r)?;
    }
    let mut maps = vec![w.finish()?];
    if let Some(mut vw) = vw {
        if let Some(vr) = &vr {
            vw.append_sink(vr)?;
        }
        maps.push(vw.finish()?);
    }
    drop((r, vr));
    drop((aside, vals_aside));
    // unmapped by the process's end (gpusort_files::exit): their pages are already the files'
    gpusort_files::exit::keep(maps);
    out.commit()?;
    if let Some((o, _)) = vals_out {
        o.commit()?;
    }
    Ok((matched, data.len()))
}

/// [`Sink::ends`] of an output that may not be asked for.
fn ends<'s, 'a>(sink: Option<&'s mut Sink<'a>>) -> (Option<Carver<'s>>, Option<&'s mut Sink<'a>>) {
    match sink {
        Some(s) => s.ends(),
        None => (None, None),
    }
}

/// A chunk of [`split_file`]'s results as drained ([`Landed`]).
struct SplitLanded<'s, T> {
    range: std::ops::Range<usize>,
    kept: Landed<'s, T>,
    others: Option<Landed<'s, T>>,
    values: Option<Landed<'s, u32>>,
    values_others: Option<Landed<'s, u32>>,
}

/// A partition or compaction of one file over several devices (gpusort_core::multi::scan): the
/// matches counted first, so every chunk's elements are written straight to their places (the
/// matching ones from the start, the others, with `rest`, after all the matching ones).
fn split_file_group<T: SortKey>(
    p: &Prepared,
    (group, scanners): (&gpusort_core::multi::DeviceGroup, &[Scanner]),
    pred: Predicate<T>,
    rest: bool,
    values_out: Option<&Path>,
    verify: bool,
    bar: &indicatif::ProgressBar,
) -> CliResult<(usize, usize)> {
    use gpusort_core::multi::scan::{split_streamed, PlacedSplit, SplitPlan};
    let data = p.input.elements::<T>();
    let values = p.values.as_ref().map(|v| v.elements::<u32>());
    let chunk = chunk_elements(group.first(), T::TYPE, data.len());
    let plan = SplitPlan::new(group, &data, &pred, chunk);
    let matched = plan.total();
    let len = if rest { data.len() } else { matched } as u64;
    let mut out = Output::create(&p.dest)?;
    let mut vals_out = match values_out {
        Some(path) => Some((Output::create(path)?, Format::for_output(path))),
        None => None,
    };
    {
        let w = out.positioned(p.format, T::TYPE, len)?;
        let vw = match vals_out.as_mut() {
            Some((o, format)) => Some(o.positioned(*format, KeyType::U32, len)?),
            None => None,
        };
        let size = T::TYPE.size();
        let io = |e: gpusort_files::Error| CoreError::Io(e.message);
        let sink = |c: PlacedSplit<'_, T>| -> Result<(), CoreError> {
            if verify {
                check::split(
                    &data,
                    values.as_deref(),
                    &pred,
                    c.range.clone(),
                    check::SplitParts::of(c.elements, c.payload, c.kept, rest),
                )?;
            }
            let (before, after) = c.elements.split_at(c.kept);
            w.write_at((c.kept_at * size) as u64, bytemuck::cast_slice(before))
                .map_err(io)?;
            if rest {
                w.write_at(
                    ((matched + c.rest_at) * size) as u64,
                    bytemuck::cast_slice(after),
                )
                .map_err(io)?;
            }
            if let (Some(vw), Some(v)) = (vw.as_ref(), c.payload) {
                let (before, after) = v.split_at(c.kept);
                vw.write_at((c.kept_at * 4) as u64, bytemuck::cast_slice(before))
                    .map_err(io)?;
                if rest {
                    vw.write_at(
                        ((matched + c.rest_at) * 4) as u64,
                        bytemuck::cast_slice(after),
                    )
                    .map_err(io)?;
                }
            }
            bar.inc(c.range.len() as u64);
            Ok(())
        };
        let job = SplitStream {
            payload: values.as_deref(),
            predicate: pred,
            chunk,
            rest,
        };
        split_streamed(group, scanners, &data, &job, &plan, &sink)?;
    }
    out.commit()?;
    if let Some((o, _)) = vals_out {
        o.commit()?;
    }
    Ok((matched, data.len()))
}

fn partition_typed<T: SortKey + FromStr + PartialEq>(
    g: &Global,
    a: &PartitionArgs,
    p: &Prepared,
    dev: &Device,
) -> CliResult {
    let pivot: T = parse_pivot("--pivot", &a.pivot)?;
    let pred = Predicate::Below(pivot);
    let bar = job_bar(g, "partitioning", p, dev);
    let (split, n) = split_file(
        p,
        dev,
        pred,
        true,
        a.values_out.as_deref(),
        a.io.verify,
        &bar,
    )?;
    bar.finish_and_clear();
    print_count(a.io.inputs.len() > 1 || a.io.out_dir.is_some(), split, p);
    note(
        g,
        format!(
            "{split} of {n} elements are below {}; written to {}{}",
            a.pivot,
            shown(&p.dest),
            if a.io.verify { " (verified)" } else { "" }
        ),
    );
    Ok(())
}

pub fn run_compact(g: &Global, a: &CompactArgs) -> CliResult {
    if many::is_many(&a.io.inputs, a.io.out_dir.as_deref()) {
        many::reject_single_file_flags(&[
            ("-o/--output", a.io.output.is_some()),
            ("--values", a.values.is_some()),
        ])?;
        return split_many(
            g,
            &a.io,
            false,
            |dtype| {
                Ok(match (&a.below, &a.at_least) {
                    (Some(b), _) => Test::Below(pivot_bits("--below", b, dtype)?),
                    (_, Some(x)) => Test::AtLeast(pivot_bits("--at-least", x, dtype)?),
                    _ => Test::NonZero,
                })
            },
            |p, dev| for_dtype!(p.input.dtype, compact_typed(g, a, p, dev); u32, i32, f32, u64, i64, f64),
        );
    }
    let p = prepare(
        &a.io,
        "compacted",
        a.values.as_deref(),
        a.values_out.as_deref(),
    )?;
    Device::run_one(
        g,
        p,
        "compaction",
        |p, dev| for_dtype!(p.input.dtype, compact_typed(g, a, p, dev); u32, i32, f32, u64, i64, f64),
    )
}

fn compact_typed<T: SortKey + FromStr + PartialEq>(
    g: &Global,
    a: &CompactArgs,
    p: &Prepared,
    dev: &Device,
) -> CliResult {
    let pred: Predicate<T> = match (&a.below, &a.at_least) {
        (Some(b), _) => Predicate::Below(parse_pivot("--below", b)?),
        (_, Some(x)) => Predicate::AtLeast(parse_pivot("--at-least", x)?),
        _ => Predicate::NonZero,
    };
    let bar = job_bar(g, "compacting", p, dev);
    let (kept, n) = split_file(
        p,
        dev,
        pred,
        false,
        a.values_out.as_deref(),
        a.io.verify,
        &bar,
    )?;
    bar.finish_and_clear();
    print_count(a.io.inputs.len() > 1 || a.io.out_dir.is_some(), kept, p);
    note(
        g,
        format!(
            "kept {kept} of {n} elements; written to {}{}",
            shown(&p.dest),
            if a.io.verify { " (verified)" } else { "" }
        ),
    );
    Ok(())
}
