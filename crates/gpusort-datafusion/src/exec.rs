//! [`GpuSortExec`]: DataFusion's `SortExec`, with the sort itself on the GPU.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::utils::memory::get_record_batch_memory_size;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{LexOrdering, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, SpillMetrics,
};
use datafusion::physical_plan::sorts::sort::{sort_batch, SortExec};
use datafusion::physical_plan::sorts::streaming_merge::{SortedSpillFile, StreamingMergeBuilder};
use datafusion::physical_plan::stream::{
    RecordBatchReceiverStreamBuilder, RecordBatchStreamAdapter,
};
use datafusion::physical_plan::{
    apply_expression_roots, DisplayAs, DisplayFormatType, Distribution, ExecutionPlan,
    InputDistributionRequirements, PlanProperties, SpillManager,
};
use futures::{StreamExt, TryStreamExt};
use rayon::prelude::*;

use gpusort_arrow::batches::{chunks, concat_parallel, gather};
use gpusort_arrow::keys::{self, KeyColumn};
use gpusort_arrow::SortEngine;

/// A sort whose keys are packed and argsorted by gpusort (on the GPU, or its CPU engine where
/// the process has no GPU), the rows then gathered with Arrow's `take`. It has the plan
/// properties, output and spilling behaviour of the `SortExec` it replaces: it wraps that node,
/// and inputs larger than the memory pool grants are sorted into runs, spilled through
/// DataFusion's `SpillManager` and merged by its streaming merge, as `SortExec` does.
#[derive(Debug, Clone)]
pub struct GpuSortExec {
    sort: Arc<SortExec>,
    engine: Arc<SortEngine>,
    /// Inputs of fewer rows are sorted by DataFusion's own kernel (a GPU launch does not pay).
    min_rows: usize,
    metrics: ExecutionPlanMetricsSet,
}

