//! The one place that creates instance, adapter, device and queue, and waits on the GPU.
//!
//! Everything else borrows a [`Gpu`]. Limits are the adapter's own (not wgpu's defaults, which cap
//! a binding at 128 MiB), and optional features are requested only where the adapter has them;
//! kernels then adapt to what was granted (`Gpu::subgroups`, `Gpu::timestamps`).

// Imported host memory for staging (Vulkan); elsewhere a stand-in that never offers it.
#[cfg_attr(
    not(all(
        feature = "vulkan",
        not(target_vendor = "apple"),
        not(target_arch = "wasm32")
    )),
    path = "host_memory_none.rs"
)]
pub(crate) mod host_memory;
pub(crate) mod kernel;
mod pages;
mod pinned;
mod pipeline_cache;
pub mod transfer;

pub use pinned::PinnedBuffer;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Error, Result};

/// How long any single wait on the GPU may take before it is reported as a timeout rather than a
/// hang. Generous: a 4 GiB sort on a slow software adapter can take minutes.
pub const GPU_WAIT_TIMEOUT: Duration = Duration::from_secs(600);

/// How [`Gpu::new`] picks and configures a device. The library reads no environment variable:
/// front ends fill these from their flags (the CLI also from the `GPUSORT_*` variables it
/// documents).
#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// `vulkan`, `metal`, `dx12`, `gl` or `auto` (None = auto).
    pub backend: Option<String>,
    /// A case-insensitive substring of the adapter name, or its index in [`list_adapters`].
    pub adapter: Option<String>,
    /// Force every kernel onto its non-subgroup path.
    pub no_subgroups: bool,
    /// Write every composed WGSL module to `DIR/LABEL-HASH.wgsl` as it is compiled (for tools
    /// that read the driver's register counts); None writes nothing.
    pub dump_wgsl: Option<std::path::PathBuf>,
    /// Keep compiled pipelines in this folder between runs (Vulkan; one file per adapter class,
    /// driver and gpusort version), read when the device is created and written back when the
    /// `Gpu` is dropped; None keeps none.
    pub pipeline_cache: Option<std::path::PathBuf>,
    /// Stage host<->GPU copies through wgpu's mapped buffers even where the device can import
    /// host memory (Vulkan's `VK_EXT_external_memory_host`), which is otherwise used. Both give
    /// the same bytes; this is for comparing them.
    pub no_host_import: bool,
}

impl GpuOptions {
    fn backends(&self) -> Result<wgpu::Backends> {
        Ok(
            match self
                .backend
                .as_deref()
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                None | Some("auto") => wgpu::Backends::all(),
                Some("vulkan") => wgpu::Backends::VULKAN,
                Some("metal") => wgpu::Backends::METAL,
                Some("dx12") => wgpu::Backends::DX12,
                Some("gl") => wgpu::Backends::GL,
                Some(other) => {
                    return Err(Error::InvalidInput(format!(
                        "unknown backend '{other}' (expected vulkan, metal, dx12, gl or auto)"
                    )))
                }
            },
        )
    }
}

/// Subgroup facts of the granted device, when subgroups are in use.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SubgroupInfo {
    pub min_size: u32,
    pub max_size: u32,
}

/// A short description of one adapter, for `gpusort info` and for choosing.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct AdapterSummary {
    pub index: usize,
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub subgroups: bool,
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
    pub timestamps: bool,
    pub max_buffer_size: u64,
    pub max_storage_buffer_binding_size: u64,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroups_per_dimension: u32,
}

fn summarize(index: usize, adapter: &wgpu::Adapter) -> AdapterSummary {
    describe(
        index,
        adapter.get_info(),
        &adapter.limits(),
        adapter.features(),
    )
}

