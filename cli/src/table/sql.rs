//! `gpusort sql` (the cargo feature `sql`): DataFusion with the GPU sort operator
//! (gpusort-datafusion) over tables registered from files; the result printed, or written
//! through the same outputs as a table sort.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{
    CsvReadOptions, DataFrame, ParquetReadOptions, SessionConfig, SessionContext,
};
use futures::StreamExt;
use gpusort_datafusion::SortEngine;

use super::outcome::{classify, TableTimes};
use super::write::Sink;
use super::{table_format, SqlArgs, TableFormat};
use crate::error::{CliError, CliResult};
use crate::{Engine, Global};
use gpusort_files::{check_distinct, check_output_path, shown, Named, Written};

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
        super::read::check_arrow_magic(path)?;
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

/// Stream `df`'s rows into `dest` in `format`, then commit it.
async fn write(df: DataFrame, dest: &Path, format: TableFormat) -> CliResult<TableTimes> {
    let start = Instant::now();
    let schema = Arc::new(df.schema().as_arrow().clone());
    let mut stream = df.execute_stream().await.map_err(classify)?;
    let mut sink = Sink::create(dest, schema, format, Vec::new(), start)?;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(classify)?;
        // a Parquet writer encodes on the rayon pool from time to time: off the async workers
        tokio::task::block_in_place(|| sink.write(&batch))?;
    }
    tokio::task::block_in_place(|| sink.commit())
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
                let written = write(df, o, format).await?;
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
