//! GpuSortExec against DataFusion's own sort: the same rows in the same order for every key type,
//! direction, null placement, NaN, LIMIT, spilling and partitioning, on lavapipe with and without
//! subgroups and on the CPU engine.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::*;
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::datasource::MemTable;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::{collect, displayable, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use gpusort_core::GpuOptions;
use gpusort_datafusion::{with_gpu_sort_on, SortEngine};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn lavapipe() -> Arc<SortEngine> {
    static E: OnceLock<Arc<SortEngine>> = OnceLock::new();
    E.get_or_init(|| Arc::new(SortEngine::gpu(&GpuOptions::default()).expect("a wgpu adapter")))
        .clone()
}

fn lavapipe_no_subgroups() -> Arc<SortEngine> {
    static E: OnceLock<Arc<SortEngine>> = OnceLock::new();
    E.get_or_init(|| {
        Arc::new(
            SortEngine::gpu(&GpuOptions {
                no_subgroups: true,
                ..Default::default()
            })
            .expect("a wgpu adapter"),
        )
    })
    .clone()
}

fn engines() -> Vec<(&'static str, Arc<SortEngine>)> {
    vec![
        ("lavapipe", lavapipe()),
        ("lavapipe without subgroups", lavapipe_no_subgroups()),
        ("cpu engine", Arc::new(SortEngine::cpu())),
    ]
}

fn config() -> SessionConfig {
    SessionConfig::new()
        .with_target_partitions(4)
        .with_batch_size(1000)
}

async fn gpu_ctx(engine: Arc<SortEngine>, min_rows: usize, merge: bool) -> SessionContext {
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config());
    let ctx = SessionContext::new_with_state(with_gpu_sort_on(builder, engine).build());
    ctx.sql(&format!("SET gpusort.min_rows = {min_rows}"))
        .await
        .unwrap();
    ctx.sql(&format!("SET gpusort.merge_partitions = {merge}"))
        .await
        .unwrap();
    ctx
}

fn cpu_ctx() -> SessionContext {
    SessionContext::new_with_config(config())
}

/// A table of every supported key type, with nulls, NaN, ±0 and ±inf, many ties, and a unique id.
fn table(rows: usize, seed: u64, partitions: usize) -> Arc<MemTable> {
    let mut rng = StdRng::seed_from_u64(seed);
    let null = |rng: &mut StdRng| rng.random_range(0..10) == 0;
    let specials = [
        f64::NAN,
        -f64::NAN,
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.5,
        -1.5,
    ];
    let mut f64s = Vec::new();
    let mut f32s = Vec::new();
    let mut f16s = Vec::new();
    let mut i64s = Vec::new();
    let mut u64s = Vec::new();
    let mut i32s = Vec::new();
    let mut u32s = Vec::new();
    let mut i16s = Vec::new();
    let mut u16s = Vec::new();
    let mut i8s = Vec::new();
    let mut u8s = Vec::new();
    let mut bools = Vec::new();
    let mut dates = Vec::new();
    let mut stamps = Vec::new();
    for _ in 0..rows {
        let f: f64 = if rng.random_range(0..4) == 0 {
            specials[rng.random_range(0..specials.len())]
        } else {
            rng.random_range(-100.0..100.0f64).round() / 4.0
        };
        let n = null(&mut rng);
        f64s.push((!n).then_some(f));
        f32s.push((!null(&mut rng)).then_some(f as f32));
        f16s.push((!null(&mut rng)).then_some(half::f16::from_f64(f)));
        i64s.push((!null(&mut rng)).then(|| rng.random_range(-5i64..5) * (1 << 40)));
        u64s.push((!null(&mut rng)).then(|| rng.random::<u64>() >> rng.random_range(0..64)));
        i32s.push((!null(&mut rng)).then(|| rng.random_range(-20..20)));
        u32s.push((!null(&mut rng)).then(|| rng.random::<u32>() % 5 * 0x3000_0000));
        i16s.push((!null(&mut rng)).then(|| rng.random::<i16>() / 4096));
        u16s.push((!null(&mut rng)).then(|| rng.random::<u16>() % 5));
        i8s.push((!null(&mut rng)).then(|| rng.random::<i8>()));
        u8s.push((!null(&mut rng)).then(|| rng.random::<u8>() % 3));
        bools.push((!null(&mut rng)).then(|| rng.random::<bool>()));
        dates.push((!null(&mut rng)).then(|| rng.random_range(-3..3) * 365));
        stamps.push((!null(&mut rng)).then(|| rng.random_range(-1000i64..1000) * 1_000_000));
    }
    let ids: Vec<i64> = (0..rows as i64).collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("f64", Arc::new(Float64Array::from(f64s))),
        ("f32", Arc::new(Float32Array::from(f32s))),
        ("f16", Arc::new(Float16Array::from(f16s))),
        ("i64", Arc::new(Int64Array::from(i64s))),
        ("u64", Arc::new(UInt64Array::from(u64s))),
        ("i32", Arc::new(Int32Array::from(i32s))),
        ("u32", Arc::new(UInt32Array::from(u32s))),
        ("i16", Arc::new(Int16Array::from(i16s))),
        ("u16", Arc::new(UInt16Array::from(u16s))),
        ("i8", Arc::new(Int8Array::from(i8s))),
        ("u8", Arc::new(UInt8Array::from(u8s))),
        ("b", Arc::new(BooleanArray::from(bools))),
        ("d", Arc::new(Date32Array::from(dates))),
        (
            "ts",
            Arc::new(TimestampMicrosecondArray::from(stamps).with_timezone("UTC")),
        ),
        ("id", Arc::new(Int64Array::from(ids))),
        (
            "s",
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("row{}", i % 97)),
            )),
        ),
    ];
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, a)| Field::new(*name, a.data_type().clone(), *name != "id"))
            .collect::<Vec<_>>(),
    ));
    let batch =
        RecordBatch::try_new(schema.clone(), columns.into_iter().map(|c| c.1).collect()).unwrap();
    // uneven partitions of uneven batches
    let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); partitions];
    let mut at = 0;
    let mut k = 0;
    while at < rows {
        let len = (rng.random_range(1..700)).min(rows - at);
        parts[k % partitions].push(batch.slice(at, len));
        at += len;
        k += 1;
    }
    Arc::new(MemTable::try_new(schema, parts).unwrap())
}