fn describe(
    index: usize,
    info: wgpu::AdapterInfo,
    limits: &wgpu::Limits,
    features: wgpu::Features,
) -> AdapterSummary {
    AdapterSummary {
        index,
        name: info.name,
        backend: format!("{:?}", info.backend),
        device_type: format!("{:?}", info.device_type),
        driver: info.driver,
        driver_info: info.driver_info,
        subgroups: features.contains(wgpu::Features::SUBGROUP),
        subgroup_min_size: info.subgroup_min_size,
        subgroup_max_size: info.subgroup_max_size,
        timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
        max_buffer_size: limits.max_buffer_size,
        max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
        max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
        max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
        max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
    }
}

/// wgpu's default instance flags less `VALIDATION_INDIRECT_CALL`: that check adds a dispatch and
/// two barriers before every indirect dispatch, and the radix sort's indirect sizes are written by
/// its own kernels, bounded by the device's limit.
fn instance_flags() -> wgpu::InstanceFlags {
    wgpu::InstanceFlags::default() - wgpu::InstanceFlags::VALIDATION_INDIRECT_CALL
}

fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    desc.flags = instance_flags();
    wgpu::Instance::new(desc)
}

/// `auto` looks at the primary backends (Vulkan, Metal, DX12) first and at GL only when they
/// offer nothing: probing GL on a headless machine prints EGL noise and GL compute is the weakest.
fn enumerate(options: &GpuOptions) -> Result<Vec<wgpu::Adapter>> {
    let backends = options.backends()?;
    let auto = backends == wgpu::Backends::all();
    let first = if auto {
        wgpu::Backends::PRIMARY
    } else {
        backends
    };
    let mut adapters = pollster::block_on(instance(first).enumerate_adapters(first));
    if adapters.is_empty() && auto {
        adapters =
            pollster::block_on(instance(wgpu::Backends::GL).enumerate_adapters(wgpu::Backends::GL));
    }
    Ok(adapters)
}

/// The last listing's adapters, handed to the next [`Gpu::new`] with the same backends: a front
/// end that lists adapters to decide where a job runs and then opens one enumerates once (each
/// enumeration creates an instance and asks every driver: tens of milliseconds). Taken, not
/// shared, so each enumeration opens at most one device.
static LISTED: Mutex<Option<(wgpu::Backends, Vec<wgpu::Adapter>)>> = Mutex::new(None);

/// Every adapter wgpu can see with these options, in enumeration order.
pub fn list_adapters(options: &GpuOptions) -> Result<Vec<AdapterSummary>> {
    let adapters = enumerate(options)?;
    let summaries = adapters
        .iter()
        .enumerate()
        .map(|(i, a)| summarize(i, a))
        .collect();
    *LISTED.lock().unwrap_or_else(|p| p.into_inner()) = Some((options.backends()?, adapters));
    Ok(summaries)
}

/// The adapters of the last listing with these options' backends, else a new enumeration.
fn listed_or_enumerate(options: &GpuOptions) -> Result<Vec<wgpu::Adapter>> {
    let backends = options.backends()?;
    let mut listed = LISTED.lock().unwrap_or_else(|p| p.into_inner());
    match listed.take() {
        Some((b, adapters)) if b == backends => Ok(adapters),
        _ => {
            drop(listed);
            enumerate(options)
        }
    }
}

