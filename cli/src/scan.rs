//! `gpusort scan`, `gpusort partition` and `gpusort compact`: same formats, errors, crash-safe
//! output and progress as `gpusort sort` (the file and output handling is shared, in files.rs).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use clap::ValueEnum;
use gpusort_core::cpu::scan as reference;
use gpusort_core::scan::{Predicate, ScanOp, Scanner};
use gpusort_core::{Gpu, KeyType, SortKey};

use crate::error::{CliError, CliResult};
use crate::files::{check_extra_output, open_values, resolve_output, Format, Input, Output};
use crate::sort::Dtype;
use crate::{for_dtype, progress, Global};

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
    /// Input: raw little-endian binary (needs --dtype) or .npy (1-D, C order).
    pub input: PathBuf,
    /// Output file (the input's format). Default: INPUT's name with a suffix before the extension.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
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
    #[arg(long, requires = "values")]
    pub values_out: Option<PathBuf>,
}

fn parse_pivot<T: SortKey + FromStr>(s: &str) -> Result<T, CliError> {
    s.parse::<T>()
        .map_err(|_| CliError::usage(format!("pivot '{s}' is not a valid {}", T::TYPE)))
}

struct Prepared {
    input: Input,
    dest: PathBuf,
    values: Option<Input>,
}

fn prepare(
    io: &Io,
    suffix: &str,
    values: Option<&Path>,
    values_out: Option<&Path>,
) -> Result<Prepared, CliError> {
    let input = Input::open(&io.input, io.dtype.map(Into::into))?;
    let dest = resolve_output(&io.input, io.output.as_deref(), false, suffix)?;
    let values = values.map(|p| open_values(p, &input)).transpose()?;
    if let Some(p) = values_out {
        check_extra_output(p, &io.input)?;
    }
    Ok(Prepared {
        input,
        dest,
        values,
    })
}

fn start(
    g: &Global,
    what: &str,
    p: &Prepared,
) -> Result<(indicatif::ProgressBar, Gpu, Scanner), CliError> {
    let bar = progress::spinner(g.progress, g.quiet);
    bar.set_message("starting the GPU");
    let gpu = g.gpu()?;
    let scanner = Scanner::new(&gpu)?;
    bar.set_message(format!(
        "{what} {} {} elements on {}",
        p.input.len, p.input.dtype, gpu.adapter.name
    ));
    Ok((bar, gpu, scanner))
}

fn write(p: &Prepared, dtype: KeyType, data: &[u8]) -> CliResult {
    Output::write_all(&p.dest, p.input.format, dtype, data)
}

fn write_values(values_out: Option<&Path>, v: Option<Vec<u32>>) -> CliResult {
    if let (Some(path), Some(v)) = (values_out, v) {
        Output::write_all(
            path,
            Format::for_output(path),
            KeyType::U32,
            bytemuck::cast_slice(&v),
        )?;
    }
    Ok(())
}

pub fn run_scan(g: &Global, a: &ScanArgs) -> CliResult {
    let p = prepare(&a.io, "scan", None, None)?;
    let op: ScanOp = a.op.into();
    if op.code(p.input.dtype).is_none() {
        return Err(CliError::usage(format!(
            "a {:?} scan of {} is not supported (integers u32/i32: add, max, min, and, or, xor; f32: add)",
            a.op, p.input.dtype
        )));
    }
    for_dtype!(p.input.dtype, scan_typed(g, a, &p, op); u32, i32, f32)
}

fn scan_typed<T: SortKey>(g: &Global, a: &ScanArgs, p: &Prepared, op: ScanOp) -> CliResult {
    let (bar, gpu, scanner) = start(g, "scanning", p)?;
    let t = Instant::now();
    let data: Vec<T> = p.input.to_vec();
    let out = scanner.scan(&gpu, &data, op, !a.exclusive)?;
    if a.io.verify {
        verify_scan(&data, &out, op, !a.exclusive)?;
    }
    write(p, T::TYPE, bytemuck::cast_slice(&out))?;
    bar.finish_and_clear();
    note(
        g,
        format!(
            "scanned {} {} elements in {:.3} s -> {}",
            data.len(),
            T::TYPE,
            t.elapsed().as_secs_f64(),
            p.dest.display()
        ),
    );
    Ok(())
}

