//! Pipelines and bind groups built from each kernel's declared binding list, and the grid helper.

use crate::device::Gpu;
use crate::error::Result;

/// What one binding of a kernel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// A uniform parameter block, bound with a dynamic offset into one buffer of many blocks.
    Params { size: u64 },
    /// A whole uniform buffer (small read-only tables, e.g. stencil weights).
    Uniform,
    /// A read-only storage buffer.
    Read,
    /// A read-write storage buffer.
    ReadWrite,
}

impl Slot {
    /// The parameter-block slot for blocks of type `T`.
    pub fn params<T>() -> Slot {
        Slot::Params {
            size: std::mem::size_of::<T>() as u64,
        }
    }
}

/// A bind-group layout made from a declared binding list (binding number, kind), shared by the
/// kernels of one family so one bind group serves all of them.
pub struct BindLayout {
    label: String,
    pub layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    slots: Vec<(u32, Slot)>,
}

impl BindLayout {
    pub fn new(gpu: &Gpu, label: &str, slots: &[(u32, Slot)]) -> BindLayout {
        let entries: Vec<wgpu::BindGroupLayoutEntry> = slots
            .iter()
            .map(|&(binding, slot)| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: match slot {
                    Slot::Params { size } => wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: true,
                        min_binding_size: wgpu::BufferSize::new(size),
                    },
                    Slot::Uniform => wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    Slot::Read | Slot::ReadWrite => wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage {
                            read_only: slot == Slot::Read,
                        },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                },
                count: None,
            })
            .collect();
        let layout = gpu
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(label),
                entries: &entries,
            });
        let pipeline_layout = gpu
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        BindLayout {
            label: label.to_string(),
            layout,
            pipeline_layout,
            slots: slots.to_vec(),
        }
    }

    /// A bind group with one buffer per declared slot, in declaration order.
    pub fn bind(&self, gpu: &Gpu, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let whole: Vec<_> = buffers.iter().map(|&b| (b, 0, None)).collect();
        self.bind_ranges(gpu, &whole)
    }

    /// A bind group with one (buffer, offset, size) range per declared slot, in declaration
    /// order. A size of None binds the rest of the buffer, at most one binding's worth (a buffer
    /// kept from a job beyond one binding may be larger than a binding).
    pub fn bind_ranges(
        &self,
        gpu: &Gpu,
        ranges: &[(&wgpu::Buffer, u64, Option<u64>)],
    ) -> wgpu::BindGroup {
        assert_eq!(
            ranges.len(),
            self.slots.len(),
            "{}: one buffer per declared binding",
            self.label
        );
        let most = gpu.limits.max_storage_buffer_binding_size & !3;
        let entries: Vec<wgpu::BindGroupEntry> = self
            .slots
            .iter()
            .zip(ranges)
            .map(
                |(&(binding, slot), &(buffer, offset, size))| wgpu::BindGroupEntry {
                    binding,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer,
                        offset,
                        size: match slot {
                            Slot::Params { size } => wgpu::BufferSize::new(size),
                            Slot::Uniform => None,
                            Slot::Read | Slot::ReadWrite => match size {
                                Some(s) => wgpu::BufferSize::new(s),
                                None if buffer.size() - offset > most => {
                                    wgpu::BufferSize::new(most)
                                }
                                None => None,
                            },
                        },
                    }),
                },
            )
            .collect();
        gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&self.label),
            layout: &self.layout,
            entries: &entries,
        })
    }
}

/// Compile a shader module, turning naga/driver rejections into typed errors.
///
/// Every module is compiled without wgpu's loop bounding (`force_loop_bounding`), its other
/// runtime checks kept (bounds checks, integer division checks, zero-initialised workgroup memory).
/// Loop bounding guards against untrusted shaders looping forever by adding a counter to every
/// loop; ours are our own, and every loop in shaders/ ends by construction: constant or
/// buffer-bounded trip counts, bit masks that lose a bit a round, and waits on other workgroups
/// that give up after SPIN_LIMIT reads (shaders/common/lookback.wgsl). The counters cost a quarter of
/// the radix sort's time; the bounds checks, zero-initialisation and division checks cost about
/// 1% and stay on (BENCHMARKS.md).
pub fn module(gpu: &Gpu, label: &str, source: &str) -> Result<wgpu::ShaderModule> {
    dump_source(gpu.dump_wgsl.as_deref(), label, source);
    let desc = wgpu::ShaderModuleDescriptor {
        label: Some(label),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    };
    let mut checks = wgpu::ShaderRuntimeChecks::checked();
    checks.force_loop_bounding = false;
    gpu.checked(|| {
        // SAFETY: wgpu asks that a module without loop bounding has no infinite loop; every
        // loop of shaders/ terminates (see above), and the tests run every family on lavapipe.
        unsafe { gpu.device.create_shader_module_trusted(desc, checks) }
    })
}

