//! [`GpuSortCodec`]: ships [`GpuSortExec`] in serialized plans (Ballista's scheduler to its
//! executors), delegating every other node to the codec it wraps.

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::LexOrdering;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::parse_physical_sort_exprs;
use datafusion_proto::physical_plan::to_proto::serialize_physical_sort_exprs;
use datafusion_proto::physical_plan::{
    PhysicalExtensionCodec, PhysicalPlanDecodeContext, PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf::PhysicalSortExprNodeCollection;
use prost::Message;

use crate::engine::SortEngine;
use crate::GpuSortExec;

/// Our nodes start with these bytes; anything else belongs to the wrapped codec.
const TAG: &[u8] = b"gpusort.GpuSortExec.v1:";

/// The wire form of a [`GpuSortExec`] (its child travels as the plan's child).
#[derive(Clone, PartialEq, prost::Message)]
struct GpuSortNode {
    #[prost(message, optional, tag = "1")]
    expr: Option<PhysicalSortExprNodeCollection>,
    #[prost(uint64, optional, tag = "2")]
    fetch: Option<u64>,
    #[prost(bool, tag = "3")]
    preserve_partitioning: bool,
    #[prost(uint64, tag = "4")]
    min_rows: u64,
}

/// A codec that encodes [`GpuSortExec`] and hands every other extension node to `inner`
/// (for Ballista, its `BallistaPhysicalExtensionCodec`). Decoded nodes sort on `engine`: the
/// GPU of the process that decodes them.
#[derive(Debug)]
pub struct GpuSortCodec {
    inner: Arc<dyn PhysicalExtensionCodec>,
    engine: Arc<SortEngine>,
}

impl GpuSortCodec {
    pub fn new(inner: Arc<dyn PhysicalExtensionCodec>, engine: Arc<SortEngine>) -> Self {
        GpuSortCodec { inner, engine }
    }
}

impl PhysicalExtensionCodec for GpuSortCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(body) = buf.strip_prefix(TAG) else {
            return self.inner.try_decode(buf, inputs, ctx, proto_converter);
        };
        let node = GpuSortNode::decode(body)
            .map_err(|e| DataFusionError::Internal(format!("GpuSortExec wire form: {e}")))?;
        let [input] = inputs else {
            return Err(DataFusionError::Internal(format!(
                "GpuSortExec has one input, got {}",
                inputs.len()
            )));
        };
        let decode = PhysicalPlanDecodeContext::new(ctx, self);
        let exprs = parse_physical_sort_exprs(
            &node.expr.unwrap_or_default().physical_sort_expr_nodes,
            &decode,
            &input.schema(),
            proto_converter,
        )?;
        let expr = LexOrdering::new(exprs)
            .ok_or_else(|| DataFusionError::Internal("GpuSortExec without keys".into()))?;
        let sort = SortExec::new(expr, Arc::clone(input))
            .with_preserve_partitioning(node.preserve_partitioning)
            .with_fetch(node.fetch.map(|f| f as usize));
        Ok(Arc::new(GpuSortExec::new(
            sort,
            Arc::clone(&self.engine),
            node.min_rows as usize,
        )?))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let Some(gpu) = node.downcast_ref::<GpuSortExec>() else {
            return self.inner.try_encode(node, buf, proto_converter);
        };
        let sort = gpu.sort_exec();
        let exprs =
            serialize_physical_sort_exprs(sort.expr().iter().cloned(), self, proto_converter)?;
        let wire = GpuSortNode {
            expr: Some(PhysicalSortExprNodeCollection {
                physical_sort_expr_nodes: exprs,
            }),
            fetch: sort.fetch().map(|f| f as u64),
            preserve_partitioning: sort.preserve_partitioning(),
            min_rows: gpu.min_rows() as u64,
        };
        buf.extend_from_slice(TAG);
        wire.encode(buf)
            .map_err(|e| DataFusionError::Internal(format!("GpuSortExec wire form: {e}")))
    }
}
