//! `gpusort sort`: sort a raw or .npy file, optionally carrying values or writing the permutation.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::ValueEnum;
use gpusort_core::device::transfer;
use gpusort_core::reference::check;
use gpusort_core::sort::external;
use gpusort_core::sort::plan::{self, Route};
use gpusort_core::{HostSort, KeyType, SortJob, SortKey, SortOrder, Sorter};

use crate::error::{CliError, CliResult};
use crate::{for_dtype, many, progress, Engine, Global};
use gpusort_files::{
    check_distinct, check_output_path, open_values, output_format, resolve_output, shown, Format,
    Input, Named, Output, RunDir, Written,
};

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Dtype {
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
}

impl From<Dtype> for KeyType {
    fn from(d: Dtype) -> KeyType {
        match d {
            Dtype::U32 => KeyType::U32,
            Dtype::I32 => KeyType::I32,
            Dtype::F32 => KeyType::F32,
            Dtype::U64 => KeyType::U64,
            Dtype::I64 => KeyType::I64,
            Dtype::F64 => KeyType::F64,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Algorithm {
    /// The faster one as measured: radix for 2^18 or more 32-bit keys (2^19 or more 64-bit keys)
    /// on a hardware GPU, else bitonic.
    Auto,
    /// Vectorised bitonic sort.
    Bitonic,
    /// LSD radix sort (8-bit digits, one sweep a digit, passes that cannot reorder skipped); segmented sorts as a sort by key, then by segment.
    Radix,
}

impl From<Algorithm> for gpusort_core::Algorithm {
    fn from(a: Algorithm) -> Self {
        match a {
            Algorithm::Auto => gpusort_core::Algorithm::Auto,
            Algorithm::Bitonic => gpusort_core::Algorithm::Bitonic,
            Algorithm::Radix => gpusort_core::Algorithm::Radix,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct SortArgs {
    /// Inputs: raw little-endian binary (needs --dtype) or .npy (C order; an N-D array sorts
    /// along its last axis, each row on its own, as np.sort does). Several inputs are sorted
    /// as one job (small ones share merged GPU launches) and need --out-dir or
    /// --in-place. A table (.parquet, .arrow/.feather/.ipc, .csv with a header) is sorted by
    /// its --by columns, every column carried.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Output file (same format as the input). Default: INPUT's name with `.sorted` before the extension.
    #[arg(short, long, conflicts_with = "in_place")]
    pub output: Option<PathBuf>,
    /// Write each result to DIR under its input's file name.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Replace the input with the sorted result (crash-safe: temporary file, then rename).
    #[arg(long)]
    pub in_place: bool,
    /// Element type of a raw input; for .npy it must match the header if given.
    #[arg(long, value_enum)]
    pub dtype: Option<Dtype>,
    /// Largest first. NaNs stay last.
    #[arg(long)]
    pub descending: bool,
    /// Which sort: both give identical results.
    #[arg(long, value_enum, default_value = "auto")]
    pub algorithm: Algorithm,
    /// A u32 payload (4-byte elements, raw or .npy) to reorder with the keys.
    #[arg(long, requires = "values_out")]
    pub values: Option<PathBuf>,
    /// Where the reordered payload goes (u32; .npy if the name ends in .npy).
    #[arg(long, requires = "values")]
    pub values_out: Option<PathBuf>,
    /// Also write the sorting permutation (u32; .npy if the name ends in .npy). For an N-D
    /// array, positions within each row, as np.argsort(a, axis=-1).
    #[arg(long)]
    pub argsort: Option<PathBuf>,
    /// Sort independent segments of N keys (the last may be shorter).
    #[arg(long, value_name = "N")]
    pub segment_size: Option<u32>,
    /// Sort on bits A..B of the key only (after the order-preserving transform for signed and
    /// float keys), like CUB's begin_bit/end_bit: keys equal on those bits keep their input
    /// order. Radix sort; one input.
    #[arg(long, value_name = "A..B", value_parser = parse_key_bits)]
    pub key_bits: Option<std::ops::Range<u32>>,
    /// Check the result on the CPU (sorted, and a permutation of the input) before writing it.
    /// Sorts larger than --memory-budget check while writing (order, and the same keys).
    #[arg(long)]
    pub verify: bool,
    /// Host memory the sort may hold, e.g. 512M or 16G (at least 64K). A job that would need
    /// more is sorted externally: GPU-sorted runs go to disk and a streaming merge writes the
    /// result. Default: 3/4 of the memory available now.
    #[arg(long, value_name = "BYTES")]
    pub memory_budget: Option<String>,
    /// Where an external sort's run files go (default: the output's directory). They need about
    /// the input's size on disk and are removed as the merge consumes them.
    #[arg(long, value_name = "DIR")]
    pub tmp_dir: Option<PathBuf>,
    /// For a table input: a sort key, COLUMN with optional :asc or :desc and :nulls-first or
    /// :nulls-last (e.g. price:desc); repeat for more keys, most significant first. Nulls sort
    /// as the largest values unless told.
    #[arg(long, value_name = "COLUMN[:desc]", value_parser = crate::table::parse_by)]
    pub by: Vec<crate::table::ByKey>,
}

/// A table input (by extension): sorted through DataFusion with the GPU sort operator. The flags
/// that describe raw arrays do not apply to it.
fn sort_table(g: &Global, args: &SortArgs) -> CliResult {
    if args.inputs.len() > 1 || args.out_dir.is_some() {
        return Err(CliError::usage(
            "tables are sorted one at a time: give one table input and -o",
        ));
    }
    let not_for_tables = [
        ("--dtype", args.dtype.is_some()),
        ("--values", args.values.is_some()),
        ("--argsort", args.argsort.is_some()),
        ("--segment-size", args.segment_size.is_some()),
        ("--key-bits", args.key_bits.is_some()),
        ("--verify", args.verify),
        ("--algorithm", !matches!(args.algorithm, Algorithm::Auto)),
    ];
    if let Some((flag, _)) = not_for_tables.iter().find(|(_, given)| *given) {
        return Err(CliError::usage(format!(
            "{flag} is for raw and .npy arrays; a table is sorted by its --by columns"
        )));
    }
    crate::table::sort(
        g,
        &crate::table::TableSort {
            input: &args.inputs[0],
            output: args.output.as_deref(),
            in_place: args.in_place,
            by: &args.by,
            descending: args.descending,
            memory_budget: memory_budget(args)?,
            tmp_dir: args.tmp_dir.as_deref(),
        },
    )
}

pub(crate) fn parse_key_bits(s: &str) -> Result<std::ops::Range<u32>, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("expected A..B (e.g. 0..20), got {s:?}"))?;
    let num = |x: &str| x.trim().parse::<u32>().map_err(|e| format!("{x:?}: {e}"));
    Ok(num(a)?..num(b)?)
}

/// The sorter for `args`: its algorithm and key-bit range.
fn sorter(gpu: &gpusort_core::Gpu, args: &SortArgs) -> Result<Sorter, CliError> {
    let s = crate::tuning::sorter(gpu)?.with_algorithm(args.algorithm.into());
    Ok(match &args.key_bits {
        Some(bits) => s.with_key_bits(bits.clone()),
        None => s,
    })
}

pub fn run(g: &Global, args: &SortArgs) -> CliResult {
    if args.segment_size == Some(0) {
        return Err(CliError::usage("--segment-size must be at least 1"));
    }
    if args.key_bits.is_some() && matches!(args.algorithm, Algorithm::Bitonic) {
        return Err(CliError::usage(
            "--key-bits is a radix sort option: use --algorithm radix or auto",
        ));
    }
    if args
        .inputs
        .first()
        .is_some_and(|p| crate::table::table_format(p).is_some())
    {
        return sort_table(g, args);
    }
    if !args.by.is_empty() {
        return Err(CliError::usage(
            "--by names the columns of a table (.parquet, .arrow, .feather, .ipc, .csv); an array is sorted by its values",
        ));
    }
    // a bad size is a usage error before any work; it also bounds what a streamed input holds
    // in memory
    if let Some(b) = memory_budget(args)? {
        gpusort_files::set_stream_memory(b);
    }
    if many::is_many(&args.inputs, args.out_dir.as_deref()) {
        return sort_many(g, args);
    }
    let path = &args.inputs[0];
    // an N-D array sorts each row (its last axis) on its own, as np.sort does
    let input = Input::open_rows(path, args.dtype.map(Into::into))?;
    check_rows(args, &input)?;
    let bad_bits = args.key_bits.as_ref();
    if let Some(e) =
        bad_bits.and_then(|b| gpusort_core::sort::radix::key_bits_error(input.dtype, b))
    {
        return Err(CliError::usage(format!("--key-bits: {e}")));
    }
    let dest = resolve_output(&input, args.output.as_deref(), args.in_place, "sorted")?;
    if input.streamed
        && args.values.as_deref().is_some_and(gpusort_files::is_std)
        && gpusort_files::is_std(&input.path)
    {
        return Err(CliError::usage(
            "the keys and --values both read standard input; give a file for one of them",
        ));
    }
    let values = args
        .values
        .as_deref()
        .map(|p| open_values(p, &input))
        .transpose()?;
    for p in [&args.values_out, &args.argsort].into_iter().flatten() {
        check_output_path(p)?;
    }
    let mut inputs = vec![Named {
        flag: "",
        path: &input.path,
    }];
    if let Some(v) = &args.values {
        inputs.push(Named {
            flag: "--values",
            path: v,
        });
    }
    let mut outputs = vec![Written {
        flag: "-o",
        path: &dest,
        replaces: args.in_place.then_some(0),
    }];
    for (flag, p) in [
        ("--values-out", &args.values_out),
        ("--argsort", &args.argsort),
    ] {
        if let Some(p) = p {
            outputs.push(Written {
                flag,
                path: p,
                replaces: None,
            });
        }
    }
    check_distinct(&inputs, &outputs)?;
    for_dtype!(input.dtype, sort_typed(g, args, &input, values.as_ref(), &dest); u32, i32, f32, u64, i64, f64)?;
    // unmapped by the process's end (gpusort_files::exit)
    gpusort_files::exit::keep((input, values));
    Ok(())
}

fn sort_typed<T: SortKey>(
    g: &Global,
    args: &SortArgs,
    input: &Input,
    values: Option<&Input>,
    dest: &Path,
) -> CliResult {
    let order = order_of(args, input);
    let engine = g.engine()?;
    let direct = matches!(engine, Engine::Gpu)
        && values.is_none()
        && args.argsort.is_none()
        && !args.verify
        && !g.several_devices()?;
    let mut opened = None;
    if let Some(budget) = memory_budget(args)? {
        let holds = plan::Holds {
            values: values.is_some(),
            permutation: args.argsort.is_some(),
            verify: args.verify,
            pieces: false,
        };
        let external = match plan::route(input.len, T::TYPE, holds, budget, direct) {
            Route::InMemory => false,
            Route::External => true,
            Route::AskDevice => {
                // only the piece merge would break the budget: the device says whether one GPU
                // sort takes these keys (the GPU then starts here, not beside the output's
                // page faults)
                let t = Instant::now();
                let gpu = g.gpu()?;
                let max = sorter(&gpu, args)?.one_sort_max(&gpu, T::TYPE, false, order, input.len);
                opened = Some((gpu, t, t.elapsed().as_secs_f64()));
                input.len > max
            }
        };
        if external {
            return sort_external::<T>(g, args, (input, values), dest, order, budget, engine);
        }
    }
    if let Engine::Cpu { why } = engine {
        return sort_on_cpu::<T>(g, args, input, values, dest, order, why);
    }
    if direct {
        return sort_direct::<T>(g, args, input, dest, order, opened);
    }
    sort_in_memory::<T>(g, args, input, values, dest, order)
}

/// An N-D input's rows are its segments: a `--segment-size` of another length is refused, and
/// rows must fit a u32.
fn check_rows(args: &SortArgs, input: &Input) -> CliResult {
    let Some(row) = input.rows() else {
        return Ok(());
    };
    if args.segment_size.is_some_and(|s| s as usize != row) {
        return Err(CliError::usage(format!(
            "{} is {}-D (shape {:?}): it sorts along its last axis, in rows of {row}; \
             --segment-size is for 1-D inputs",
            input.shown(),
            input.shape.len(),
            input.shape
        )));
    }
    if u32::try_from(row).is_err() {
        return Err(CliError::usage(format!(
            "{} has rows of {row} elements; rows are sorted on their own up to {} elements",
            input.shown(),
            u32::MAX
        )));
    }
    Ok(())
}

/// The order a file's keys sort in: `--descending`, and [`segments`].
fn order_of(args: &SortArgs, input: &Input) -> SortOrder {
    SortOrder {
        descending: args.descending,
        segment_size: segments(args, input),
    }
}

/// The segments a file's keys sort in: an N-D array's rows (checked to fit a u32 when it was
/// opened), else `--segment-size`.
fn segments(args: &SortArgs, input: &Input) -> Option<u32> {
    match input.rows() {
        Some(row) if input.len > 0 => Some(row as u32),
        _ => args.segment_size,
    }
}

/// `--argsort` of an N-D array gives positions within each row, as `np.argsort(a, axis=-1)`:
/// the sort kept every key in its row, so a position less its row's start is its place there.
fn row_positions(perm: &mut [u32], input: &Input) {
    if let Some(row) = input.rows().filter(|&r| r > 0) {
        let row = row as u32;
        for p in perm {
            *p %= row;
        }
    }
}

/// A sort held in memory (keys, payload, permutation, --verify) on the device, or over the
/// devices of `--devices`: there the keys are split by key range across them
/// (gpusort_core::multi::sort) where one device would sort them in pieces, the same bytes out.
fn sort_in_memory<T: SortKey>(
    g: &Global,
    args: &SortArgs,
    input: &Input,
    values: Option<&Input>,
    dest: &Path,
    order: SortOrder,
) -> CliResult {
    let bar = progress::spinner(g.progress, g.quiet);
    let start = Instant::now();
    bar.set_message(format!("reading {}", input.shown()));
    let mut keys: Vec<T> = input.to_vec();
    let original: Option<Vec<T>> = args.verify.then(|| keys.clone());
    let read_s = start.elapsed().as_secs_f64();
    let mut vals: Option<Vec<u32>> = values.map(|v| v.to_vec());
    bar.set_message("starting the GPU");
    let group = g.group()?;
    let sorters = group
        .gpus()
        .iter()
        .map(|gpu| sorter(gpu, args))
        .collect::<Result<Vec<_>, _>>()?;
    bar.set_message(format!(
        "sorting {} {} keys on {}",
        keys.len(),
        T::TYPE,
        group.describe()
    ));
    let sort_start = Instant::now();
    let spread = if g.spread_always {
        gpusort_core::multi::sort::Spread::Always
    } else {
        gpusort_core::multi::sort::Spread::WhenItPays
    };
    let (perm, stats) = gpusort_core::multi::sort::sort_host_spread(
        &group,
        &sorters,
        &mut keys,
        HostSort {
            values: vals.as_deref_mut(),
            permutation: args.argsort.is_some(),
            order,
        },
        spread,
    )?;
    if let Some(original) = &original {
        bar.set_message("verifying on the CPU");
        check(args, original, &keys, order)?;
    }
    bar.set_message(format!("writing {}", shown(dest)));
    let write_start = Instant::now();
    write_sorted(args, input, dest, &keys, vals.as_deref(), perm.as_deref())?;
    let write_s = write_start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let split = Split {
        read: read_s,
        gpu_start: (sort_start - start).as_secs_f64() - read_s,
        write: write_s,
        written_in_download: false,
    };
    if group.len() == 1 {
        report::<T>(g, args, keys.len(), &stats.devices[0], start, dest, split);
        return Ok(());
    }
    if g.quiet {
        return Ok(());
    }
    let combined = stats.combined();
    crate::outcome!(
        "sorted {} {} keys with {} on {} in {:.3} s -> {}{}",
        keys.len(),
        T::TYPE,
        algorithm_words(combined.algorithm),
        group.describe(),
        start.elapsed().as_secs_f64(),
        shown(dest),
        if args.verify { ", verified" } else { "" }
    );
    if g.show_timings() {
        let (up, gpu, down) = stats.slowest();
        crate::outcome!(
            "time: read {:.3} s, GPU start {:.3} s, split by key range {:.3} s, slowest device: upload {:.3} s, sort {:.3} s, download {:.3} s; {} {:.3} s; keys per device {:?}",
            split.read,
            split.gpu_start,
            stats.partition_s,
            up,
            gpu,
            down,
            gpusort_files::write_words(),
            split.write,
            stats.parts
        );
    }
    Ok(())
}

/// --verify of an in-memory sort: ordered (on the key bits, if given) and the same keys.
fn check<T: SortKey>(args: &SortArgs, original: &[T], keys: &[T], order: SortOrder) -> CliResult {
    Ok(match &args.key_bits {
        Some(bits) => check::sorted_on_bits(original, keys, order, bits.clone()),
        None => check::sorted(original, keys, order),
    }?)
}

/// Write a sorted result and what came with it (the payload, the permutation).
fn write_sorted<T: SortKey>(
    args: &SortArgs,
    input: &Input,
    dest: &Path,
    keys: &[T],
    values: Option<&[u32]>,
    perm: Option<&[u32]>,
) -> CliResult {
    let out_format = output_format(input, args.output.as_deref());
    let shape = &input.shape;
    Output::write_array(dest, out_format, T::TYPE, shape, bytemuck::cast_slice(keys))?;
    let mut rows_perm = None;
    let perm = match (perm, input.rows()) {
        (Some(p), Some(_)) => {
            let local = rows_perm.insert(p.to_vec());
            row_positions(local, input);
            Some(&local[..])
        }
        (p, _) => p,
    };
    for (data, path) in [(values, &args.values_out), (perm, &args.argsort)] {
        if let (Some(d), Some(path)) = (data, path) {
            Output::write_array(
                path,
                Format::for_output(path),
                KeyType::U32,
                shape,
                bytemuck::cast_slice(d),
            )?;
        }
    }
    Ok(())
}

/// A sort of one file on the CPU engine, in memory: every option (payload, permutation,
/// segments, key bits, --verify) with the GPU's results.
fn sort_on_cpu<T: SortKey>(
    g: &Global,
    args: &SortArgs,
    input: &Input,
    values: Option<&Input>,
    dest: &Path,
    order: SortOrder,
    why: &str,
) -> CliResult {
    let bar = progress::spinner(g.progress, g.quiet);
    let start = Instant::now();
    bar.set_message(format!("reading {}", input.shown()));
    let mut keys: Vec<T> = input.to_vec();
    let original: Option<Vec<T>> = args.verify.then(|| keys.clone());
    let mut vals: Option<Vec<u32>> = values.map(|v| v.to_vec());
    let read_s = start.elapsed().as_secs_f64();
    bar.set_message(format!(
        "sorting {} {} keys on the CPU",
        keys.len(),
        T::TYPE
    ));
    let t = Instant::now();
    let perm = gpusort_core::cpu_engine::sort(
        &mut keys,
        vals.as_deref_mut(),
        args.argsort.is_some(),
        order,
        args.key_bits.clone(),
    )?;
    let sort_s = t.elapsed().as_secs_f64();
    if let Some(original) = &original {
        bar.set_message("verifying");
        check(args, original, &keys, order)?;
    }
    bar.set_message(format!("writing {}", shown(dest)));
    let t = Instant::now();
    write_sorted(args, input, dest, &keys, vals.as_deref(), perm.as_deref())?;
    let write_s = t.elapsed().as_secs_f64();
    bar.finish_and_clear();
    if !g.quiet {
        crate::outcome!(
            "sorted {} {} keys with {} in {:.3} s -> {}{}",
            keys.len(),
            T::TYPE,
            Engine::cpu_words(why),
            start.elapsed().as_secs_f64(),
            shown(dest),
            if args.verify { ", verified" } else { "" }
        );
    }
    if g.show_timings() {
        crate::outcome!(
            "time: read {read_s:.3} s, sort {sort_s:.3} s, {} {write_s:.3} s",
            gpusort_files::write_words()
        );
    }
    Ok(())
}

/// The plain sort of one file (no payload, permutation or --verify): keys go from the input's
/// memory map straight into the staging ring (no host copy), and come back from the staging
/// memory straight into the output, whose pages were put in place while the GPU started (a
/// memory map of the output, prefaulted on a few threads; positioned writes where it cannot be
/// mapped); then fsync and rename. Inputs larger than one GPU sort (`Sorter::one_sort_max`: a
/// radix sort beyond one binding is still one) go through the sorter's pieces, merged on the
/// host.
fn sort_direct<T: SortKey>(
    g: &Global,
    args: &SortArgs,
    input: &Input,
    dest: &Path,
    order: SortOrder,
    opened: Option<(gpusort_core::Gpu, Instant, f64)>,
) -> CliResult {
    let bar = progress::spinner(g.progress, g.quiet);
    // (a GPU opened to size the job: the job's time starts as it started)
    let start = opened.as_ref().map_or_else(Instant::now, |o| o.1);
    bar.set_message("starting the GPU");
    let mut out = Output::create(dest)?.shaped(&input.shape);
    let format = output_format(input, args.output.as_deref());
    let mut mapped = out.mapped(format, T::TYPE, input.len as u64)?;
    let (gpu, gpu_start_s, sorted) = std::thread::scope(|s| -> CliResult<_> {
        // the output's pages come in while the GPU starts, uploads and sorts
        let prefault = mapped.as_ref().map(|m| {
            let pages = m.prefault();
            s.spawn(move || pages.run())
        });
        let (gpu, gpu_start_s) = match opened {
            Some((gpu, _, took)) => (gpu, took),
            None => (g.gpu()?, start.elapsed().as_secs_f64()),
        };
        let sorted = sort_on_gpu::<T>(&gpu, args, input, order, &bar);
        if let Some(p) = prefault {
            p.join().expect("prefaulting does not panic");
        }
        Ok((gpu, gpu_start_s, sorted?))
    })?;
    let t = Instant::now();
    bar.set_message(format!("downloading and writing {}", shown(dest)));
    let mut stats = sorted.stats;
    match sorted.keys {
        // pieces merged on the host
        SortedKeys::Host(ref keys) => {
            let bytes: &[u8] = bytemuck::cast_slice(keys);
            match mapped.as_mut() {
                Some(m) => m.write_at(0, bytes),
                None => out
                    .positioned(format, T::TYPE, keys.len() as u64)?
                    .write_at(0, bytes)?,
            }
        }
        // Straight from the staging memory into the output, each chunk on all cores while the
        // GPU copies the next ones: no host buffer of the result's size is filled on the way
        // (its page faults and copy cost more than the link; docs/BENCHMARKS.md).
        SortedKeys::Gpu(ref keys) => {
            let positioned = match mapped {
                Some(_) => None,
                None => Some(out.positioned(format, T::TYPE, input.len as u64)?),
            };
            let mut failed = None;
            let landed = transfer::download_through(
                &gpu,
                keys,
                0,
                input.bytes().len() as u64,
                transfer::CHUNK_BYTES,
                &mut |at, piece| {
                    if let Some(m) = mapped.as_mut() {
                        m.write_at(at as u64, piece);
                        return Ok(());
                    }
                    let writer = positioned.as_ref().expect("one of the two");
                    writer.write_at(at as u64, piece).map_err(|e| {
                        let line = e.message.clone();
                        failed = Some(e);
                        gpusort_core::Error::Io(line)
                    })
                },
            );
            if let Some(e) = failed {
                return Err(e.into());
            }
            landed?;
        }
    }
    // unmapped by the process's end (gpusort_files::exit): its pages are already the file's
    if let Some(m) = mapped {
        gpusort_files::exit::keep(m.into_map());
    }
    stats.download_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    out.commit()?;
    let write_s = t.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let split = Split {
        read: 0.0, // uploaded straight from the input's map
        gpu_start: gpu_start_s,
        write: write_s,
        written_in_download: true,
    };
    report::<T>(g, args, input.len, &stats, start, dest, split);
    // released by the process's end, not one by one (gpusort_files::exit)
    if let SortedKeys::Gpu(keys) = sorted.keys {
        gpusort_files::exit::keep(keys);
    }
    gpusort_files::exit::keep_gpu(gpu);
    Ok(())
}

/// Where [`sort_on_gpu`] left the sorted keys.
enum SortedKeys<T> {
    /// In a GPU buffer, to download.
    Gpu(wgpu::Buffer),
    /// In host memory: inputs larger than one GPU sort, sorted in pieces merged on the host.
    Host(Vec<T>),
}

struct Sorted<T> {
    keys: SortedKeys<T>,
    stats: gpusort_core::SortStats,
}

/// The GPU part of [`sort_direct`]: upload (the shaders compile on another thread meanwhile) and
/// sort.
fn sort_on_gpu<T: SortKey>(
    gpu: &gpusort_core::Gpu,
    args: &SortArgs,
    input: &Input,
    order: SortOrder,
    bar: &indicatif::ProgressBar,
) -> CliResult<Sorted<T>> {
    // one GPU job up to what one radix sort holds (two bindings a buffer), else pieces
    let sorter = sorter(gpu, args)?;
    let one_job = sorter.one_sort_max(gpu, T::TYPE, false, order, input.len);
    if input.len > one_job {
        let mut keys: Vec<T> = input.to_vec();
        let stats = sorter.sort(gpu, &mut keys, order)?;
        return Ok(Sorted {
            keys: SortedKeys::Host(keys),
            stats,
        });
    }
    bar.set_message(format!(
        "sorting {} {} keys on {}",
        input.len,
        T::TYPE,
        gpu.adapter.name
    ));
    let bytes = input.bytes();
    let t = Instant::now();
    let (sorter, keys) = std::thread::scope(|s| {
        let warm = s.spawn(move || -> Result<Sorter, CliError> {
            sorter.warm_up(gpu, T::TYPE, input.len as u32, order, false, false)?;
            Ok(sorter)
        });
        let keys = (|| -> Result<wgpu::Buffer, CliError> {
            let keys = transfer::storage_buffer(gpu, "keys", bytes.len() as u64)?;
            transfer::upload(gpu, &keys, 0, bytes)?;
            gpu.wait()?;
            Ok(keys)
        })();
        let sorter = warm.join().expect("the pipeline thread does not panic");
        (sorter, keys)
    });
    let (sorter, keys) = (sorter?, keys?);
    let upload_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    let mut stats = sorter.record_sampled(
        gpu,
        &mut encoder,
        &SortJob {
            key_type: T::TYPE,
            order,
            keys: &keys,
            n: input.len as u32,
            values: None,
            permutation: None,
        },
        bytes,
    )?;
    gpu.queue.submit([encoder.finish()]);
    gpu.wait()?;
    stats.upload_s = upload_s;
    stats.gpu_s = t.elapsed().as_secs_f64();
    gpusort_files::exit::keep(sorter);
    Ok(Sorted {
        keys: SortedKeys::Gpu(keys),
        stats,
    })
}

/// --memory-budget, or the default from the memory available now (None: no limit known).
fn memory_budget(args: &SortArgs) -> Result<Option<u64>, CliError> {
    let Some(text) = &args.memory_budget else {
        return Ok(external::default_memory_budget());
    };
    let b = crate::parse_bytes("--memory-budget", text)?;
    if b < external::MIN_MEMORY_BUDGET {
        return Err(CliError::usage(format!(
            "--memory-budget {text} is below the smallest budget, {}K",
            external::MIN_MEMORY_BUDGET >> 10
        )));
    }
    Ok(Some(b))
}

/// A sort larger than the memory budget: runs sorted on the GPU into files in a private
/// directory, then a streaming merge into the outputs; every output is a temporary file until
/// all of them are written (gpusort_core::sort::external has the method).
fn sort_external<T: SortKey>(
    g: &Global,
    args: &SortArgs,
    (input, values): (&Input, Option<&Input>),
    dest: &Path,
    order: SortOrder,
    budget: u64,
    engine: Engine,
) -> CliResult {
    let start = Instant::now();
    let n = input.len as u64;
    let bar = progress::bar(g.progress, g.quiet, n, "keys");
    // the runs are sorted on every device of --devices (one, the usual)
    let gpu = match engine {
        Engine::Gpu => {
            bar.set_message("starting the GPU");
            let group = g.group()?;
            let sorters = group
                .gpus()
                .iter()
                .map(|gpu| sorter(gpu, args))
                .collect::<Result<Vec<_>, _>>()?;
            Some((group, sorters))
        }
        Engine::Cpu { .. } => None,
    };
    let runs = RunDir::new(args.tmp_dir.as_deref(), dest)?;
    let shape = &input.shape;
    let mut keys_out = Output::create(dest)?.shaped(shape);
    let mut values_out = match (&args.values_out, values) {
        (Some(p), Some(_)) => Some((p, Output::create(p)?.shaped(shape))),
        _ => None,
    };
    let mut perm_out = match &args.argsort {
        Some(p) => Some((p, Output::create(p)?.shaped(shape))),
        None => None,
    };
    let stats = {
        let format = output_format(input, args.output.as_deref());
        let mut kw = keys_out.stream(format, T::TYPE, n)?;
        let mut vw = match &mut values_out {
            Some((p, o)) => Some(o.stream(Format::for_output(p), KeyType::U32, n)?),
            None => None,
        };
        let mut pw = match &mut perm_out {
            Some((p, o)) => Some(RowPositions::new(
                o.stream(Format::for_output(p), KeyType::U32, n)?,
                input.rows().filter(|&r| r > 0),
            )),
            None => None,
        };
        let sink = external::Sink {
            keys: &mut kw,
            values: vw.as_mut().map(|w| w as &mut dyn std::io::Write),
            permutation: pw.as_mut().map(|w| w as &mut dyn std::io::Write),
        };
        let job = external::ExternalSort {
            order,
            memory_budget: budget,
            run_dir: runs.path(),
            verify: args.verify,
        };
        let mut phase = None;
        let mut progress = |p, done| {
            if phase != Some(p) {
                phase = Some(p);
                bar.set_position(0);
                bar.set_message(match p {
                    external::Phase::Runs => "sorting runs".to_string(),
                    external::Phase::Merge { level, levels } => {
                        format!("merging ({level}/{levels})")
                    }
                });
            }
            bar.set_position(done);
        };
        let (keys, vals) = (input.bytes(), values.map(Input::bytes));
        match &gpu {
            Some((group, sorters)) if group.len() > 1 => external::sort_external::<T>(
                &gpusort_core::multi::sort::GroupRuns { group, sorters },
                keys,
                vals,
                &job,
                sink,
                &mut progress,
            )?,
            Some((group, sorters)) => external::sort_external::<T>(
                &external::GpuRuns {
                    sorter: &sorters[0],
                    gpu: group.first(),
                },
                keys,
                vals,
                &job,
                sink,
                &mut progress,
            )?,
            None => external::sort_external::<T>(
                &gpusort_core::cpu_engine::CpuRuns {
                    bits: args.key_bits.clone(),
                },
                keys,
                vals,
                &job,
                sink,
                &mut progress,
            )?,
        }
    };
    drop(runs);
    for (_, o) in [values_out, perm_out].into_iter().flatten() {
        o.commit()?;
    }
    keys_out.commit()?;
    bar.finish_and_clear();
    if !g.quiet {
        crate::outcome!(
            "sorted {n} {} keys in {:.3} s (externally: larger than the memory budget) -> {}{}",
            T::TYPE,
            start.elapsed().as_secs_f64(),
            shown(dest),
            if args.verify { ", verified" } else { "" }
        );
    }
    if g.show_timings() {
        crate::outcome!(
            "time: {} sorted run{} of up to {} keys {:.3} s, {} merge level{} of up to {} runs {:.3} s (memory budget {} KiB)",
            stats.runs,
            if stats.runs == 1 { "" } else { "s" },
            stats.run_keys,
            stats.run_s,
            stats.merge_levels,
            if stats.merge_levels == 1 { "" } else { "s" },
            stats.fan_in,
            stats.merge_s,
            budget >> 10
        );
    }
    Ok(())
}

/// A permutation stream that writes [`row_positions`]'s positions within each row (as they
/// come, in u32 words that may arrive split across writes).
struct RowPositions<W> {
    inner: W,
    row: Option<u32>,
    /// The bytes of a word begun in one write and ended in the next.
    partial: Vec<u8>,
}

impl<W: std::io::Write> RowPositions<W> {
    fn new(inner: W, row: Option<usize>) -> RowPositions<W> {
        RowPositions {
            inner,
            row: row.map(|r| r as u32),
            partial: Vec::with_capacity(4),
        }
    }
}

impl<W: std::io::Write> std::io::Write for RowPositions<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(row) = self.row else {
            return self.inner.write(buf);
        };
        let mut rest = buf;
        while !self.partial.is_empty() && !rest.is_empty() {
            self.partial.push(rest[0]);
            rest = &rest[1..];
            if self.partial.len() == 4 {
                let p = u32::from_le_bytes(self.partial[..].try_into().expect("4 bytes"));
                self.inner.write_all(&(p % row).to_le_bytes())?;
                self.partial.clear();
            }
        }
        let whole = rest.len() / 4 * 4;
        let local: Vec<u8> = rest[..whole]
            .chunks_exact(4)
            .flat_map(|w| (u32::from_le_bytes(w.try_into().expect("4 bytes")) % row).to_le_bytes())
            .collect();
        self.inner.write_all(&local)?;
        self.partial.extend_from_slice(&rest[whole..]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.partial.is_empty() {
            return Err(std::io::Error::other(
                "a permutation ended inside a 4-byte position",
            ));
        }
        self.inner.flush()
    }
}

/// The parts of a sort's time that the statistics do not hold.
struct Split {
    read: f64,
    gpu_start: f64,
    write: f64,
    /// The download wrote each chunk into the output as it landed (`write` is then the finish:
    /// the flush and rename, or the rename alone with --no-sync).
    written_in_download: bool,
}

/// A sorting algorithm in a user's words.
pub(crate) fn algorithm_words(a: gpusort_core::Algorithm) -> &'static str {
    match a {
        gpusort_core::Algorithm::Radix => "the radix sort",
        _ => "the bitonic sort",
    }
}

/// The outcome line of a single-file sort and, with -v or --timings, where the time went (the
/// same shape on every path; transfers that overlap other work are counted where they ran).
fn report<T: SortKey>(
    g: &Global,
    args: &SortArgs,
    n: usize,
    stats: &gpusort_core::SortStats,
    start: Instant,
    dest: &Path,
    split: Split,
) {
    if g.quiet {
        return;
    }
    crate::outcome!(
        "sorted {n} {} keys with {}{} in {:.3} s -> {}{}",
        T::TYPE,
        algorithm_words(stats.algorithm),
        match stats.radix_two_bindings {
            true => " (one GPU job beyond one binding)",
            false => "",
        },
        start.elapsed().as_secs_f64(),
        shown(dest),
        if args.verify { ", verified" } else { "" }
    );
    if g.show_timings() {
        crate::outcome!(
            "time: read {:.3} s, GPU start {:.3} s, upload {:.3} s, sort {:.3} s, {} {:.3} s, {} {:.3} s",
            split.read,
            split.gpu_start,
            stats.upload_s,
            stats.gpu_s,
            if split.written_in_download {
                "download and write"
            } else {
                "download"
            },
            stats.download_s,
            if split.written_in_download {
                gpusort_files::finish_words()
            } else {
                gpusort_files::write_words()
            },
            split.write
        );
    }
}

/// Many files over several devices: each file sorted whole on one device, the files dealt out
/// largest first to the device with the fewest keys so far, the devices working at once.
fn sort_many_on_group(
    g: &Global,
    args: &SortArgs,
    files: &many::Files,
    start: Instant,
    bar: &indicatif::ProgressBar,
) -> CliResult {
    let group = g.group()?;
    let sorters = group
        .gpus()
        .iter()
        .map(|gpu| sorter(gpu, args))
        .collect::<Result<Vec<_>, _>>()?;
    let lens: Vec<usize> = files.inputs.iter().map(|i| i.len).collect();
    let all: Vec<usize> = (0..lens.len()).collect();
    let dealt = many::deal(&all, &lens, group.len());
    bar.set_message(format!("sorting on {}", group.describe()));
    many::on_devices(&dealt, |d, f| {
        let (input, dest) = (&files.inputs[f], &files.dests[f]);
        let (gpu, sorter) = (&group.gpus()[d], &sorters[d]);
        let order = order_of(args, input);
        for_dtype!(input.dtype, sort_file_on(gpu, sorter, args, input, dest, order); u32, i32, f32, u64, i64, f64)?;
        bar.inc(1);
        Ok(())
    })?;
    bar.finish_and_clear();
    if !g.quiet {
        crate::outcome!(
            "sorted {} files on {} in {:.3} s{}",
            files.inputs.len(),
            group.describe(),
            start.elapsed().as_secs_f64(),
            if args.verify { ", verified" } else { "" }
        );
    }
    Ok(())
}

/// One file of a many-file job, sorted in memory on one device.
fn sort_file_on<T: SortKey>(
    gpu: &gpusort_core::Gpu,
    sorter: &Sorter,
    args: &SortArgs,
    input: &Input,
    dest: &Path,
    order: SortOrder,
) -> CliResult {
    let mut keys: Vec<T> = input.to_vec();
    let original: Option<Vec<T>> = args.verify.then(|| keys.clone());
    sorter.sort_host(
        gpu,
        &mut keys,
        HostSort {
            order,
            ..HostSort::default()
        },
    )?;
    if let Some(original) = &original {
        check(args, original, &keys, order)?;
    }
    write_sorted(args, input, dest, &keys, None, None)
}

/// `gpusort sort a b c --out-dir DIR`: many files as one job.
fn sort_many(g: &Global, args: &SortArgs) -> CliResult {
    many::reject_single_file_flags(&[
        ("-o/--output", args.output.is_some()),
        ("--values", args.values.is_some()),
        ("--argsort", args.argsort.is_some()),
    ])?;
    let files = many::open_all(
        &args.inputs,
        args.dtype.map(Into::into),
        args.out_dir.as_deref(),
        args.in_place,
        true,
        true,
    )?;
    for input in &files.inputs {
        check_rows(args, input)?;
    }
    if let Some(bits) = &args.key_bits {
        for input in &files.inputs {
            if let Some(e) = gpusort_core::sort::radix::key_bits_error(input.dtype, bits) {
                return Err(CliError::usage(format!(
                    "--key-bits: {} ({})",
                    e,
                    input.shown()
                )));
            }
        }
    }
    // the merged launches run bitonic block sorts: radix and key-bit jobs go one by one
    let merged_ok = |i: &Input| {
        let len = segments(args, i).map_or(i.len, |s| s as usize);
        gpusort_core::schedule::sort_merges(
            i.dtype,
            args.algorithm.into(),
            args.key_bits.is_none(),
            len,
        )
    };
    let start = Instant::now();
    let bar = progress::bar(g.progress, g.quiet, files.inputs.len() as u64, "files");
    let quiet = Global {
        quiet: true,
        timings: false,
        ..g.clone()
    };
    // one file through the single-file path (its own kernels, or the CPU engine)
    let one_by_one = |f: usize| -> CliResult {
        let (input, dest) = (&files.inputs[f], &files.dests[f]);
        bar.set_message(format!("sorting {}", input.shown()));
        for_dtype!(input.dtype, sort_typed(&quiet, args, input, None, dest); u32, i32, f32, u64, i64, f64)?;
        bar.inc(1);
        Ok(())
    };
    if g.several_devices()? {
        return sort_many_on_group(g, args, &files, start, &bar);
    }
    if let Engine::Cpu { why } = g.engine()? {
        // each file in turn, each sort on all cores
        (0..files.inputs.len()).try_for_each(one_by_one)?;
        bar.finish_and_clear();
        if !g.quiet {
            crate::outcome!(
                "sorted {} files with {} in {:.3} s{}",
                files.inputs.len(),
                Engine::cpu_words(why),
                start.elapsed().as_secs_f64(),
                if args.verify { ", verified" } else { "" }
            );
        }
        return Ok(());
    }

    bar.set_message("starting the GPU");
    let gpu = g.gpu()?;
    let sched = gpusort_core::schedule::Scheduler::new(&gpu)?;
    let (small, large): (Vec<usize>, Vec<usize>) =
        (0..files.inputs.len()).partition(|&f| merged_ok(&files.inputs[f]));
    bar.set_message(format!(
        "sorting {} files on {}",
        small.len(),
        gpu.adapter.name
    ));
    let merged = many::run_merged(
        &gpu,
        &sched,
        &files,
        &small,
        |_| 0,
        |_, input, offset| {
            let work = gpusort_core::schedule::Work::Sort {
                key_type: input.dtype,
                descending: args.descending,
            };
            let n = input.len as u32;
            let seg = segments(args, input).unwrap_or(n.max(1));
            (0..n.div_ceil(seg).max(1))
                .map(|s| (work, offset + s * seg, seg.min(n - s * seg)))
                .collect()
        },
        |f, words| {
            let input = &files.inputs[f];
            if args.verify {
                let original: Vec<u32> = input.to_vec();
                check::sorted_words(input.dtype, &original, words, order_of(args, input))?;
            }
            Output::write_array(
                &files.dests[f],
                input.format,
                input.dtype,
                &input.shape,
                bytemuck::cast_slice(words),
            )?;
            bar.inc(1);
            Ok(())
        },
    )?;
    let (launches, mode) = (merged.launches, merged.mode);
    large.iter().try_for_each(|&f| one_by_one(f))?;
    bar.finish_and_clear();
    if !g.quiet {
        crate::outcome!(
            "sorted {} files in {:.3} s: {} together in {launches} GPU launch{}{}, {} one by one{}",
            files.inputs.len(),
            start.elapsed().as_secs_f64(),
            small.len(),
            if launches == 1 { "" } else { "es" },
            match mode {
                Some(gpusort_core::schedule::Mode::Merged) => " (merged)",
                Some(_) => " (one after another)",
                None => "",
            },
            large.len(),
            if args.verify { ", verified" } else { "" }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Positions within rows however the stream's writes cut the words; no rows: unchanged.
    #[test]
    fn row_positions_survive_words_split_across_writes() {
        use std::io::Write;
        let perm: Vec<u32> = (0..40u32).rev().collect();
        let bytes: &[u8] = bytemuck::cast_slice(&perm);
        for cut in [1, 3, 4, 5, 7, 160] {
            for row in [None, Some(7), Some(40)] {
                let mut out = Vec::new();
                let mut w = RowPositions::new(&mut out, row);
                for piece in bytes.chunks(cut) {
                    w.write_all(piece).unwrap();
                }
                w.flush().unwrap();
                let got: Vec<u32> = bytemuck::pod_collect_to_vec(&out);
                let want: Vec<u32> = perm
                    .iter()
                    .map(|p| row.map_or(*p, |r| p % r as u32))
                    .collect();
                assert_eq!(got, want, "writes of {cut} bytes, rows of {row:?}");
            }
        }
        let mut w = RowPositions::new(Vec::new(), Some(3));
        w.write_all(&[1, 2]).unwrap();
        assert!(
            w.flush().is_err(),
            "a stream ending inside a word is an error"
        );
    }
}
