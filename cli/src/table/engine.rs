//! The table engine: DataFusion with the GPU sort operator (gpusort-datafusion), its readers and
//! writers, for `gpusort sort TABLE --by …` and `gpusort sql`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{
    ident, CsvReadOptions, DataFrame, ParquetReadOptions, SessionConfig, SessionContext,
};
use futures::StreamExt;
use gpusort_datafusion::SortEngine;

use super::outcome::{classify, TableTimes};
use super::parquet::ParallelParquetWriter;
use super::{csv_rows, table_format, ByKey, SqlArgs, TableFormat, TableSort};
use crate::error::{CliError, CliResult};
use crate::{Engine, Global};
use gpusort_files::{check_distinct, check_output_path, shown, Named, Output, Written};

/// A DataFusion session with the GPU sort on this command's device, `budget` bytes of memory
/// (spilling to `tmp_dir` beyond it) where given.
fn session(g: &Global, budget: Option<u64>, tmp_dir: Option<&Path>) -> CliResult<SessionContext> {
    let engine = match g.engine()? {
        Engine::Cpu { .. } => SortEngine::cpu(),
        Engine::Gpu => SortEngine::from_gpu(g.gpu()?).map_err(runtime)?,
    };
    let mut runtime_env = RuntimeEnvBuilder::new();
    if let Some(b) = budget {
        runtime_env = runtime_env.with_memory_pool(Arc::new(FairSpillPool::new(b as usize)));
    }
    if let Some(dir) = tmp_dir {
        runtime_env = runtime_env.with_disk_manager_builder(
            DiskManagerBuilder::default()
                .with_mode(DiskManagerMode::Directories(vec![dir.to_path_buf()])),
        );
    }
    let runtime_env = runtime_env.build_arc().map_err(runtime)?;
    // strings and binaries as the files store them, not as views: a sorted Parquet file keeps
    // its column types (and reads back beside its input as one table)
    let mut config = SessionConfig::new();
    config
        .options_mut()
        .execution
        .parquet
        .schema_force_view_types = false;
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_runtime_env(runtime_env);
    let state = gpusort_datafusion::with_gpu_sort_on(builder, Arc::new(engine)).build();
    Ok(SessionContext::new_with_state(state))
}

fn tokio() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::runtime(format!("cannot start the query runtime: {e}")))
}

fn runtime(e: impl std::fmt::Display) -> CliError {
    CliError::runtime(e.to_string())
}

/// Register `path` (a file, or a folder of files of one format) as table `name`.
async fn register(ctx: &SessionContext, name: &str, path: &Path) -> CliResult {
    let meta = std::fs::metadata(path)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
    let format = table_format(path).ok_or_else(|| {
        CliError::usage(format!(
            "{}: a table must end in .parquet, .arrow, .feather, .ipc or .csv (or be a folder of such files)",
            path.display()
        ))
    })?;
    if meta.is_file() && format == TableFormat::Arrow {
        // Arrow IPC files open with "ARROW1"; Feather v1 (pre-2017 feather) with "FEA1"
        let mut magic = [0u8; 6];
        let read = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut magic))
            .unwrap_or(0);
        if read < 6 || &magic != b"ARROW1" {
            let what = match &magic[..4] == b"FEA1" {
                true => "a Feather v1 file, which gpusort does not read (write it again with pyarrow.feather.write_feather(table, path), version 2)",
                false => "not an Arrow IPC file",
            };
            return Err(CliError::usage(format!("{} is {what}", path.display())));
        }
    }
    if meta.is_file() {
        gpusort_files::watch_input(path, &meta);
    } else if !meta.is_dir() {
        return Err(CliError::usage(format!(
            "{} is not a regular file (tables are read by position: copy a stream to a file first)",
            path.display()
        )));
    }
    let p = path.to_str().ok_or_else(|| {
        CliError::usage(format!("{}: the path is not valid UTF-8", path.display()))
    })?;
    let ext = |o: &str| {
        if meta.is_dir() {
            // a folder's files may use any of the format's spellings: the first one found
            std::fs::read_dir(path)
                .ok()
                .and_then(|mut d| {
                    d.find_map(|e| {
                        let e = e.ok()?.path();
                        let ext = e.extension()?.to_str()?;
                        (TableFormat::of(&e) == Some(format)).then(|| format!(".{ext}"))
                    })
                })
                .unwrap_or_else(|| o.to_string())
        } else {
            format!(
                ".{}",
                path.extension().and_then(|e| e.to_str()).unwrap_or(o)
            )
        }
    };
    let done = match format {
        TableFormat::Parquet => {
            let e = ext("parquet");
            ctx.register_parquet(name, p, ParquetReadOptions::default().file_extension(&e))
                .await
        }
        TableFormat::Arrow => {
            let e = ext("arrow");
            let options = datafusion::datasource::file_format::options::ArrowReadOptions {
                file_extension: &e,
                ..Default::default()
            };
            ctx.register_arrow(name, p, options).await
        }
        TableFormat::Csv => {
            let e = ext("csv");
            ctx.register_csv(
                name,
                p,
                CsvReadOptions::new().has_header(true).file_extension(&e),
            )
            .await
        }
    };
    done.map_err(|e| CliError::usage(format!("{}: {}", path.display(), classify(e).message)))
}

