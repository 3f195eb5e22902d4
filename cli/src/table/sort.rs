//! `gpusort sort TABLE --by …`: the table read with arrow and parquet, its key columns sorted by
//! gpusort-arrow (packed words on the GPU, or the CPU engine; Arrow's row format for text keys),
//! every column gathered in that order and written.
//!
//! Under `--memory-budget` the sort is external (gpusort-arrow's `plan` says how): the rows are
//! cut into runs of at most half the budget (a run and its sorted copy are held at once), each
//! sorted and spilled to an Arrow IPC file in a run folder (in `--tmp-dir`, else beside the
//! output), and the runs merged, 64 at most at a time, into the output. Runs
//! are cut in input order and sorted stably, and the merge gives ties to the earlier run: rows
//! with equal keys keep their input order, as in the in-memory sort.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::compute::SortOptions;
use arrow::datatypes::SchemaRef;
use gpusort_arrow::batches::{concat_parallel, gather, gather_all};
use gpusort_arrow::{plan, KeyColumn, Merge, Run, SortEngine};

use super::outcome::{arrow_side, TableTimes};
use super::read::{Source, BATCH_ROWS};
use super::write::Sink;
use super::{csv_rows, table_format, ByKey, TableFormat, TableSort};
use crate::error::{CliError, CliResult};
use crate::{Engine, Global};
use gpusort_files::{check_distinct, check_output_path, shown, Named, RunDir, Written};

/// The engine the command's device flags pick.
pub(super) fn sort_engine(g: &Global) -> CliResult<SortEngine> {
    Ok(match g.engine()? {
        Engine::Cpu { .. } => SortEngine::cpu(),
        Engine::Gpu => SortEngine::from_gpu(g.gpu()?).map_err(arrow_side)?,
    })
}

/// A failure while a table sort worked (exit 1: a full disk under its spill, a read error) as one
/// line naming the input, where spills went, and that nothing was written; the user's mistakes
/// (exit 2) already name what to fix.
fn failed_while_working(e: CliError, job: &TableSort) -> CliError {
    if e.code != 1 {
        return e;
    }
    let spill = match job.tmp_dir {
        Some(dir) => format!(" (spilling to {})", dir.display()),
        None => String::new(),
    };
    let said = e.message.contains("was written");
    CliError::runtime(format!(
        "sorting {}{spill} failed: {}{}",
        job.input.display(),
        e.message,
        if said { "" } else { "; nothing was written" }
    ))
}

