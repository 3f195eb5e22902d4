//! [`GpuSortRule`]: the physical optimizer rule that puts [`GpuSortExec`] in for `SortExec`.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ExecutionPlan, StatisticsArgs, StatisticsContext};

use crate::engine::SortEngine;
use crate::{keys, GpuSortConfig, GpuSortExec};

/// Replaces each `SortExec` whose every key is a supported type (see [`crate::keys::supported`])
/// and whose input is not known to be smaller than `gpusort.min_rows` with a [`GpuSortExec`];
/// leaves every other node alone. With `gpusort.merge_partitions` (the default), a
/// `SortPreservingMergeExec` over per-partition sorts becomes one GPU sort of all partitions:
/// one large sort beats many small ones and a CPU merge on a GPU.
#[derive(Debug)]
pub struct GpuSortRule {
    engine: Arc<SortEngine>,
}

impl GpuSortRule {
    pub fn new(engine: Arc<SortEngine>) -> Self {
        GpuSortRule { engine }
    }
}

impl PhysicalOptimizerRule for GpuSortRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = config
            .extensions
            .get::<GpuSortConfig>()
            .cloned()
            .unwrap_or_default();
        if !options.enabled {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            if let Some(sort) = node.downcast_ref::<SortExec>() {
                return Ok(match self.replace(sort, &options)? {
                    Some(gpu) => Transformed::yes(gpu),
                    None => Transformed::no(node),
                });
            }
            if options.merge_partitions {
                if let Some(merged) = self.merge_partitions(&node)? {
                    return Ok(Transformed::yes(merged));
                }
            }
            Ok(Transformed::no(node))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "gpusort"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

impl GpuSortRule {
    fn replace(
        &self,
        sort: &SortExec,
        options: &GpuSortConfig,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let schema = sort.input().schema();
        for e in sort.expr().iter() {
            if !keys::supported(&e.expr.data_type(&schema)?) {
                return Ok(None);
            }
        }
        let rows = StatisticsContext::new()
            .compute(sort.input().as_ref(), &StatisticsArgs::new())?
            .num_rows;
        if rows.get_value().is_some_and(|&n| n < options.min_rows) {
            return Ok(None);
        }
        Ok(Some(Arc::new(GpuSortExec::new(
            sort.clone(),
            Arc::clone(&self.engine),
            options.min_rows,
        )?)))
    }

    /// `SortPreservingMergeExec(GpuSortExec(per partition))` as one `GpuSortExec` over the
    /// coalesced partitions.
    fn merge_partitions(
        &self,
        node: &Arc<dyn ExecutionPlan>,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(merge) = node.downcast_ref::<SortPreservingMergeExec>() else {
            return Ok(None);
        };
        let Some(gpu) = merge.input().downcast_ref::<GpuSortExec>() else {
            return Ok(None);
        };
        let sort = gpu.sort_exec();
        if !sort.preserve_partitioning() || sort.expr() != merge.expr() {
            return Ok(None);
        }
        let fetch = match (merge.fetch(), sort.fetch()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let input: Arc<dyn ExecutionPlan> =
            Arc::new(CoalescePartitionsExec::new(Arc::clone(sort.input())));
        let one = SortExec::new(sort.expr().clone(), input).with_fetch(fetch);
        Ok(Some(Arc::new(GpuSortExec::new(
            one,
            Arc::clone(gpu.engine()),
            gpu.min_rows(),
        )?)))
    }
}
