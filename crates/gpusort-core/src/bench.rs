//! Measuring GPU work, as `gpusort bench` and `gpusort tune` do: [`GpuTimer`] times what a closure
//! records (GPU timestamps written around it where the device has
//! TIMESTAMP_QUERY_INSIDE_ENCODERS, else the wall clock around submit and wait, and
//! [`TimeSource`] says which), [`Stats`] summarises the samples, and the baselines a result is
//! read against: [`CopyKernel`] (the device's achievable bandwidth, measured in the same run) and
//! [`PlainBitonic`] (METHODS.md method 2). Renderer authors can time their own passes the same way.
//! Reproducible keys: [`random_u32`], [`random_unit_f32`].
//!
//! A public module rather than one behind a cargo feature: the library's own tuner (`tune`) times
//! with it, so it is always built.

use std::time::Instant;

use crate::device::kernel::{self, BindLayout, ParamBlocks, Slot};
use crate::device::transfer;
use crate::device::Gpu;
use crate::error::Result;
use crate::wgsl;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum TimeSource {
    GpuTimestamps,
    WallClock,
}

impl std::fmt::Display for TimeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeSource::GpuTimestamps => "GPU timestamps",
            TimeSource::WallClock => "the wall clock",
        })
    }
}

/// Times recorded GPU work.
pub struct GpuTimer {
    queries: Option<(wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer)>,
    period_ns: f64,
}

impl GpuTimer {
    pub fn new(gpu: &Gpu) -> GpuTimer {
        let usable = gpu.features.contains(
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
        );
        let queries = usable.then(|| {
            let set = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("bench timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamp resolve"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let read = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamp read"),
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            (set, resolve, read)
        });
        GpuTimer {
            queries,
            period_ns: gpu.queue.get_timestamp_period() as f64,
        }
    }

    pub fn source(&self) -> TimeSource {
        if self.queries.is_some() {
            TimeSource::GpuTimestamps
        } else {
            TimeSource::WallClock
        }
    }

    /// Seconds the GPU spent on what `record` records (`prepare` runs first, untimed).
    pub fn time(
        &self,
        gpu: &Gpu,
        prepare: impl FnOnce(&mut wgpu::CommandEncoder),
        record: impl FnOnce(&mut wgpu::CommandEncoder) -> Result<()>,
    ) -> Result<f64> {
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        prepare(&mut enc);
        if let Some((set, _, _)) = &self.queries {
            enc.write_timestamp(set, 0);
        }
        record(&mut enc)?;
        if let Some((set, resolve, read)) = &self.queries {
            enc.write_timestamp(set, 1);
            enc.resolve_query_set(set, 0..2, resolve, 0);
            enc.copy_buffer_to_buffer(resolve, 0, read, 0, 16);
        }
        let start = Instant::now();
        gpu.queue.submit([enc.finish()]);
        gpu.wait()?;
        let wall = start.elapsed().as_secs_f64();
        match &self.queries {
            Some((_, _, read)) => self.read_ticks(gpu, read),
            None => Ok(wall),
        }
    }

    fn read_ticks(&self, gpu: &Gpu, read: &wgpu::Buffer) -> Result<f64> {
        let (tx, rx) = std::sync::mpsc::channel();
        read.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        gpu.wait()?;
        rx.recv_timeout(crate::device::GPU_WAIT_TIMEOUT)
            .map_err(|_| crate::Error::Timeout(crate::device::GPU_WAIT_TIMEOUT))?
            .map_err(|e| crate::Error::Map(e.to_string()))?;
        let ticks: [u64; 2] = {
            let view = read
                .get_mapped_range(..)
                .map_err(|e| crate::Error::Map(e.to_string()))?;
            bytemuck::pod_read_unaligned(&view[..16])
        };
        read.unmap();
        Ok(ticks[1].saturating_sub(ticks[0]) as f64 * self.period_ns * 1e-9)
    }
}

/// Median and spread of repeated measurements, and every sample (in the order measured).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub runs: usize,
    pub samples_s: Vec<f64>,
}

impl Stats {
    pub fn of(samples_s: Vec<f64>) -> Stats {
        let mut samples = samples_s.clone();
        samples.sort_by(f64::total_cmp);
        let n = samples.len().max(1);
        Stats {
            median_s: samples.get(n / 2).copied().unwrap_or(0.0),
            min_s: samples.first().copied().unwrap_or(0.0),
            max_s: samples.last().copied().unwrap_or(0.0),
            runs: samples.len(),
            samples_s,
        }
    }
}

/// A vec4 copy kernel: the device's achievable bandwidth in the same run.
pub struct CopyKernel {
    layout: BindLayout,
    pipeline: wgpu::ComputePipeline,
}

impl CopyKernel {
    pub const WG: u32 = 256;