/// What an output keeps of its input when both are of one format: the input's own Arrow schema
/// (field types, nullability, field and schema metadata, as a Parquet or Arrow IPC file stores
/// it) and a Parquet file's key-value metadata. A folder's first file speaks for the folder.
#[derive(Default)]
struct Kept {
    schema: Option<SchemaRef>,
    key_values: Vec<datafusion::parquet::file::metadata::KeyValue>,
}

fn kept_of(input: &Path, out: TableFormat) -> Kept {
    let file = if input.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(input)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| TableFormat::of(p) == Some(out) && p.is_file())
            .collect();
        files.sort();
        match files.into_iter().next() {
            Some(f) => f,
            None => return Kept::default(),
        }
    } else if TableFormat::of(input) == Some(out) {
        input.to_path_buf()
    } else {
        return Kept::default();
    };
    let Ok(f) = std::fs::File::open(&file) else {
        return Kept::default();
    };
    match out {
        TableFormat::Parquet => {
            use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
            match ParquetRecordBatchReaderBuilder::try_new(f) {
                Ok(b) => Kept {
                    schema: Some(b.schema().clone()),
                    key_values: b
                        .metadata()
                        .file_metadata()
                        .key_value_metadata()
                        .map(|kv| {
                            kv.iter()
                                .filter(|k| k.key != "ARROW:schema")
                                .cloned()
                                .collect()
                        })
                        .unwrap_or_default(),
                },
                Err(_) => Kept::default(),
            }
        }
        TableFormat::Arrow => Kept {
            schema: datafusion::arrow::ipc::reader::FileReader::try_new(f, None)
                .ok()
                .map(|r| r.schema()),
            key_values: Vec::new(),
        },
        TableFormat::Csv => Kept::default(),
    }
}

