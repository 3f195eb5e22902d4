//! `ORDER BY` through Ballista: a scheduler and two executors on localhost in this process, the
//! GPU sort planned by the scheduler and run on the executors, against DataFusion's CPU result.

use std::sync::Arc;
use std::time::Duration;

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_core::serde::BallistaPhysicalExtensionCodec;
use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use gpusort_core::GpuOptions;
use gpusort_datafusion::{gpu_sort_config, with_gpu_sort_on, GpuSortCodec, SortEngine};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A Parquet dataset of several files (one per partition), with nulls and NaN in the keys.
async fn dataset(dir: &std::path::Path) {
    let mut rng = StdRng::seed_from_u64(42);
    let rows = 6000;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int64, true),
        Field::new("x", DataType::Float64, true),
        Field::new("name", DataType::Utf8, false),
    ]));
    let k: Int64Array = (0..rows)
        .map(|_| (rng.random_range(0..20) != 0).then(|| rng.random_range(-50..50)))
        .collect();
    let x: Float64Array = (0..rows)
        .map(|_| match rng.random_range(0..20) {
            0 => None,
            1 => Some(f64::NAN),
            _ => Some(rng.random_range(-1.0..1.0)),
        })
        .collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..rows)),
            Arc::new(k),
            Arc::new(x),
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("n{}", i % 13)),
            )),
        ],
    )
    .unwrap();
    let ctx = SessionContext::new();
    for part in 0..3 {
        let slice = batch.slice(part * 2000, 2000);
        ctx.read_batch(slice)
            .unwrap()
            .write_parquet(
                dir.join(format!("part-{part}.parquet")).to_str().unwrap(),
                DataFrameWriteOptions::new().with_single_file_output(true),
                None,
            )
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn order_by_runs_on_ballista_executors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t");
    std::fs::create_dir(&data).unwrap();
    dataset(&data).await;
    let files = std::fs::read_dir(&data).unwrap().count();
    assert!(files >= 2, "a partitioned dataset: {files} files");

    let engine = Arc::new(SortEngine::gpu(&GpuOptions::default()).expect("a wgpu adapter"));
    let codec = Arc::new(GpuSortCodec::new(
        Arc::new(BallistaPhysicalExtensionCodec::default()),
        engine.clone(),
    ));
    let mut config = gpu_sort_config(
        SessionConfig::new_with_ballista()
            .with_target_partitions(4)
            .with_ballista_physical_extension_codec(codec)
            // Ballista's adaptive planner re-plans with a fixed rule list of its own (no
            // custom rules) and turns sorts into range shuffles: the static planner runs the
            // session's rules, GpuSortRule among them
            .with_ballista_adaptive_query_planner(false),
    );
    // the scheduler plans with its session's settings: a small table still sorts on the GPU,
    // and each executor sorts its own partitions (the final stage merges them)
    config.options_mut().set("gpusort.min_rows", "0").unwrap();
    config
        .options_mut()
        .set("gpusort.merge_partitions", "false")
        .unwrap();
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config);
    let state = with_gpu_sort_on(builder, engine.clone()).build();

    // the scheduler and two executors, on localhost ports the OS picks
    let addr = ballista_scheduler::standalone::new_standalone_scheduler_from_state(&state)
        .await
        .unwrap();
    let url = format!("http://localhost:{}", addr.port());
    let scheduler = loop {
        match SchedulerGrpcClient::connect(url.clone()).await {
            Ok(s) => break s,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    for _ in 0..2 {
        ballista_executor::new_standalone_executor_from_state(scheduler.clone(), 2, &state)
            .await
            .unwrap();
    }
    let ctx = SessionContext::remote_with_state(&format!("df://localhost:{}", addr.port()), state)
        .await
        .unwrap();
    let cpu = SessionContext::new();
    let path = data.to_str().unwrap();
    ctx.register_parquet("t", path, ParquetReadOptions::default())
        .await
        .unwrap();
    cpu.register_parquet("t", path, ParquetReadOptions::default())
        .await
        .unwrap();

    for sql in [
        "SELECT * FROM t ORDER BY k DESC NULLS LAST, x, id",
        "SELECT id, x FROM t WHERE k > 0 ORDER BY x NULLS FIRST, id LIMIT 50",
    ] {
        let before = engine.sorted_rows();
        let explain = ctx
            .sql(&format!("EXPLAIN {sql}"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let explain = pretty_format_batches(&explain).unwrap().to_string();
        assert!(explain.contains("GpuSortExec"), "{explain}");
        let got = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let want = cpu.sql(sql).await.unwrap().collect().await.unwrap();
        assert_eq!(
            pretty_format_batches(&got).unwrap().to_string(),
            pretty_format_batches(&want).unwrap().to_string(),
            "{sql}"
        );
        assert!(
            engine.sorted_rows() > before,
            "the executors sorted on the GPU engine: {sql}"
        );
    }
}