fn verify_scan<T: SortKey>(data: &[T], out: &[T], op: ScanOp, inclusive: bool) -> CliResult {
    let want = reference::scan(data, op, inclusive);
    let fail = |i: usize| {
        CliError::runtime(format!(
            "verification failed at element {i}; nothing was written"
        ))
    };
    if T::TYPE == KeyType::F32 {
        // additions in another order: compare within a tolerance of the running sum of |x|
        let (got, want): (&[f32], &[f32]) =
            (bytemuck::cast_slice(out), bytemuck::cast_slice(&want));
        let mut abs = 0f64;
        for (i, x) in bytemuck::cast_slice::<T, f32>(data).iter().enumerate() {
            abs += x.abs() as f64;
            let tol = 1e-5 * abs + 1e-6;
            if !((got[i] as f64 - want[i] as f64).abs() <= tol
                || (got[i].is_nan() && want[i].is_nan()))
            {
                return Err(fail(i));
            }
        }
        return Ok(());
    }
    match bytemuck::cast_slice::<T, u32>(out)
        .iter()
        .zip(bytemuck::cast_slice::<T, u32>(&want))
        .position(|(a, b)| a != b)
    {
        Some(i) => Err(fail(i)),
        None => Ok(()),
    }
}

/// `--verify` for partition and compaction: the GPU's elements and payload, bit for bit.
fn check_same<T: SortKey>(
    what: &str,
    got: &[T],
    want: &[T],
    vals: &Option<Vec<u32>>,
    want_vals: &Option<Vec<u32>>,
) -> CliResult {
    if bytemuck::cast_slice::<T, u8>(got) != bytemuck::cast_slice::<T, u8>(want)
        || vals != want_vals
    {
        return Err(CliError::runtime(format!(
            "verification failed: the {what} differs from the CPU's; nothing was written"
        )));
    }
    Ok(())
}

fn note(g: &Global, s: String) {
    if !g.quiet {
        eprintln!("{s}");
    }
}

pub fn run_partition(g: &Global, a: &PartitionArgs) -> CliResult {
    let p = prepare(
        &a.io,
        "partitioned",
        a.values.as_deref(),
        a.values_out.as_deref(),
    )?;
    for_dtype!(p.input.dtype, partition_typed(g, a, &p); u32, i32, f32, u64, i64, f64)
}

fn partition_typed<T: SortKey + FromStr + PartialEq>(
    g: &Global,
    a: &PartitionArgs,
    p: &Prepared,
) -> CliResult {
    let pivot: T = parse_pivot(&a.pivot)?;
    let (bar, gpu, scanner) = start(g, "partitioning", p)?;
    let data: Vec<T> = p.input.to_vec();
    let values: Option<Vec<u32>> = p.values.as_ref().map(|v| v.to_vec());
    let pred = Predicate::Below(pivot);
    let (out, vals, split) = scanner.partition(&gpu, &data, values.as_deref(), pred)?;
    if a.io.verify {
        let (want, wvals, wsplit) = reference::partition(&data, values.as_deref(), &pred);
        check_same("partition", &out, &want, &vals, &wvals)?;
        if split != wsplit {
            return Err(CliError::runtime(format!(
                "verification failed: split index {split}, the CPU's {wsplit}; nothing was written"
            )));
        }
    }
    write(p, T::TYPE, bytemuck::cast_slice(&out))?;
    write_values(a.values_out.as_deref(), vals)?;
    bar.finish_and_clear();
    println!("{split}");
    note(
        g,
        format!(
            "{split} of {} elements are below {}; written to {}",
            data.len(),
            a.pivot,
            p.dest.display()
        ),
    );
    Ok(())
}

pub fn run_compact(g: &Global, a: &CompactArgs) -> CliResult {
    let p = prepare(
        &a.io,
        "compacted",
        a.values.as_deref(),
        a.values_out.as_deref(),
    )?;
    for_dtype!(p.input.dtype, compact_typed(g, a, &p); u32, i32, f32, u64, i64, f64)
}

fn compact_typed<T: SortKey + FromStr + PartialEq>(
    g: &Global,
    a: &CompactArgs,
    p: &Prepared,
) -> CliResult {
    let pred: Predicate<T> = match (&a.below, &a.at_least) {
        (Some(b), _) => Predicate::Below(parse_pivot(b)?),
        (_, Some(x)) => Predicate::AtLeast(parse_pivot(x)?),
        _ => Predicate::NonZero,
    };
    let (bar, gpu, scanner) = start(g, "compacting", p)?;
    let data: Vec<T> = p.input.to_vec();
    let values: Option<Vec<u32>> = p.values.as_ref().map(|v| v.to_vec());
    let (out, vals) = scanner.compact(&gpu, &data, values.as_deref(), pred)?;
    if a.io.verify {
        let (want, wvals) = reference::compact(&data, values.as_deref(), &pred);
        check_same("compaction", &out, &want, &vals, &wvals)?;
    }
    write(p, T::TYPE, bytemuck::cast_slice(&out))?;
    write_values(a.values_out.as_deref(), vals)?;
    bar.finish_and_clear();
    println!("{}", out.len());
    note(
        g,
        format!(
            "kept {} of {} elements; written to {}",
            out.len(),
            data.len(),
            p.dest.display()
        ),
    );
    Ok(())
}