/// With [`GpuOptions::dump_wgsl`](crate::GpuOptions::dump_wgsl), every composed module is also
/// written out exactly as compiled, so tools outside the process see the kernels that ran.
/// Failures to write are logged, never fatal.
fn dump_source(dir: Option<&std::path::Path>, label: &str, source: &str) {
    use std::hash::{Hash, Hasher};
    let Some(dir) = dir else {
        return;
    };
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut hasher);
    let name: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path = dir.join(format!("{name}-{:016x}.wgsl", hasher.finish()));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, source)) {
        tracing::warn!("dump_wgsl: cannot write {}: {e}", path.display());
    }
}

/// One compute pipeline: an entry point of a module with a family's layout.
pub fn pipeline(
    gpu: &Gpu,
    module: &wgpu::ShaderModule,
    entry: &str,
    layout: &BindLayout,
) -> Result<wgpu::ComputePipeline> {
    gpu.checked(|| {
        gpu.device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&layout.pipeline_layout),
                module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: gpu.pipeline_cache.as_ref().map(|c| c.cache()),
            })
    })
}

/// Record one dispatch of `groups` workgroups.
pub fn dispatch(
    gpu: &Gpu,
    pass: &mut wgpu::ComputePass<'_>,
    pipeline: &wgpu::ComputePipeline,
    bind_group: &wgpu::BindGroup,
    offsets: &[u32],
    groups: u32,
) {
    let (x, y) = grid(gpu, groups);
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, bind_group, offsets);
    pass.dispatch_workgroups(x, y, 1);
}

/// Split `groups` workgroups over x and y so neither exceeds the device's per-dimension limit;
/// kernels rebuild the linear index with `linear_workgroup` and ignore the surplus.
pub fn grid(gpu: &Gpu, groups: u32) -> (u32, u32) {
    let max = gpu.limits.max_compute_workgroups_per_dimension.max(1);
    if groups <= max {
        (groups.max(1), 1)
    } else {
        let y = groups.div_ceil(max);
        (groups.div_ceil(y), y)
    }
}

/// Many small uniform parameter blocks in one buffer, addressed by dynamic offsets.
pub struct ParamBlocks {
    stride: u64,
    bytes: Vec<u8>,
}

impl ParamBlocks {
    pub fn new(gpu: &Gpu) -> Self {
        ParamBlocks {
            stride: gpu.limits.min_uniform_buffer_offset_alignment.max(16) as u64,
            bytes: Vec::new(),
        }
    }

    /// Append one block; returns its dynamic offset.
    pub fn push<T: bytemuck::Pod>(&mut self, block: &T) -> u32 {
        let offset = self.bytes.len();
        let block = bytemuck::bytes_of(block);
        self.bytes.extend_from_slice(block);
        // the next block starts at the next multiple of the offset alignment
        let len = (block.len() as u64).div_ceil(self.stride) * self.stride;
        self.bytes.resize(offset + len as usize, 0);
        offset as u32
    }

    /// The buffer holding every block pushed so far.
    pub fn finish(&self, gpu: &Gpu, label: &str) -> wgpu::Buffer {
        let size = (self.bytes.len() as u64).max(self.stride);
        let buf = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::UNIFORM,
            mapped_at_creation: true,
        });
        buf.slice(..)
            .get_mapped_range_mut()
            .expect("mapped at creation")
            .slice(..self.bytes.len())
            .copy_from_slice(&self.bytes);
        buf.unmap();
        buf
    }
}
