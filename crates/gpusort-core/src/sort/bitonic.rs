//! The vectorised bitonic network (METHODS.md method 1): its plan as plain data, so the dispatch
//! count can be checked against the method's formula and the CPU twin (`reference::bitonic`) can run it
//! without a GPU, and the pipelines of one record width.

use crate::device::kernel::BindLayout;

/// Global steps fused into one dispatch (each invocation holds 2^3 vec4s in registers).
pub const MAX_FUSED_GLOBAL_STEPS: u32 = 3;

/// One host-ordered dispatch of the sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Case 1: every stage up to the tile size (or `k_end`), in registers and workgroup memory.
    LocalSort,
    /// Case 2: `steps` steps of stage `k` starting at distance `j`, partners in other tiles.
    Global {
        k: u32,
        j: u32,
        steps: u32,
        mirror: bool,
    },
    /// Case 3: the steps of stage `k` below the tile size.
    LocalMerge { k: u32 },
}

/// The passes of one sort of `n` records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitonicPlan {
    pub n: u32,
    /// The last stage: next power of two of `n`, or the segment size for segmented sorts.
    pub k_end: u32,
    /// Records per workgroup tile in the local kernels (16 per invocation).
    pub tile: u32,
    pub passes: Vec<Pass>,
}

impl BitonicPlan {
    pub fn new(n: u32, k_end: u32, tile: u32, max_fused: u32) -> BitonicPlan {
        let mut passes = Vec::new();
        if n > 1 && k_end > 1 {
            passes.push(Pass::LocalSort);
            let mut k = tile * 2;
            while k <= k_end {
                let mut j = k / 2;
                let mut mirror = true;
                while j >= tile {
                    let remaining = (j / tile).trailing_zeros() + 1;
                    let steps = remaining.min(max_fused);
                    passes.push(Pass::Global {
                        k,
                        j,
                        steps,
                        mirror,
                    });
                    j >>= steps;
                    mirror = false;
                }
                passes.push(Pass::LocalMerge { k });
                k *= 2;
            }
        }
        BitonicPlan {
            n,
            k_end,
            tile,
            passes,
        }
    }

    /// Host-ordered synchronisation points (dispatches) of the network itself.
    pub fn dispatches(&self) -> usize {
        self.passes.len()
    }

    /// How many of them are single global-memory passes (case 2).
    pub fn global_dispatches(&self) -> usize {
        self.passes
            .iter()
            .filter(|p| matches!(p, Pass::Global { .. }))
            .count()
    }
}

/// The method's count of host synchronisations for a vectorised network over 2N keys, vectors of
/// L keys and W threads per workgroup, each thread holding two vectors: with n = lg N, l = lg L,
/// w = lg W, (1+n-2l-w)(n-2l-w)/2 when the data exceed one workgroup, else 0. Our kernels hold
/// four vectors per thread and fuse up to three global steps, so they need fewer; the bench
/// prints both.
pub fn method_host_syncs(keys: u64, vector: u32, threads: u32) -> u64 {
    let n = (keys / 2).max(1).ilog2() as i64;
    let (l, w) = (vector.ilog2() as i64, threads.ilog2() as i64);
    let m = n - 2 * l - w;
    if m <= 0 {
        0
    } else {
        ((1 + m) * m / 2) as u64
    }
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct BitonicParams {
    pub(crate) n: u32,
    pub(crate) plane_vecs: u32,
    pub(crate) k: u32,
    pub(crate) j: u32,
    pub(crate) mirror: u32,
    pub(crate) k_end: u32,
    pub(crate) pad: [u32; 2],
}

/// The pipelines of the network for one record width.
pub(crate) struct NetworkKernels {
    pub(crate) wg: u32,
    pub(crate) layout: BindLayout,
    pub(crate) local_sort: wgpu::ComputePipeline,
    pub(crate) local_merge: wgpu::ComputePipeline,
    pub(crate) global: [wgpu::ComputePipeline; MAX_FUSED_GLOBAL_STEPS as usize],
}
