//! The datafusion suite: `SELECT * … ORDER BY k, x` (an Int64 and a Float64 key, four payload
//! columns) in one DataFusion process, DataFusion's own sort on every core against the same
//! session with GpuSortExec, from memory and from a Parquet dataset; every GPU result checked
//! against DataFusion's. `relative` is the GPU's time over DataFusion's (lower is better).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{
    ArrayRef, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use gpusort_datafusion::SortEngine;
use rayon::prelude::*;

use gpusort_bench::{measure, Case, Error};

const QUERY: &str = "SELECT * FROM t ORDER BY k, x";

fn err(e: impl std::fmt::Display) -> Error {
    Error::runtime(e.to_string())
}

/// `n` rows in `parts` partitions: k uniform over ±2^40, x the sum of four uniforms (normal-like,
/// the usual shape of measured floats), payloads of four types.
fn table(n: usize, parts: usize) -> Result<(Arc<Schema>, Vec<Vec<RecordBatch>>), Error> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("x", DataType::Float64, false),
        Field::new("p0", DataType::Int64, false),
        Field::new("p1", DataType::Float64, false),
        Field::new("p2", DataType::Int32, false),
        Field::new("p3", DataType::Float32, false),
    ]));
    const BATCH: usize = 1 << 16;
    let batches: Vec<RecordBatch> = (0..n.div_ceil(BATCH))
        .into_par_iter()
        .map(|b| {
            let rows = BATCH.min(n - b * BATCH);
            let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ (b as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let mut next = move || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            };
            let unit = |v: u64| (v >> 11) as f64 / (1u64 << 53) as f64;
            let mut k = Vec::with_capacity(rows);
            let mut x = Vec::with_capacity(rows);
            for _ in 0..rows {
                k.push((next() >> 23) as i64 - (1 << 40));
                x.push((0..4).map(|_| unit(next())).sum::<f64>() - 2.0);
            }
            let base = (b * BATCH) as i64;
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from(k)),
                Arc::new(Float64Array::from(x)),
                Arc::new(Int64Array::from_iter_values(base..base + rows as i64)),
                Arc::new(Float64Array::from_iter_values(
                    (0..rows).map(|i| (base + i as i64) as f64 * 0.5),
                )),
                Arc::new(Int32Array::from_iter_values((0..rows).map(|i| i as i32))),
                Arc::new(Float32Array::from_iter_values((0..rows).map(|i| i as f32))),
            ];
            RecordBatch::try_new(schema.clone(), columns).map_err(err)
        })
        .collect::<Result<_, _>>()?;
    let mut partitions = vec![Vec::new(); parts];
    for (i, b) in batches.into_iter().enumerate() {
        partitions[i % parts].push(b);
    }
    Ok((schema, partitions))
}

fn context(engine: Option<Arc<SortEngine>>, parts: usize) -> SessionContext {
    let mut config = SessionConfig::new().with_target_partitions(parts);
    if engine.is_some() {
        // the operator itself at every size (the rule would leave small inputs to DataFusion)
        config = gpusort_datafusion::gpu_sort_config(config);
        config
            .options_mut()
            .set("gpusort.min_rows", "0")
            .expect("a gpusort setting");
    }
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config);
    match engine {
        Some(e) => {
            SessionContext::new_with_state(gpusort_datafusion::with_gpu_sort_on(builder, e).build())
        }
        None => SessionContext::new_with_state(builder.build()),
    }
}

async fn run(ctx: &SessionContext) -> Result<(f64, Vec<RecordBatch>), Error> {
    let t = Instant::now();
    let out = ctx
        .sql(QUERY)
        .await
        .map_err(err)?
        .collect()
        .await
        .map_err(err)?;
    Ok((t.elapsed().as_secs_f64(), out))
}