impl GpuSortExec {
    /// The GPU sort doing what `sort` does; `min_rows`: fewer rows sort on the CPU as `sort`
    /// would.
    pub fn new(sort: SortExec, engine: Arc<SortEngine>, min_rows: usize) -> Result<Self> {
        let schema = sort.input().schema();
        for e in sort.expr().iter() {
            let t = e.expr.data_type(&schema)?;
            if !keys::supported(&t) {
                return Err(DataFusionError::NotImplemented(format!(
                    "GpuSortExec: sort key {} of type {t}",
                    e.expr
                )));
            }
        }
        Ok(GpuSortExec {
            sort: Arc::new(sort),
            engine,
            min_rows,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// The `SortExec` this node stands for (its expressions, fetch and partitioning).
    pub fn sort_exec(&self) -> &SortExec {
        &self.sort
    }

    /// The fewest rows sorted on the GPU.
    pub fn min_rows(&self) -> usize {
        self.min_rows
    }

    pub fn engine(&self) -> &Arc<SortEngine> {
        &self.engine
    }

    fn with_sort(&self, sort: SortExec) -> Self {
        GpuSortExec {
            sort: Arc::new(sort),
            engine: Arc::clone(&self.engine),
            min_rows: self.min_rows,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl DisplayAs for GpuSortExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::TreeRender => writeln!(f, "{}", self.sort.expr()),
            _ => {
                write!(f, "GpuSortExec: ")?;
                if let Some(fetch) = self.sort.fetch() {
                    write!(f, "fetch={fetch}, ")?;
                }
                write!(
                    f,
                    "expr=[{}], preserve_partitioning=[{}], device=[{}]",
                    self.sort.expr(),
                    self.sort.preserve_partitioning(),
                    self.engine.describe()
                )
            }
        }
    }
}

impl ExecutionPlan for GpuSortExec {
    fn name(&self) -> &'static str {
        "GpuSortExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.sort.properties()
    }

    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        self.sort.input_distribution_requirements()
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        self.input_distribution_requirements().into_per_child()
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![self.sort.input()]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        apply_expression_roots(self.sort.expr().iter().map(|e| &e.expr), f)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let sort = Arc::new(SortExec::clone(&self.sort)).replace_children(children, options)?;
        let sort = sort
            .downcast_ref::<SortExec>()
            .ok_or_else(|| DataFusionError::Internal("SortExec rebuilt as another node".into()))?
            .clone();
        Ok(Arc::new(self.with_sort(sort)))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.sort.input().execute(partition, Arc::clone(&context))?;
        let job = Job {
            partition,
            expr: self.sort.expr().clone(),
            fetch: self.sort.fetch(),
            engine: Arc::clone(&self.engine),
            min_rows: self.min_rows,
            metrics: self.metrics.clone(),
            gpu_rows: MetricBuilder::new(&self.metrics).counter("gpu_sorted_rows", partition),
            batch_size: context.session_config().batch_size(),
        };
        let schema = self.schema();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::once(job.run(input, context)).try_flatten(),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn fetch(&self) -> Option<usize> {
        self.sort.fetch()
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        Some(Arc::new(self.with_sort(self.sort.with_fetch(limit))))
    }
}

/// What one partition's sort needs, moved into its stream.
struct Job {
    partition: usize,
    expr: LexOrdering,
    fetch: Option<usize>,
    engine: Arc<SortEngine>,
    min_rows: usize,
    metrics: ExecutionPlanMetricsSet,
    gpu_rows: Count,
    batch_size: usize,
}

impl Job {
    async fn run(
        self,
        mut input: SendableRecordBatchStream,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let schema = input.schema();
        let pool = context.memory_pool();
        let reservation = MemoryConsumer::new(format!("GpuSortExec[{}]", self.partition))
            .with_can_spill(true)
            .register(pool);
        let spill_manager = SpillManager::new(
            context.runtime_env(),
            SpillMetrics::new(&self.metrics, self.partition),
            schema.clone(),
        );
        let job = Arc::new(self);
        let mut batches: Vec<RecordBatch> = Vec::new();
        let mut spills: Vec<SortedSpillFile> = Vec::new();
        while let Some(batch) = input.next().await {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            // the batch, plus its packed keys, permutation and gathered copy while sorted
            let size = 2 * get_record_batch_memory_size(&batch) + batch.num_rows() * 16;
            if reservation.try_grow(size).is_err() {
                if batches.is_empty() {
                    reservation.try_grow(size)?;
                }
                let run = job
                    .sort_blocking(std::mem::take(&mut batches), None)
                    .await?;
                spills.extend(spill(&spill_manager, &run.into_batches(job.batch_size)?)?);
                reservation.free();
                reservation.try_grow(size)?;
            }
            batches.push(batch);
        }
        drop(input);
        let baseline = BaselineMetrics::new(&job.metrics, job.partition);
        if spills.is_empty() {
            let sorted = job.sort_blocking(batches, job.fetch).await?;
            let output: SendableRecordBatchStream = match sorted {
                Sorted::Batches(run) => Box::pin(RecordBatchStreamAdapter::new(
                    schema.clone(),
                    futures::stream::iter(run.into_iter().map(Ok)),
                )),
                Sorted::Gather { batch, perm } => job.gather_stream(batch, perm),
            };
            let stream = output.map(move |b| {
                let _held_until_sent = &reservation;
                if let Ok(b) = &b {
                    baseline.record_output(b.num_rows());
                }
                b
            });
            return Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)));
        }
        if !batches.is_empty() {
            let run = job.sort_blocking(batches, None).await?;
            spills.extend(spill(&spill_manager, &run.into_batches(job.batch_size)?)?);
        }
        reservation.free();
        let merge = MemoryConsumer::new(format!("GpuSortExec[{}] merge", job.partition))
            .register(context.memory_pool());
        StreamingMergeBuilder::new()
            .with_sorted_spill_files(spills)
            .with_spill_manager(spill_manager)
            .with_schema(schema)
            .with_expressions(&job.expr)
            .with_metrics(baseline)
            .with_batch_size(job.batch_size)
            .with_fetch(job.fetch)
            .with_reservation(merge)
            .build()
    }

    /// Sort the batches into one run off the async threads.
    async fn sort_blocking(
        self: &Arc<Self>,
        batches: Vec<RecordBatch>,
        fetch: Option<usize>,
    ) -> Result<Sorted> {
        let job = Arc::clone(self);
        SpawnedTask::spawn_blocking(move || job.sort_run(batches, fetch))
            .join()
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?
    }

    fn sort_run(&self, batches: Vec<RecordBatch>, fetch: Option<usize>) -> Result<Sorted> {
        let Some(first) = batches.first() else {
            return Ok(Sorted::Batches(Vec::new()));
        };
        let started = std::time::Instant::now();
        let batch = concat_parallel(&first.schema(), &batches).map_err(df_error)?;
        drop(batches);
        let concat_s = started.elapsed().as_secs_f64();
        let rows = batch.num_rows();
        if rows < self.min_rows {
            let sorted = sort_batch(&batch, &self.expr, fetch)?;
            return Ok(Sorted::Batches(chunks(&sorted, self.batch_size)));
        }
        let columns = self
            .expr
            .iter()
            .map(|e| {
                Ok(KeyColumn {
                    values: e.expr.evaluate(&batch)?.into_array(rows)?,
                    options: e.options,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let t = std::time::Instant::now();
        let words = keys::pack(&columns, rows).map_err(df_error)?;
        drop(columns);
        let pack_s = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let mut perm = self.engine.argsort(words).map_err(df_error)?;
        let sort_s = t.elapsed().as_secs_f64();
        self.gpu_rows.add(rows);
        if let Some(k) = fetch {
            perm.truncate(k);
        }
        tracing::debug!(
            "GpuSortExec: {rows} rows: concat {concat_s:.3} s, pack {pack_s:.3} s, sort {sort_s:.3} s"
        );
        Ok(Sorted::Gather { batch, perm })
    }

    /// The rows of `batch` in the order `perm`, gathered block by block on a blocking thread
    /// (each block's batches on all cores) while the consumer takes the blocks before it.
    fn gather_stream(&self, batch: RecordBatch, perm: Vec<u32>) -> SendableRecordBatchStream {
        let size = self.batch_size.max(1);
        let per_block = 4 * rayon::current_num_threads();
        let mut builder = RecordBatchReceiverStreamBuilder::new(batch.schema(), 2 * per_block);
        let tx = builder.tx();
        builder.spawn_blocking(move || {
            let t = std::time::Instant::now();
            for block in perm.chunks(size * per_block) {
                let out: Vec<RecordBatch> = block
                    .par_chunks(size)
                    .map(|idx| gather(&batch, idx).map_err(df_error))
                    .collect::<Result<_>>()?;
                for b in out {
                    if tx.blocking_send(Ok(b)).is_err() {
                        return Ok(()); // the consumer is gone
                    }
                }
            }
            tracing::debug!(
                "GpuSortExec: {} rows gathered and handed on in {:.3} s",
                perm.len(),
                t.elapsed().as_secs_f64()
            );
            Ok(())
        });
        builder.build()
    }
}

/// A sorted run: batches already in order (small inputs), or the input as one batch with the
/// order of its rows, gathered as it is consumed.
enum Sorted {
    Batches(Vec<RecordBatch>),
    Gather { batch: RecordBatch, perm: Vec<u32> },
}

impl Sorted {
    /// The run as batches of at most `size` rows, gathered now on all cores (for spilling).
    fn into_batches(self, size: usize) -> Result<Vec<RecordBatch>> {
        match self {
            Sorted::Batches(b) => Ok(b),
            Sorted::Gather { batch, perm } => perm
                .par_chunks(size.max(1))
                .map(|idx| gather(&batch, idx).map_err(df_error))
                .collect(),
        }
    }
}

/// gpusort-arrow's errors as DataFusion's: what the operator cannot sort is `NotImplemented`,
/// a run too large `ResourcesExhausted`.
fn df_error(e: gpusort_arrow::Error) -> DataFusionError {
    match e {
        gpusort_arrow::Error::Arrow(e) => DataFusionError::ArrowError(Box::new(e), None),
        gpusort_arrow::Error::Unsupported(t) => {
            DataFusionError::NotImplemented(format!("GPU sort of {t} keys"))
        }
        e @ gpusort_arrow::Error::TooManyRows(_) => {
            DataFusionError::ResourcesExhausted(e.to_string())
        }
        e => DataFusionError::External(Box::new(e)),
    }
}

fn spill(manager: &SpillManager, run: &[RecordBatch]) -> Result<Option<SortedSpillFile>> {
    let max_record_batch_memory = run
        .iter()
        .map(get_record_batch_memory_size)
        .max()
        .unwrap_or(0);
    Ok(manager
        .spill_record_batch_and_finish(run, "GpuSortExec run")?
        .map(|file| SortedSpillFile {
            file,
            max_record_batch_memory,
        }))
}