/// `batch` in the kept schema's types and metadata (DataFusion reads strings as views, say), or
/// as it is where the columns are not the kept ones.
fn conform(batch: RecordBatch, kept: Option<&SchemaRef>) -> CliResult<RecordBatch> {
    let Some(schema) = kept else {
        return Ok(batch);
    };
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| match c.data_type() == f.data_type() {
            true => Ok(c.clone()),
            false => datafusion::arrow::compute::cast(c, f.data_type()),
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(runtime)?;
    RecordBatch::try_new(schema.clone(), columns).map_err(runtime)
}

/// Stream `df`'s rows into `dest` in `format`, then commit it. With `input` (a sort), the output
/// keeps what [`Kept`] names where it is of the input's format.
async fn write(
    df: DataFrame,
    dest: &Path,
    format: TableFormat,
    input: Option<&Path>,
) -> CliResult<TableTimes> {
    let start = Instant::now();
    let mut schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
    let kept = input.map(|i| kept_of(i, format)).unwrap_or_default();
    // the kept schema where the result has its columns, by name and in order
    let kept_schema = kept.schema.filter(|k| {
        k.fields().len() == schema.fields().len()
            && k.fields()
                .iter()
                .zip(schema.fields())
                .all(|(a, b)| a.name() == b.name())
    });
    if let Some(k) = &kept_schema {
        schema = k.clone();
    }
    let mut stream = df.execute_stream().await.map_err(classify)?;
    let out = Output::create(dest)?;
    let file = out.sequential()?;
    let mut writer = TableWriter::new(file, schema, format, kept.key_values)?;
    let mut rows = 0u64;
    let mut first_row_s = None;
    while let Some(batch) = stream.next().await {
        let batch = conform(batch.map_err(classify)?, kept_schema.as_ref())?;
        first_row_s.get_or_insert_with(|| start.elapsed().as_secs_f64());
        rows += batch.num_rows() as u64;
        // a Parquet writer encodes on the rayon pool from time to time: off the async workers
        tokio::task::block_in_place(|| writer.write(&batch))?;
    }
    tokio::task::block_in_place(|| writer.finish(dest))?;
    let first_row_s = first_row_s.unwrap_or_else(|| start.elapsed().as_secs_f64());
    let write_s = start.elapsed().as_secs_f64() - first_row_s;
    let t = Instant::now();
    out.commit()?;
    Ok(TableTimes {
        rows,
        first_row_s,
        write_s,
        commit_s: t.elapsed().as_secs_f64(),
    })
}

enum TableWriter<W: std::io::Write + Send + 'static> {
    Parquet(ParallelParquetWriter<W>),
    Arrow(datafusion::arrow::ipc::writer::FileWriter<W>),
    Csv(datafusion::arrow::csv::Writer<W>),
}

impl<W: std::io::Write + Send + 'static> TableWriter<W> {
    fn new(
        w: W,
        schema: SchemaRef,
        format: TableFormat,
        key_values: Vec<datafusion::parquet::file::metadata::KeyValue>,
    ) -> CliResult<Self> {
        Ok(match format {
            // zstd level 1: a few percent larger than level 3 and written several times faster
            TableFormat::Parquet => TableWriter::Parquet(
                ParallelParquetWriter::try_new(
                    w,
                    schema,
                    WriterProperties::builder()
                        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).map_err(runtime)?))
                        // a column with more distinct values than fit 256 KiB is written plain:
                        // as small after zstd, and encoded a third faster than after filling
                        // the default 1 MiB dictionary first
                        .set_dictionary_page_size_limit(256 << 10)
                        .set_key_value_metadata((!key_values.is_empty()).then_some(key_values))
                        .build(),
                )
                .map_err(runtime)?,
            ),
            TableFormat::Arrow => TableWriter::Arrow(
                datafusion::arrow::ipc::writer::FileWriter::try_new(w, &schema).map_err(runtime)?,
            ),
            TableFormat::Csv => TableWriter::Csv(
                datafusion::arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(w),
            ),
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> CliResult {
        match self {
            TableWriter::Parquet(w) => w.write(batch).map_err(runtime),
            TableWriter::Arrow(w) => w.write(batch).map_err(runtime),
            TableWriter::Csv(w) => w.write(batch).map_err(runtime),
        }
    }

    fn finish(self, dest: &Path) -> CliResult {
        let err = |e: &dyn std::fmt::Display| {
            CliError::runtime(format!("cannot write {}: {e}", shown(dest)))
        };
        let mut inner = match self {
            TableWriter::Parquet(w) => w.into_inner().map_err(|e| err(&e))?,
            TableWriter::Arrow(mut w) => {
                w.finish().map_err(|e| err(&e))?;
                w.into_inner().map_err(|e| err(&e))?
            }
            TableWriter::Csv(w) => w.into_inner(),
        };
        std::io::Write::flush(&mut inner).map_err(|e| err(&e))
    }
}