/// The same rows in the same order (batch boundaries aside).
fn same(a: &[RecordBatch], b: &[RecordBatch]) -> Result<bool, Error> {
    let (Some(first), Some(_)) = (a.first(), b.first()) else {
        return Ok(a.iter().all(|x| x.num_rows() == 0) && b.iter().all(|x| x.num_rows() == 0));
    };
    let schema = first.schema();
    let a = datafusion::arrow::compute::concat_batches(&schema, a).map_err(err)?;
    let b = datafusion::arrow::compute::concat_batches(&schema, b).map_err(err)?;
    Ok(a == b)
}

pub fn suite(
    gpu: gpusort_core::Gpu,
    sizes: &[u32],
    reps: usize,
    data_dir: Option<&Path>,
    bar: &indicatif::ProgressBar,
    emit: &mut dyn FnMut(Vec<Case>) -> Result<(), Error>,
) -> Result<(), Error> {
    let engine = Arc::new(SortEngine::from_gpu(gpu).map_err(err)?);
    let parts = rayon::current_num_threads();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(err)?;
    for &log in sizes {
        let n = 1usize << log;
        // a long case says what it is doing (DataFusion's own sort of 2^27 rows: ~20 s a run)
        bar.set_message(format!("datafusion 2^{log}: making the table"));
        let (schema, partitions) = table(n, parts)?;
        let mem = Arc::new(MemTable::try_new(schema, partitions).map_err(err)?);
        let kept;
        let dir = match data_dir {
            Some(d) => d.to_path_buf(),
            None => {
                kept = tempfile::tempdir().map_err(err)?;
                kept.path().to_path_buf()
            }
        };
        let parquet = dir.join(format!("orderby-2^{log}"));
        rt.block_on(async {
            let ctx = context(None, parts);
            ctx.read_table(mem.clone())
                .map_err(err)?
                .write_parquet(
                    parquet.to_str().expect("UTF-8 path"),
                    DataFrameWriteOptions::new(),
                    None,
                )
                .await
                .map_err(err)?;
            Ok::<_, Error>(())
        })?;
        for source in ["memory", "parquet"] {
            let register = |ctx: &SessionContext| -> Result<(), Error> {
                rt.block_on(async {
                    match source {
                        "memory" => ctx.register_table("t", mem.clone()).map(drop),
                        _ => {
                            ctx.register_parquet(
                                "t",
                                parquet.to_str().expect("UTF-8 path"),
                                ParquetReadOptions::default(),
                            )
                            .await
                        }
                    }
                    .map_err(err)
                })
            };
            bar.set_message(format!(
                "datafusion 2^{log}: {source}, DataFusion's own sort then GpuSortExec"
            ));
            let cpu = context(None, parts);
            register(&cpu)?;
            let gpu = context(Some(engine.clone()), parts);
            register(&gpu)?;
            let mut want = Vec::new();
            let cpu_stats = measure(reps, || {
                let (s, out) = rt.block_on(run(&cpu))?;
                want = out;
                Ok(s)
            })?;
            let mrows = n as f64 / 1e6;
            let base_s = cpu_stats.median_s;
            // each case printed as soon as it is measured (a case takes seconds at 2^27 rows)
            emit(vec![Case::measured(
                "datafusion",
                format!("{source}: DataFusion's sort, {parts} threads"),
                n as u64,
                cpu_stats,
                mrows,
                "MRows/s",
            )])?;
            let mut checked = true;
            let gpu_stats = measure(reps, || {
                let (s, out) = rt.block_on(run(&gpu))?;
                checked &= same(&out, &want)?;
                Ok(s)
            })?;
            if !checked {
                return Err(Error::runtime(format!(
                    "the GPU sort's rows differ from DataFusion's ({source}, 2^{log} rows)"
                )));
            }
            emit(vec![Case::measured(
                "datafusion",
                format!("{source}: GpuSortExec"),
                n as u64,
                gpu_stats,
                mrows,
                "MRows/s",
            )
            .relative_to(base_s)
            .with_note(format!(
                "{}; same rows as DataFusion",
                engine.describe()
            ))])?;
        }
    }
    Ok(())
}