/// `gpusort sort TABLE --by …`.
pub fn sort(g: &Global, job: &TableSort) -> CliResult {
    if job.by.is_empty() {
        return Err(CliError::usage(format!(
            "{} is a table: name the sort keys with --by COLUMN[:desc] (one or more)",
            job.input.display()
        )));
    }
    if job.in_place && job.input.is_dir() {
        return Err(CliError::usage(format!(
            "{} is a folder of files: write the sorted table with -o FILE",
            job.input.display()
        )));
    }
    let dest = match (job.output, job.in_place) {
        (_, true) => job.input.to_path_buf(),
        (Some(o), false) => o.to_path_buf(),
        (None, false) => gpusort_files::default_name(job.input, "sorted"),
    };
    check_output_path(&dest)?;
    let out_format = if dest == Path::new("-") || job.in_place {
        table_format(job.input)
    } else {
        TableFormat::of(&dest)
    }
    .ok_or_else(|| {
        CliError::usage(format!(
            "{}: a table output must end in .parquet, .arrow, .feather, .ipc or .csv",
            dest.display()
        ))
    })?;
    check_distinct(
        &[Named {
            flag: "",
            path: job.input,
        }],
        &[Written {
            flag: "-o",
            path: &dest,
            replaces: job.in_place.then_some(0),
        }],
    )?;
    let start = Instant::now();
    // (key, ascending, nulls first) of each --by key
    let keys: Vec<(ByKey, bool, bool)> = job
        .by
        .iter()
        .map(|k| {
            let asc = !k.descending.unwrap_or(job.descending);
            (k.clone(), asc, k.nulls_first.unwrap_or(!asc))
        })
        .collect();
    let written = (|| {
        // CSV to CSV keeps every record's text: the records are reordered, not read and written
        if out_format == TableFormat::Csv && table_format(job.input) == Some(TableFormat::Csv) {
            let files = match job.input.is_dir() {
                true => super::read::folder_files(job.input, TableFormat::Csv),
                false => vec![job.input.to_path_buf()],
            };
            let engine = sort_engine(g)?;
            return csv_rows::sort(&engine, &files, &keys, &dest);
        }
        let source = Source::open(job.input)?;
        let engine = sort_engine(g)?;
        sort_table(&engine, &source, &keys, &dest, out_format, job)
    })()
    .map_err(|e| failed_while_working(e, job))?;
    if !g.quiet {
        crate::outcome!(
            "sorted {} rows of {} by {} in {:.2} s -> {}",
            written.rows,
            job.input.display(),
            job.by
                .iter()
                .map(|k| k.column.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            start.elapsed().as_secs_f64(),
            shown(&dest)
        );
    }
    if g.show_timings() {
        crate::outcome!("{}", written.split());
    }
    Ok(())
}

fn sort_table(
    engine: &SortEngine,
    source: &Source,
    keys: &[(ByKey, bool, bool)],
    dest: &Path,
    format: TableFormat,
    job: &TableSort,
) -> CliResult<TableTimes> {
    let started = Instant::now();
    let schema = source.schema.clone();
    let key_columns: Vec<(usize, SortOptions)> = keys
        .iter()
        .map(|(k, asc, nulls_first)| {
            let c = schema.index_of(&k.column).map_err(|_| {
                CliError::usage(format!(
                    "{} has no column {:?} (columns: {})",
                    source.path.display(),
                    k.column,
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            Ok((
                c,
                SortOptions {
                    descending: !asc,
                    nulls_first: *nulls_first,
                },
            ))
        })
        .collect::<CliResult<_>>()?;
    let threads = rayon::current_num_threads();
    let ahead = plan::read_ahead(job.memory_budget, source.largest_piece, threads);
    // the spilled runs' folder, made at the first spill: in --tmp-dir, else beside the output
    // (removed on drop and on interrupt, as an array sort's runs are)
    let mut run_dir: Option<RunDir> = None;
    let mut spilled: Vec<Spilled> = Vec::new();
    let mut held: Vec<RecordBatch> = Vec::new();
    let (mut held_bytes, mut held_rows) = (0usize, 0usize);
    let mut read_s = 0.0;
    let mut t = Instant::now();
    for batch in source.batches(ahead)? {
        let batch = batch?;
        held_bytes += batch.get_array_memory_size();
        held_rows += batch.num_rows();
        held.push(batch);
        read_s += t.elapsed().as_secs_f64();
        t = Instant::now();
        if plan::run_is_full(held_bytes, held_rows, job.memory_budget) {
            let run = SortedRun::new(engine, &schema, std::mem::take(&mut held), &key_columns)?;
            if run_dir.is_none() {
                run_dir = Some(RunDir::new(job.tmp_dir, dest)?);
            }
            let dir = run_dir.as_ref().expect("made above").path();
            spilled.push(Spilled::write(dir, &schema, run.batches())?);
            (held_bytes, held_rows) = (0, 0);
            t = Instant::now();
        }
    }
    tracing::debug!(
        "table sort: read {read_s:.3} s, {} runs spilled",
        spilled.len()
    );
    let last = SortedRun::new(engine, &schema, held, &key_columns)?;
    let mut sink = Sink::create(
        dest,
        schema.clone(),
        format,
        match format {
            TableFormat::Parquet => source.key_values.clone(),
            _ => Vec::new(),
        },
        started,
    )?;
    if spilled.is_empty() {
        // gathered on all cores a block at a time (batches of BATCH_ROWS, four a thread), each
        // block handed to the writer before the next
        let block = BATCH_ROWS * 4 * threads;
        let (mut gather_s, mut write_s) = (0.0, 0.0);
        for part in last.perm.chunks(block) {
            let t = Instant::now();
            let gathered = gather_all(&last.batch, part, BATCH_ROWS).map_err(arrow_side)?;
            gather_s += t.elapsed().as_secs_f64();
            let t = Instant::now();
            for b in gathered {
                sink.write(&b)?;
            }
            write_s += t.elapsed().as_secs_f64();
        }
        tracing::debug!("table sort: gather {gather_s:.3} s, write {write_s:.3} s");
        return sink.commit();
    }
    // the earliest runs merged first, so the runs stay in input order
    let spill_dir = run_dir.as_ref().expect("runs were spilled").path();
    while spilled.len() + 1 > plan::MERGE_FAN_IN {
        let group: Vec<Spilled> = spilled.drain(..plan::MERGE_FAN_IN).collect();
        let readers = group.iter().map(Spilled::read).collect::<CliResult<_>>()?;
        let merged = Merge::new(&schema, &key_columns, readers, BATCH_ROWS).map_err(arrow_side)?;
        spilled.insert(0, Spilled::write(spill_dir, &schema, merged)?);
    }
    let mut readers: Vec<Run> = spilled
        .iter()
        .map(Spilled::read)
        .collect::<CliResult<_>>()?;
    readers.push(Box::new(last.batches()));
    for b in Merge::new(&schema, &key_columns, readers, BATCH_ROWS).map_err(arrow_side)? {
        sink.write(&b.map_err(arrow_side)?)?;
    }
    sink.commit()
}

/// A run's rows as one batch and the order that sorts them.
struct SortedRun {
    batch: RecordBatch,
    perm: Arc<Vec<u32>>,
}

impl SortedRun {
    fn new(
        engine: &SortEngine,
        schema: &SchemaRef,
        held: Vec<RecordBatch>,
        keys: &[(usize, SortOptions)],
    ) -> CliResult<SortedRun> {
        let t = Instant::now();
        let batch = match held.is_empty() {
            true => RecordBatch::new_empty(schema.clone()),
            false => concat_parallel(schema, &held).map_err(arrow_side)?,
        };
        drop(held);
        let concat_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let rows = batch.num_rows();
        let perm = match rows {
            0 => Vec::new(),
            _ => {
                let columns: Vec<KeyColumn> = keys
                    .iter()
                    .map(|&(c, options)| KeyColumn {
                        values: batch.column(c).clone(),
                        options,
                    })
                    .collect();
                gpusort_arrow::permutation(engine, &columns, rows).map_err(arrow_side)?
            }
        };
        tracing::debug!(
            "table sort: a run of {rows} rows: concat {concat_s:.3} s, keys sorted {:.3} s",
            t.elapsed().as_secs_f64()
        );
        Ok(SortedRun {
            batch,
            perm: Arc::new(perm),
        })
    }

    /// The run's rows in order, gathered a batch at a time as they are asked for.
    fn batches(&self) -> impl Iterator<Item = gpusort_arrow::Result<RecordBatch>> + Send + 'static {
        let (batch, perm) = (self.batch.clone(), self.perm.clone());
        (0..perm.len())
            .step_by(BATCH_ROWS)
            .map(move |at| gather(&batch, &perm[at..(at + BATCH_ROWS).min(perm.len())]))
    }
}

/// A sorted run on disk: an Arrow IPC file, removed when dropped.
struct Spilled {
    file: tempfile::NamedTempFile,
}

impl Spilled {
    fn write(
        dir: &Path,
        schema: &SchemaRef,
        batches: impl Iterator<Item = gpusort_arrow::Result<RecordBatch>>,
    ) -> CliResult<Spilled> {
        let failed = |e: &dyn std::fmt::Display| {
            CliError::runtime(format!(
                "cannot spill a sorted run to {}: {e}",
                dir.display()
            ))
        };
        let file = tempfile::Builder::new()
            .prefix(".gpusort-run-")
            .suffix(".arrow")
            .tempfile_in(dir)
            .map_err(|e| failed(&e))?;
        let w = std::io::BufWriter::with_capacity(
            4 << 20,
            file.as_file().try_clone().map_err(|e| failed(&e))?,
        );
        let mut writer =
            arrow::ipc::writer::FileWriter::try_new(w, schema).map_err(|e| failed(&e))?;
        for b in batches {
            writer
                .write(&b.map_err(arrow_side)?)
                .map_err(|e| failed(&e))?;
        }
        writer.finish().map_err(|e| failed(&e))?;
        let mut w = writer.into_inner().map_err(|e| failed(&e))?;
        std::io::Write::flush(&mut w).map_err(|e| failed(&e))?;
        Ok(Spilled { file })
    }

    fn read(&self) -> CliResult<Run> {
        let failed = |e: &dyn std::fmt::Display| {
            CliError::runtime(format!("cannot read a spilled run back: {e}"))
        };
        let f = self.file.reopen().map_err(|e| failed(&e))?;
        let reader = arrow::ipc::reader::FileReader::try_new(std::io::BufReader::new(f), None)
            .map_err(|e| failed(&e))?;
        Ok(Box::new(
            reader.map(|b| b.map_err(gpusort_arrow::Error::from)),
        ))
    }
}