/// Preference order: real GPUs first (discrete, then integrated, then virtual), then software
/// adapters such as lavapipe or WARP. Ties keep enumeration order.
fn preference(device_type: wgpu::DeviceType) -> u8 {
    match device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

fn choose(adapters: Vec<wgpu::Adapter>, selector: Option<&str>) -> Result<(usize, wgpu::Adapter)> {
    if adapters.is_empty() {
        return Err(Error::NoAdapter(String::new()));
    }
    let mut indexed: Vec<(usize, wgpu::Adapter)> = adapters.into_iter().enumerate().collect();
    if let Some(sel) = selector {
        // a name or index that matches nothing is the user's mistake: say what there is
        let there_are = || {
            indexed
                .iter()
                .map(|(i, a)| format!("[{i}] {}", a.get_info().name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Ok(i) = sel.parse::<usize>() {
            let list = there_are();
            return indexed.into_iter().find(|(j, _)| *j == i).ok_or_else(|| {
                Error::InvalidInput(format!("adapter {i}: no such adapter; there are {list}"))
            });
        }
        let needle = sel.to_ascii_lowercase();
        let list = there_are();
        indexed.retain(|(_, a)| a.get_info().name.to_ascii_lowercase().contains(&needle));
        if indexed.is_empty() {
            return Err(Error::InvalidInput(format!(
                "adapter {sel:?}: no adapter's name contains it; there are {list}"
            )));
        }
    }
    indexed.sort_by_key(|(i, a)| (preference(a.get_info().device_type), *i));
    Ok(indexed.swap_remove(0))
}

/// The device context every kernel borrows.
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterSummary,
    pub limits: wgpu::Limits,
    pub features: wgpu::Features,
    subgroups: Option<SubgroupInfo>,
    lost: Arc<Mutex<Option<String>>>,
    pub(crate) dump_wgsl: Option<std::path::PathBuf>,
    /// The staging ring every host<->GPU copy goes through (crate::device::transfer).
    pub(crate) staging: Mutex<crate::device::transfer::Ring>,
    /// Compiled pipelines kept between runs, where asked for (`GpuOptions::pipeline_cache`).
    pub(crate) pipeline_cache: Option<pipeline_cache::PipelineCache>,
    /// The device's host-memory import, where it has one (device::host_memory).
    pub(crate) host_import: Option<host_memory::HostImport>,
    /// Whether the staging ring uses it (`Gpu::set_host_memory_import`).
    import_on: std::sync::atomic::AtomicBool,
    /// This context's number in the process (wgpu's devices do not compare reliably).
    pub(crate) id: u64,
}

/// The next [`Gpu`]'s `id`.
static NEXT_GPU_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn next_gpu_id() -> u64 {
    NEXT_GPU_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Drop for Gpu {
    fn drop(&mut self) {
        self.save_pipeline_cache();
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("adapter", &self.adapter.name)
            .field("subgroups", &self.subgroups)
            .finish()
    }
}

impl AdapterSummary {
    /// Whether this is a real GPU, not a CPU implementation (lavapipe, llvmpipe, WARP).
    pub fn is_hardware(&self) -> bool {
        self.device_type != format!("{:?}", wgpu::DeviceType::Cpu)
    }
}

impl Gpu {
    /// Write the pipelines compiled so far to the pipeline cache's file, if any were added
    /// (dropping the `Gpu` does this too; a process that ends without dropping it calls this
    /// first). A failure is a warning: the next run compiles again.
    pub fn save_pipeline_cache(&self) {
        if let Some(cache) = &self.pipeline_cache {
            if let Err(e) = cache.save() {
                tracing::warn!("could not save the pipeline cache: {e}");
            }
        }
    }

    /// Whether the adapter is a CPU implementation (lavapipe, llvmpipe, WARP).
    pub fn is_software(&self) -> bool {
        !self.adapter.is_hardware()
    }

    /// Pick an adapter and create the device with the adapter's own limits and the optional
    /// features gpusort can use.
    pub fn new(options: &GpuOptions) -> Result<Gpu> {
        let t = std::time::Instant::now();
        let (index, adapter) = choose(listed_or_enumerate(options)?, options.adapter.as_deref())?;
        let found_s = t.elapsed().as_secs_f64();
        let summary = summarize(index, &adapter);
        let available = adapter.features();
        let wanted = wgpu::Features::SUBGROUP
            | wgpu::Features::SUBGROUP_BARRIER
            | wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
            | wgpu::Features::SHADER_F64
            | if options.pipeline_cache.is_some() {
                wgpu::Features::PIPELINE_CACHE
            } else {
                wgpu::Features::empty()
            };
        let mut features = available & wanted;
        if options.no_subgroups {
            features.remove(wgpu::Features::SUBGROUP | wgpu::Features::SUBGROUP_BARRIER);
        }
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("gpusort"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        // with the host-memory import where the device offers it, else as wgpu opens it
        let (device, queue, host_import) = match host_memory::HostImport::open(&adapter, &desc) {
            Some((device, queue, import)) => (device, queue, Some(import)),
            None => {
                let (device, queue) = pollster::block_on(adapter.request_device(&desc))
                    .map_err(|e| Error::RequestDevice(e.to_string()))?;
                (device, queue, None)
            }
        };

        let lost = Arc::new(Mutex::new(None));
        let lost_flag = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            *lost_flag.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(format!("{reason:?}: {msg}"));
        });
        // Errors outside an error scope would otherwise panic inside wgpu; they are collected
        // through scopes in `Gpu::checked`, so here they are only logged.
        device.on_uncaptured_error(Arc::new(|e: wgpu::Error| {
            tracing::error!("uncaptured wgpu error: {e}")
        }));

        let subgroups = features
            .contains(wgpu::Features::SUBGROUP)
            .then_some(SubgroupInfo {
                min_size: summary.subgroup_min_size,
                max_size: summary.subgroup_max_size,
            });
        let lanes = match &subgroups {
            Some(s) => format!("subgroups of {}..{} lanes", s.min_size, s.max_size),
            None => "no subgroups".to_string(),
        };
        // where a start's time goes: the driver's instance and adapter enumeration, then the
        // device's creation
        tracing::info!(
            "GPU ready: {} through {}, {lanes}; adapters found in {found_s:.3} s, device opened in {:.3} s",
            summary.name,
            summary.backend,
            t.elapsed().as_secs_f64() - found_s
        );
        let pipeline_cache = options.pipeline_cache.as_deref().and_then(|folder| {
            pipeline_cache::PipelineCache::open(&device, &adapter.get_info(), &summary, folder)
        });
        Ok(Gpu {
            device,
            queue,
            adapter: summary,
            limits,
            features,
            subgroups,
            lost,
            dump_wgsl: options.dump_wgsl.clone(),
            staging: Mutex::new(Default::default()),
            pipeline_cache,
            host_import,
            import_on: (!options.no_host_import).into(),
            id: next_gpu_id(),
        })
    }

    /// A context on a device the caller created (a renderer's, say), so that gpusort records into
    /// the caller's encoders on the caller's buffers. `info` is the adapter's
    /// (`adapter.get_info()`), where the caller has it: its subgroup sizes size the subgroup
    /// kernels (without it they assume any size from 4 to 128 lanes) and its name appears in
    /// messages. Kernels use the
    /// features and limits the device was created with: subgroups where `SUBGROUP` was granted,
    /// GPU timestamps where `TIMESTAMP_QUERY` was, bindings as large as its limits allow (wgpu's
    /// defaults cap one at 128 MiB: request the adapter's limits for larger sorts). The radix
    /// sort needs 9 storage buffers per shader stage (wgpu's default is 8); with fewer,
    /// `Algorithm::Auto` sorts with the bitonic network.
    ///
    /// gpusort sets no callbacks on a device it did not create: device loss and uncaptured
    /// errors stay the caller's to handle, and gpusort's own calls still report theirs through
    /// error scopes ([`Gpu::checked`]).
    ///
    /// Fails where the device grants fewer than 8 storage buffers per shader stage (the
    /// compaction kernels bind 6, the scan 4) or 256 invocations per workgroup.
    pub fn from_device(
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: Option<&wgpu::AdapterInfo>,
    ) -> Result<Gpu> {
        let limits = device.limits();
        let features = device.features();
        if limits.max_storage_buffers_per_shader_stage < 8
            || limits.max_compute_invocations_per_workgroup < 256
        {
            return Err(Error::InvalidInput(format!(
                "gpusort needs a device with at least 8 storage buffers per shader stage and 256 \
                 invocations per workgroup; this one grants {} and {} (request \
                 wgpu::Limits::default() or the adapter's limits)",
                limits.max_storage_buffers_per_shader_stage,
                limits.max_compute_invocations_per_workgroup
            )));
        }
        let mut adapter = match info {
            Some(info) => describe(0, info.clone(), &limits, features),
            None => AdapterSummary {
                index: 0,
                name: "the caller's device".into(),
                backend: "?".into(),
                device_type: format!("{:?}", wgpu::DeviceType::Other),
                driver: String::new(),
                driver_info: String::new(),
                subgroups: features.contains(wgpu::Features::SUBGROUP),
                subgroup_min_size: 0,
                subgroup_max_size: 0,
                timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
                max_buffer_size: limits.max_buffer_size,
                max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
                max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
                max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
                max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            },
        };
        // the portable range where the adapter reports no sizes
        if adapter.subgroup_min_size == 0 || adapter.subgroup_max_size == 0 {
            adapter.subgroup_min_size = 4;
            adapter.subgroup_max_size = 128;
        }
        let subgroups = features
            .contains(wgpu::Features::SUBGROUP)
            .then_some(SubgroupInfo {
                min_size: adapter.subgroup_min_size,
                max_size: adapter.subgroup_max_size,
            });
        let host_import = host_memory::HostImport::of(&device);
        Ok(Gpu {
            device,
            queue,
            adapter,
            limits,
            features,
            subgroups,
            lost: Arc::new(Mutex::new(None)),
            dump_wgsl: None,
            staging: Mutex::new(Default::default()),
            pipeline_cache: None,
            host_import,
            import_on: true.into(),
            id: next_gpu_id(),
        })
    }

    /// Subgroup sizes when the subgroup kernels are in use; None selects the workgroup-memory paths.
    pub fn subgroups(&self) -> Option<SubgroupInfo> {
        self.subgroups
    }

    /// Whether host<->GPU copies stage through imported host memory (Vulkan's
    /// `VK_EXT_external_memory_host`: the copy engine reads and writes plain host pages) rather
    /// than wgpu's mapped buffers.
    pub fn host_memory_import(&self) -> bool {
        self.host_import.is_some() && self.import_on.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the device can import host memory at all.
    pub fn can_import_host_memory(&self) -> bool {
        self.host_import.is_some()
    }

    /// Stage through imported host memory (where the device can) or through mapped buffers from
    /// the next copy on: waits for the copies in flight and drops the staging ring.
    pub fn set_host_memory_import(&self, on: bool) -> Result<()> {
        let mut ring = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        self.wait()?;
        *ring = Default::default();
        self.import_on
            .store(on, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Whether GPU timestamps can be written inside passes (for benchmarks).
    pub fn timestamps(&self) -> bool {
        self.features.contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    /// Largest number of bytes one storage binding (and so one kernel's view of a buffer) may hold.
    pub fn max_binding(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// Run `f` inside validation and out-of-memory error scopes, turning what they catch into
    /// typed errors instead of panics.
    pub fn checked<T>(&self, f: impl FnOnce() -> T) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let v = pollster::block_on(validation.pop());
        let o = pollster::block_on(oom.pop());
        if let Some(e) = o.or(v) {
            return Err(e.into());
        }
        self.check_lost()?;
        Ok(out)
    }

    fn check_lost(&self) -> Result<()> {
        match self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            Some(msg) => Err(Error::DeviceLost(msg)),
            None => Ok(()),
        }
    }

    /// Block until all submitted work is done, with a timeout.
    pub fn wait(&self) -> Result<()> {
        self.poll_wait(None)
    }

    /// Block until the work of one submission is done (and the maps it freed are called back).
    pub fn wait_for(&self, submission: wgpu::SubmissionIndex) -> Result<()> {
        self.poll_wait(Some(submission))
    }

    fn poll_wait(&self, submission_index: Option<wgpu::SubmissionIndex>) -> Result<()> {
        match self.device.poll(wgpu::PollType::Wait {
            submission_index,
            timeout: Some(GPU_WAIT_TIMEOUT),
        }) {
            Ok(_) => self.check_lost(),
            Err(wgpu::PollError::Timeout) => Err(Error::Timeout(GPU_WAIT_TIMEOUT)),
            Err(e) => Err(Error::DeviceLost(e.to_string())),
        }
    }
}
