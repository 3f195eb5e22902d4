//! LSD radix sort passes (shaders/radix.wgsl) over the sortable planes the key transforms
//! produce. Used by the sorter in place of the bitonic network; the encode and decode around it,
//! and so the order, stability and NaN rules, are the same.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::gpu::Gpu;
use crate::kernel::{self, Layout, ParamBlocks, Slot};
use crate::keys::KeyType;
use crate::scan::{ScanOp, Scanner};
use crate::shaders;
use crate::transfer;

/// Invocations per radix workgroup: one per histogram bin.
const RADIX_WG: u32 = 256;
/// Keys per radix tile (16 per invocation).
pub const RADIX_TILE: u32 = RADIX_WG * 16;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct RadixParams {
    n: u32,
    plane_stride: u32,
    plane: u32,
    shift: u32,
    tiles: u32,
    pad: [u32; 3],
}

struct Pipelines {
    upsweep: wgpu::ComputePipeline,
    downsweep: wgpu::ComputePipeline,
}

pub(crate) struct RadixKernels {
    subgroups: bool,
    layout: Layout,
    by_planes: Mutex<HashMap<u32, Arc<Pipelines>>>,
}

/// The digit passes of an LSD sort of keys of `key_words` u32 words: (plane, shift), least
/// significant first. Plane 0 is the key's high word, plane 1 its low word.
pub fn digit_passes(key_words: u32) -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    for plane in (0..key_words).rev() {
        for shift in [0, 8, 16, 24] {
            v.push((plane, shift));
        }
    }
    v
}

impl RadixKernels {
    pub(crate) fn new(gpu: &Gpu) -> RadixKernels {
        let layout = Layout::new(
            gpu,
            "radix",
            &[
                (0, Slot::params::<RadixParams>()),
                (1, Slot::Read),
                (2, Slot::ReadWrite),
                (3, Slot::ReadWrite),
                (4, Slot::Read),
            ],
        );
        RadixKernels {
            subgroups: gpu.subgroups().is_some(),
            layout,
            by_planes: Mutex::new(HashMap::new()),
        }
    }

    fn pipelines(&self, gpu: &Gpu, planes: u32) -> Result<Arc<Pipelines>> {
        let mut cache = self.by_planes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.get(&planes) {
            return Ok(p.clone());
        }
        let source = shaders::radix(planes, self.subgroups, RADIX_WG);
        let module = kernel::module(gpu, "radix", &source)?;
        let p = Arc::new(Pipelines {
            upsweep: kernel::pipeline(gpu, &module, "upsweep", &self.layout)?,
            downsweep: kernel::pipeline(gpu, &module, "downsweep", &self.layout)?,
        });
        cache.insert(planes, p.clone());
        Ok(p)
    }

    /// Record the digit passes sorting the `planes` planes of `records` (stride `plane_stride`
    /// words) by their first `key_words` planes. The result ends in `records` (an even number of
    /// passes). Returns the number of dispatches.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        scanner: &Scanner,
        records: &wgpu::Buffer,
        n: u32,
        plane_stride: u32,
        planes: u32,
        key_words: u32,
    ) -> Result<usize> {
        if n <= 1 {
            return Ok(0);
        }
        let pipes = self.pipelines(gpu, planes)?;
        let tiles = n.div_ceil(RADIX_TILE);
        let other = transfer::storage_buffer(gpu, "radix planes", records.size())?;
        let hist_len = 256 * tiles;
        let hist = transfer::storage_buffer(gpu, "radix histograms", hist_len as u64 * 4)?;
        let offsets = transfer::storage_buffer(gpu, "radix offsets", hist_len as u64 * 4)?;
        let passes = digit_passes(key_words);
        let mut params = ParamBlocks::new(gpu);
        let offs: Vec<u32> = passes
            .iter()
            .map(|&(plane, shift)| {
                params.push(&RadixParams {
                    n,
                    plane_stride,
                    plane,
                    shift,
                    tiles,
                    pad: [0; 3],
                })
            })
            .collect();
        let params = params.finish(gpu, "radix params");
        let there = self
            .layout
            .bind(gpu, &[&params, records, &other, &hist, &offsets]);
        let back = self
            .layout
            .bind(gpu, &[&params, &other, records, &hist, &offsets]);
        let mut dispatches = 0;
        for (i, &off) in offs.iter().enumerate() {
            let bg = if i % 2 == 0 { &there } else { &back };
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("radix upsweep"),
                    timestamp_writes: None,
                });
                kernel::dispatch(gpu, &mut pass, &pipes.upsweep, bg, &[off], tiles);
            }
            scanner.record_scan(
                gpu,
                enc,
                &hist,
                &offsets,
                hist_len,
                KeyType::U32,
                ScanOp::Add,
                false,
            )?;
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("radix downsweep"),
                    timestamp_writes: None,
                });
                kernel::dispatch(gpu, &mut pass, &pipes.downsweep, bg, &[off], tiles);
            }
            dispatches += 3;
        }
        Ok(dispatches)
    }
}