async fn run(ctx: &SessionContext, sql: &str) -> (Vec<RecordBatch>, String) {
    let df = ctx.sql(sql).await.unwrap();
    let plan: Arc<dyn ExecutionPlan> = df.clone().create_physical_plan().await.unwrap();
    let shown = displayable(plan.as_ref()).indent(true).to_string();
    let batches = collect(plan, ctx.task_ctx()).await.unwrap();
    (batches, shown)
}

fn text(batches: &[RecordBatch]) -> String {
    pretty_format_batches(batches).unwrap().to_string()
}

const ORDERS: &[&str] = &[
    "f64",
    "f64 DESC",
    "f64 NULLS FIRST",
    "f64 DESC NULLS LAST",
    "f32 DESC NULLS FIRST",
    "f16",
    "i64 DESC, u64",
    "u64 DESC NULLS LAST",
    "i32, u32 DESC",
    "i16 NULLS FIRST, u16 DESC, i8",
    "u8, b DESC, d NULLS FIRST",
    "ts DESC, f64, i32",
    "b, u8, i8, u16, i16",
    "d DESC NULLS LAST, ts NULLS FIRST",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_type_orders_as_datafusion_does() {
    let t = table(5000, 7, 3);
    let cpu = cpu_ctx();
    cpu.register_table("t", t.clone()).unwrap();
    for (name, engine) in engines() {
        for merge in [true, false] {
            let gpu = gpu_ctx(engine.clone(), 0, merge).await;
            gpu.register_table("t", t.clone()).unwrap();
            for order in ORDERS {
                // the unique id last makes the order total: the outputs must match byte for byte
                let sql = format!("SELECT * FROM t ORDER BY {order}, id");
                let (want, plain) = run(&cpu, &sql).await;
                let (got, shown) = run(&gpu, &sql).await;
                assert!(
                    shown.contains("GpuSortExec")
                        && !shown
                            .lines()
                            .any(|l| l.trim_start().starts_with("SortExec")),
                    "{name}: {sql}\n{shown}"
                );
                assert!(!plain.contains("GpuSortExec"));
                assert_eq!(text(&got), text(&want), "{name} (merge {merge}): {sql}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ties_keep_every_row_and_the_key_order() {
    let t = table(3000, 11, 2);
    let cpu = cpu_ctx();
    cpu.register_table("t", t.clone()).unwrap();
    let gpu = gpu_ctx(lavapipe(), 0, true).await;
    gpu.register_table("t", t).unwrap();
    for order in ["u8", "b DESC, u16", "f32 NULLS FIRST"] {
        let keys = order
            .split(',')
            .map(|k| k.split_whitespace().next().unwrap())
            .collect::<Vec<_>>()
            .join(", ");
        // the key columns in the same order …
        let sorted = format!("SELECT * FROM t ORDER BY {order}");
        let (want, _) = run(&cpu, &sorted).await;
        let (got, _) = run(&gpu, &sorted).await;
        let project = |b: &[RecordBatch]| {
            let idx: Vec<usize> = keys
                .split(", ")
                .map(|k| b[0].schema().index_of(k).unwrap())
                .collect();
            b.iter()
                .map(|x| x.project(&idx).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(text(&project(&got)), text(&project(&want)), "{order}");
        // … and the same rows: GPU ties are in input order (stable)
        let by_id = |b: Vec<RecordBatch>| async move {
            let ctx = SessionContext::new();
            let schema = b[0].schema();
            ctx.register_table("r", Arc::new(MemTable::try_new(schema, vec![b]).unwrap()))
                .unwrap();
            text(&run(&ctx, "SELECT * FROM r ORDER BY id").await.0)
        };
        assert_eq!(by_id(got).await, by_id(want).await, "{order}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_and_offset() {
    let t = table(4000, 3, 4);
    let cpu = cpu_ctx();
    cpu.register_table("t", t.clone()).unwrap();
    let gpu = gpu_ctx(lavapipe(), 0, true).await;
    gpu.register_table("t", t).unwrap();
    for sql in [
        "SELECT * FROM t ORDER BY f64 DESC, id LIMIT 17",
        "SELECT id, i32 FROM t ORDER BY i32 NULLS FIRST, id LIMIT 1000 OFFSET 5",
        "SELECT * FROM t ORDER BY u64, id LIMIT 0",
        "SELECT * FROM t ORDER BY ts, id LIMIT 100000",
    ] {
        let (want, _) = run(&cpu, sql).await;
        let (got, shown) = run(&gpu, sql).await;
        // LIMIT 0 plans no sort at all
        assert!(
            shown.contains("GpuSortExec") || sql.ends_with("LIMIT 0"),
            "{sql}\n{shown}"
        );
        assert_eq!(text(&got), text(&want), "{sql}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn larger_than_memory_spills_runs_and_merges() {
    let t = table(20_000, 5, 2);
    let cpu = cpu_ctx();
    cpu.register_table("t", t.clone()).unwrap();
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(FairSpillPool::new(3 << 20)))
        .build_arc()
        .unwrap();
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config())
        .with_runtime_env(runtime);
    let gpu = SessionContext::new_with_state(with_gpu_sort_on(builder, lavapipe()).build());
    gpu.sql("SET gpusort.min_rows = 0").await.unwrap();
    gpu.register_table("t", t).unwrap();
    let sql = "SELECT * FROM t ORDER BY f64 DESC NULLS LAST, i64, id";
    let (want, _) = run(&cpu, sql).await;
    let df = gpu.sql(sql).await.unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let got = collect(plan.clone(), gpu.task_ctx()).await.unwrap();
    assert_eq!(text(&got), text(&want));
    let metrics = plan.metrics().expect("GpuSortExec reports metrics");
    assert!(
        metrics.spill_count().unwrap_or(0) > 0,
        "expected spilled runs: {metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_keys_and_small_inputs_stay_on_datafusions_sort() {
    let t = table(500, 1, 1);
    let gpu = gpu_ctx(lavapipe(), 0, true).await;
    gpu.register_table("t", t.clone()).unwrap();
    // a string key: not a GPU key type
    let (_, shown) = run(&gpu, "SELECT * FROM t ORDER BY s, id").await;
    assert!(
        !shown.contains("GpuSortExec") && shown.contains("SortExec"),
        "{shown}"
    );
    // a 500-row table under a 1000-row threshold (statistics known): left alone
    let small = gpu_ctx(lavapipe(), 1000, true).await;
    small.register_table("t", t.clone()).unwrap();
    let (_, shown) = run(&small, "SELECT * FROM t ORDER BY i32, id").await;
    assert!(!shown.contains("GpuSortExec"), "{shown}");
    // switched off
    let off = gpu_ctx(lavapipe(), 0, true).await;
    off.sql("SET gpusort.enabled = false").await.unwrap();
    off.register_table("t", t).unwrap();
    let (_, shown) = run(&off, "SELECT * FROM t ORDER BY i32, id").await;
    assert!(!shown.contains("GpuSortExec"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_and_one_row_tables() {
    for rows in [0usize, 1, 2] {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Float64, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
        ]));
        let k: ArrayRef = Arc::new(Float64Array::from(
            (0..rows)
                .map(|i| (i == 0).then_some(f64::NAN))
                .collect::<Vec<_>>(),
        ));
        let t: ArrayRef = Arc::new(TimestampNanosecondArray::from(
            (0..rows as i64).rev().collect::<Vec<_>>(),
        ));
        let batch = RecordBatch::try_new(schema.clone(), vec![k, t]).unwrap();
        let table = Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap());
        let cpu = cpu_ctx();
        cpu.register_table("x", table.clone()).unwrap();
        let gpu = gpu_ctx(lavapipe(), 0, true).await;
        gpu.register_table("x", table).unwrap();
        let sql = "SELECT * FROM x ORDER BY k DESC NULLS LAST, t";
        assert_eq!(
            text(&run(&gpu, sql).await.0),
            text(&run(&cpu, sql).await.0),
            "{rows} rows"
        );
    }
}

/// An output of several gather blocks (a block is 4 batches per thread: 8,000 rows with two
/// test threads), whole and cut by LIMIT inside a block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_of_several_gather_blocks() {
    let t = table(20_000, 9, 2);
    let cpu = cpu_ctx();
    cpu.register_table("t", t.clone()).unwrap();
    let gpu = gpu_ctx(lavapipe(), 0, true).await;
    gpu.register_table("t", t).unwrap();
    for sql in [
        "SELECT * FROM t ORDER BY i64, id",
        "SELECT * FROM t ORDER BY u32 DESC, id LIMIT 15003",
    ] {
        let (want, _) = run(&cpu, sql).await;
        let (got, shown) = run(&gpu, sql).await;
        assert!(shown.contains("GpuSortExec"), "{sql}\n{shown}");
        assert_eq!(text(&got), text(&want), "{sql}");
    }
}