    pub fn new(gpu: &Gpu) -> Result<CopyKernel> {
        let module = kernel::module(gpu, "copy", &wgsl::compose(wgsl::COPY, &[("WG", Self::WG)]))?;
        let layout = BindLayout::new(gpu, "copy", &[(0, Slot::Read), (1, Slot::ReadWrite)]);
        let pipeline = kernel::pipeline(gpu, &module, "copy_vec4", &layout)?;
        Ok(CopyKernel { layout, pipeline })
    }

    /// Record a copy of `src` into `dst` (same size, a multiple of 16 bytes): one dispatch a
    /// piece of at most one binding, so buffers beyond one binding are copied whole.
    pub fn record(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        dst: &wgpu::Buffer,
    ) {
        let align = gpu.limits.min_storage_buffer_offset_alignment.max(16) as u64;
        let piece = (gpu.max_binding() / align * align).max(align);
        let mut pass = enc.begin_compute_pass(&Default::default());
        let mut at = 0;
        while at < dst.size() {
            let len = piece.min(dst.size() - at);
            let bg = self
                .layout
                .bind_ranges(gpu, &[(src, at, Some(len)), (dst, at, Some(len))]);
            let vecs = (len / 16) as u32;
            kernel::dispatch(
                gpu,
                &mut pass,
                &self.pipeline,
                &bg,
                &[],
                vecs.div_ceil(Self::WG),
            );
            at += len;
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PlainParams {
    k: u32,
    j: u32,
    pad: [u32; 2],
}

/// METHODS.md method 2: one dispatch per (k, j) step, scalar comparators, power-of-two input.
pub struct PlainBitonic {
    layout: BindLayout,
    pipeline: wgpu::ComputePipeline,
}

impl PlainBitonic {
    pub const WG: u32 = 256;

    pub fn new(gpu: &Gpu) -> Result<PlainBitonic> {
        let module = kernel::module(
            gpu,
            "plain bitonic",
            &wgsl::compose(wgsl::BITONIC_PLAIN, &[("WG", Self::WG)]),
        )?;
        let layout = BindLayout::new(
            gpu,
            "plain bitonic",
            &[(0, Slot::params::<PlainParams>()), (1, Slot::ReadWrite)],
        );
        let pipeline = kernel::pipeline(gpu, &module, "plain_step", &layout)?;
        Ok(PlainBitonic { layout, pipeline })
    }

    /// Record a sort of `keys` (a power-of-two number of u32); returns the dispatch count.
    pub fn record(&self, gpu: &Gpu, enc: &mut wgpu::CommandEncoder, keys: &wgpu::Buffer) -> usize {
        let n = (keys.size() / 4) as u32;
        let mut params = ParamBlocks::new(gpu);
        let mut offsets = Vec::new();
        let mut k = 2;
        while k <= n {
            let mut j = k / 2;
            while j > 0 {
                offsets.push(params.push(&PlainParams { k, j, pad: [0; 2] }));
                j /= 2;
            }
            k *= 2;
        }
        let pbuf = params.finish(gpu, "plain params");
        let bg = self.layout.bind(gpu, &[&pbuf, keys]);
        let mut pass = enc.begin_compute_pass(&Default::default());
        for &o in &offsets {
            kernel::dispatch(
                gpu,
                &mut pass,
                &self.pipeline,
                &bg,
                &[o],
                n.div_ceil(Self::WG),
            );
        }
        offsets.len()
    }
}

/// `n` pseudo-random u32 (xorshift; reproducible from `seed`).
pub fn random_u32(n: usize, seed: u64) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 16) as u32
        })
        .collect()
}

/// `n` pseudo-random f32 in [0, 1).
pub fn random_unit_f32(n: usize, seed: u64) -> Vec<f32> {
    random_u32(n, seed)
        .into_iter()
        .map(|x| (x >> 8) as f32 / (1u32 << 24) as f32)
        .collect()
}

/// A random u32 buffer and a pristine copy to restore it from between runs.
pub fn random_u32_buffers(gpu: &Gpu, n: usize, seed: u64) -> Result<(wgpu::Buffer, wgpu::Buffer)> {
    masked_u32_buffers(gpu, n, seed, u32::MAX)
}

/// The same with each key ANDed with `mask` (fewer distinct keys, or digits the same in every key).
pub fn masked_u32_buffers(
    gpu: &Gpu,
    n: usize,
    seed: u64,
    mask: u32,
) -> Result<(wgpu::Buffer, wgpu::Buffer)> {
    let data: Vec<u32> = random_u32(n, seed).into_iter().map(|k| k & mask).collect();
    let pristine = transfer::buffer_from(gpu, "bench pristine", &data)?;
    let work = transfer::storage_buffer(gpu, "bench work", (n * 4) as u64)?;
    Ok((pristine, work))
}