/// A failure while a table sort worked (exit 1: a full disk under its spill, a read error) as one
/// line naming the input, where spills went, and that nothing was written; the user's mistakes
/// (exit 2) already name what to fix.
fn failed_while_working(e: CliError, job: &TableSort) -> CliError {
    if e.code != 1 {
        return e;
    }
    let spill = match (job.tmp_dir, job.memory_budget) {
        (Some(dir), _) => format!(" (spilling to {})", dir.display()),
        (None, Some(_)) => format!(" (spilling to {})", std::env::temp_dir().display()),
        (None, None) => String::new(),
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
    let rt = tokio()?;
    // (key, ascending, nulls first) of each --by key
    let keys: Vec<(ByKey, bool, bool)> = job
        .by
        .iter()
        .map(|k| {
            let asc = !k.descending.unwrap_or(job.descending);
            (k.clone(), asc, k.nulls_first.unwrap_or(!asc))
        })
        .collect();
    // CSV to CSV keeps every record's text: the records are reordered, not read and written
    // (a CSV file, or a folder of them without partition folders)
    let csv_lines = match out_format {
        TableFormat::Csv if job.input.is_file() => {
            (TableFormat::of(job.input) == Some(TableFormat::Csv)).then(|| vec![job.input.into()])
        }
        TableFormat::Csv if table_format(job.input) == Some(TableFormat::Csv) => {
            csv_rows::folder_files(job.input)
        }
        _ => None,
    };
    let written = rt
        .block_on(async {
            let ctx = session(g, job.memory_budget, job.tmp_dir)?;
            if let Some(files) = &csv_lines {
                return csv_rows::sort(&ctx, files, &keys, &dest).await;
            }
            register(&ctx, "input", job.input).await?;
            let df = ctx.table("input").await.map_err(classify)?;
            let sort: Vec<_> = keys
                .iter()
                .map(|(k, asc, nulls_first)| ident(&k.column).sort(*asc, *nulls_first))
                .collect();
            let df = df.sort(sort).map_err(classify)?;
            write(df, &dest, out_format, Some(job.input)).await
        })
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

/// `gpusort sql QUERY --table NAME=PATH … [-o OUT]`.
pub fn sql(g: &Global, args: &SqlArgs) -> CliResult {
    let budget = args
        .memory_budget
        .as_deref()
        .map(|b| crate::parse_bytes("--memory-budget", b))
        .transpose()?;
    let out = match &args.output {
        Some(o) => {
            check_output_path(o)?;
            // standard output has no name to take a format from: CSV, with a header
            let format = match o == Path::new("-") {
                true => Some(TableFormat::Csv),
                false => TableFormat::of(o),
            };
            let format = format.ok_or_else(|| {
                CliError::usage(format!(
                    "{}: a table output must end in .parquet, .arrow, .feather, .ipc or .csv",
                    o.display()
                ))
            })?;
            let inputs: Vec<Named> = args
                .tables
                .iter()
                .map(|(_, p)| Named {
                    flag: "--table",
                    path: p,
                })
                .collect();
            check_distinct(
                &inputs,
                &[Written {
                    flag: "-o",
                    path: o,
                    replaces: None,
                }],
            )?;
            Some((o, format))
        }
        None => None,
    };
    let rt = tokio()?;
    rt.block_on(async {
        let ctx = session(g, budget, args.tmp_dir.as_deref())?;
        {
            let state = ctx.state_ref();
            let mut state = state.write();
            for (k, v) in &args.settings {
                state.config_mut().options_mut().set(k, v).map_err(|e| {
                    CliError::usage(format!("--set {k}={v}: {}", classify(e).message))
                })?;
            }
        }
        for (name, path) in &args.tables {
            register(&ctx, name, path).await?;
        }
        // the result lands only through -o, under the output rules every gpusort output
        // follows; SQL's own writers (COPY TO, INSERT INTO) would write around them
        let no_writes = datafusion::execution::context::SQLOptions::new().with_allow_dml(false);
        let df = ctx
            .sql_with_options(&args.query, no_writes)
            .await
            .map_err(|e| {
                let e = classify(e);
                match e.message.contains("DML not supported") {
                    true => CliError::usage(
                        "gpusort sql writes a result only with -o FILE (put in place as every gpusort output is): COPY and INSERT are refused",
                    ),
                    false => e,
                }
            })?;
        match out {
            Some((o, format)) => {
                let written = write(df, o, format, None).await?;
                if !g.quiet {
                    crate::outcome!("{} rows -> {}", written.rows, shown(o));
                }
                if g.show_timings() {
                    crate::outcome!("{}", written.split());
                }
            }
            None => {
                let batches = df.collect().await.map_err(classify)?;
                let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
                    .map_err(runtime)?;
                println!("{text}");
            }
        }
        Ok(())
    })
}
