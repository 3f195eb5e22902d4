//! Sorts: the [`Sorter`] facade over the vectorised bitonic network ([`bitonic`], for small and
//! segmented sorts) and the radix sort ([`radix`], from about 2^18 keys on a hardware GPU), and
//! sorts larger than memory ([`external`]). Every sort orders keys as NumPy does (NaN last,
//! -0.0 before +0.0) and is stable where values or a permutation are asked for.
//!
//! A bitonic sort encodes the keys into u32 planes (shaders/keys.wgsl), runs the planned passes
//! of shaders/bitonic.wgsl and decodes back; with values or a permutation the original index is
//! the last plane of every record, so equal keys keep their order.
//!
//! Recording into your own encoder, on your own buffer (`STORAGE | COPY_DST`, whole 16 bytes):
//!
//! ```
//! use gpusort_core::device::transfer;
//! use gpusort_core::{Gpu, GpuOptions, KeyType, SortJob, SortOrder, Sorter};
//!
//! # fn main() -> gpusort_core::Result<()> {
//! let gpu = Gpu::new(&GpuOptions::default())?;
//! let keys: Vec<u64> = (0..5000u64).map(|i| i * 7919 % 5003).collect();
//! let buffer = transfer::buffer_from(&gpu, "keys", &keys)?;
//! let sorter = Sorter::new(&gpu)?;
//! let mut encoder = gpu.device.create_command_encoder(&Default::default());
//! let job = SortJob {
//!     key_type: KeyType::U64,
//!     order: SortOrder { descending: true, segment_size: None },
//!     keys: &buffer,
//!     n: keys.len() as u32,
//!     values: None,
//!     permutation: None,
//! };
//! sorter.record(&gpu, &mut encoder, &job)?;
//! gpu.queue.submit([encoder.finish()]);
//! let sorted: Vec<u64> = transfer::read_vec(&gpu, &buffer, keys.len())?;
//! assert!(sorted.windows(2).all(|w| w[0] >= w[1]));
//! # Ok(())
//! # }
//! ```

pub mod bitonic;
pub(crate) mod bitonic_wgsl;
pub mod external;
pub(crate) mod merge;
pub mod plan;
pub mod radix;
pub(crate) mod radix_layout;
pub(crate) mod radix_wgsl;
mod tuning;

pub use tuning::SortTuning;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::device::kernel::{self, BindLayout, ParamBlocks, Slot};
use crate::device::transfer;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::{KeyType, SortKey, SortOrder};
use crate::wgsl;
pub use bitonic::{method_host_syncs, BitonicPlan, Pass, MAX_FUSED_GLOBAL_STEPS};
use bitonic::{BitonicParams, NetworkKernels};

/// Which sort runs between the key encode and decode. Both give the same result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Algorithm {
    /// The faster one for the input and device, as measured ([`SortTuning::radix_from`]).
    #[default]
    Auto,
    Bitonic,
    Radix,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct KeyParams {
    n: u32,
    plane_stride: u32,
    kind: u32,
    descending: u32,
    seg_size: u32,
    flags: u32,
    pad: [u32; 2],
}

const ELEMENTWISE_WG: u32 = 256;

struct KeyKernels {
    codec_layout: BindLayout,
    encode: wgpu::ComputePipeline,
    decode: wgpu::ComputePipeline,
    gather_layout: BindLayout,
    gather: wgpu::ComputePipeline,
    segment_of: wgpu::ComputePipeline,
}

/// What a recorded sort did, for reports and for checking against the method's formula.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SortStats {
    pub n: u32,
    pub planes: u32,
    pub tile: u32,
    /// Dispatches of the sorting network (host-ordered synchronisation points).
    pub network_dispatches: usize,
    /// Of those, single global-memory passes.
    pub global_dispatches: usize,
    /// Encode, decode and gather dispatches around the network.
    pub codec_dispatches: usize,
    /// The algorithm that ran (`Auto` resolved).
    pub algorithm: Algorithm,
    /// The radix sort's lowest digit pass ran as the unstable sweep (keys-only sorts over every
    /// key bit; unless that digit is the same in every key).
    pub radix_unstable_first: bool,
    /// The radix sort recorded its keys-only MSD path (32-bit keys over every bit, large enough;
    /// the GPU falls back to the LSD passes where a 16-bit bucket is too large for it).
    pub radix_msd: bool,
    /// The radix sort's job exceeded one storage binding, so each of its arrays was bound as
    /// two ranges of its buffer (false for smaller jobs and the bitonic network).
    pub radix_two_bindings: bool,
    /// Wall-clock split of a host sort: upload, GPU work (submit to done), download (seconds).
    pub upload_s: f64,
    pub gpu_s: f64,
    pub download_s: f64,
}

/// A sort of GPU-resident keys, recorded into a caller's encoder.
///
/// Every buffer needs `BufferUsages::STORAGE | BufferUsages::COPY_DST` and at least its data's
/// size rounded up to whole 16 bytes (`device::transfer::buffer_size`): the kernels read vec4s.
#[derive(Clone, Copy)]
pub struct SortJob<'a> {
    pub key_type: KeyType,
    pub order: SortOrder,
    /// `n` keys of `key_type` (8 bytes each for 64-bit types); sorted in place.
    pub keys: &'a wgpu::Buffer,
    pub n: u32,
    /// Optional u32 payload of `n` values, permuted in place along with the keys (stable).
    pub values: Option<&'a wgpu::Buffer>,
    /// Optional output for the permutation: `perm[i]` is the input position of output `i`.
    pub permutation: Option<&'a wgpu::Buffer>,
}

/// A sort of host keys ([`Sorter::sort_host`], `multi::sort::sort_host`): what it does besides
/// sorting the keys in place. The default: keys only, ascending.
#[derive(Debug, Default)]
pub struct HostSort<'a> {
    /// A u32 payload as long as the keys, reordered with them (stable).
    pub values: Option<&'a mut [u32]>,
    /// Return the stable sorting permutation: `perm[i]` is the input position of output `i`.
    pub permutation: bool,
    pub order: SortOrder,
}

/// One key word of a lexicographic argsort ([`Sorter::argsort_words`]): unsigned, so that the
/// words' order is the rows' order (packing signs, floats and directions is the caller's).
#[derive(Clone, Copy, Debug)]
pub enum KeyWord<'a> {
    U32(&'a [u32]),
    U64(&'a [u64]),
}

impl KeyWord<'_> {
    pub fn len(&self) -> usize {
        match self {
            KeyWord::U32(w) => w.len(),
            KeyWord::U64(w) => w.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn key_type(&self) -> KeyType {
        match self {
            KeyWord::U32(_) => KeyType::U32,
            KeyWord::U64(_) => KeyType::U64,
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            KeyWord::U32(w) => bytemuck::cast_slice(w),
            KeyWord::U64(w) => bytemuck::cast_slice(w),
        }
    }
}

/// Builds pipelines once; records sorts of GPU buffers, or sorts host slices.
pub struct Sorter {
    networks: Mutex<HashMap<u32, Arc<NetworkKernels>>>,
    keys: KeyKernels,
    piece_limit: Option<usize>,
    algorithm: Algorithm,
    radix: crate::sort::radix::RadixKernels,
    key_bits: Option<std::ops::Range<u32>>,
}

impl Sorter {
    pub fn new(gpu: &Gpu) -> Result<Sorter> {
        let params = Slot::params::<KeyParams>();
        let module = kernel::module(
            gpu,
            "keys",
            &wgsl::compose_with(wgsl::KEYS, &[("WG", ELEMENTWISE_WG)], &[wgsl::KEY_ORDER]),
        )?;
        let codec_layout = BindLayout::new(
            gpu,
            "key codec",
            &[
                (0, params),
                (1, Slot::ReadWrite),
                (2, Slot::ReadWrite),
                (3, Slot::ReadWrite),
            ],
        );
        let gather_layout = BindLayout::new(
            gpu,
            "gather values",
            &[
                (0, params),
                (3, Slot::ReadWrite),
                (4, Slot::ReadWrite),
                (5, Slot::ReadWrite),
            ],
        );
        let keys = KeyKernels {
            encode: kernel::pipeline(gpu, &module, "encode_keys", &codec_layout)?,
            decode: kernel::pipeline(gpu, &module, "decode_keys", &codec_layout)?,
            gather: kernel::pipeline(gpu, &module, "gather_values", &gather_layout)?,
            segment_of: kernel::pipeline(gpu, &module, "segment_of", &gather_layout)?,
            codec_layout,
            gather_layout,
        };
        Ok(Sorter {
            networks: Mutex::new(HashMap::new()),
            keys,
            piece_limit: None,
            algorithm: Algorithm::Auto,
            radix: crate::sort::radix::RadixKernels::new(gpu, SortTuning::default()),
            key_bits: None,
        })
    }

    /// Sort on the bits `bits` of the sortable key only (the key itself for unsigned keys; after
    /// the order-preserving transform for signed and float keys, and for descending sorts), as
    /// CUB's begin_bit/end_bit do: keys equal on those bits keep their input order. Radix only:
    /// `Auto` then always picks it, and an explicit `Bitonic` is refused.
    pub fn with_key_bits(mut self, bits: std::ops::Range<u32>) -> Self {
        self.key_bits = Some(bits);
        self
    }

    /// The key-bit range sorts are limited to, if any.
    pub fn key_bits(&self) -> Option<std::ops::Range<u32>> {
        self.key_bits.clone()
    }

    /// The key bits a radix sort of `key_type` sorts on: the range asked for, else every bit.
    fn key_bits_of(&self, key_type: KeyType) -> std::ops::Range<u32> {
        let width = 8 * key_type.size() as u32;
        self.key_bits.clone().unwrap_or(0..width)
    }

    /// This sorter with `tuning` (checked: a field out of range is an error). Pipelines are
    /// built again on first use.
    pub fn with_tuning(mut self, gpu: &Gpu, tuning: SortTuning) -> Result<Self> {
        self.radix = crate::sort::radix::RadixKernels::new(gpu, tuning.checked()?);
        Ok(self)
    }

    /// The tuning this sorter's kernels are built with.
    pub fn tuning(&self) -> SortTuning {
        self.radix.tuning()
    }

    /// How the radix MSD path of the last sort recorded went, once that sort has run on the GPU:
    /// None where it did not take the MSD path (reads a word back, so it waits for the GPU).
    pub fn radix_msd_outcome(&self, gpu: &Gpu) -> Result<Option<crate::sort::radix::MsdOutcome>> {
        self.radix.last_msd_outcome(gpu)
    }

    #[cfg(feature = "test-hooks")]
    /// Which LSD passes the last radix sort ran (bit p: pass p), once it has run on the GPU.
    pub fn radix_lsd_passes(&self, gpu: &Gpu) -> Result<u32> {
        self.radix.last_lsd_passes(gpu)
    }

    #[cfg(feature = "test-hooks")]
    /// Keys per radix sweep tile (invocations per workgroup times keys per invocation) of sorts
    /// without or with a payload.
    pub fn radix_tile(&self, payload: bool) -> u32 {
        self.radix.tile(payload)
    }

    #[cfg(feature = "test-hooks")]
    /// The radix sort's unstable sweep's tile: on the MSD path also the most keys one 16-bit
    /// bucket may hold before the GPU falls back to the LSD passes.
    pub fn radix_msd_tile(&self) -> u32 {
        self.radix.msd_tile()
    }

    /// GPU memory the radix sort keeps between sorts: its alternate key and payload buffers and
    /// look-back state, each as large as the largest sort so far (about 4 bytes a key, 8 for
    /// 64-bit keys, and 4 more with a payload). Kept so that repeated sorts allocate nothing.
    pub fn radix_scratch_bytes(&self) -> u64 {
        self.radix.scratch_bytes()
    }

    /// Free what [`Self::radix_scratch_bytes`] counts (after one large sort, say); the next radix
    /// sort allocates again. Sorts already recorded keep what they use until they have run.
    pub fn release_radix_scratch(&self) {
        self.radix.release_scratch()
    }

    #[cfg(feature = "test-hooks")]
    /// Digits a word of the radix rank tables this sorter's sweeps use (1 or 2).
    pub fn radix_counters_a_word(&self) -> u32 {
        self.radix.counters_a_word()
    }

    /// Sort with `algorithm` (default: `Auto`).
    pub fn with_algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// The algorithm a sort of `n` keys of `key_type` in `order` runs with on `gpu`; `payload`:
    /// the sort carries values or a permutation.
    pub fn algorithm_for(
        &self,
        gpu: &Gpu,
        n: u32,
        key_type: KeyType,
        order: SortOrder,
        payload: bool,
    ) -> Algorithm {
        match self.algorithm {
            Algorithm::Auto if self.key_bits.is_some() => Algorithm::Radix,
            Algorithm::Auto => {
                let software = gpu.is_software();
                let tuning = self.radix.tuning();
                let from = match (key_type.is_wide(), payload) {
                    (true, _) => tuning.radix_from_wide,
                    (false, true) => tuning.payload_radix_from,
                    (false, false) => tuning.radix_from,
                };
                // segmented sorts take the radix path (two radix sorts) from large segments;
                // a device whose workgroup memory holds no radix sweep sorts bitonic
                let segments_ok = order
                    .segment_size
                    .is_none_or(|s| s >= tuning.segmented_radix_from);
                if segments_ok && n >= from && !software && self.radix.fits_device() {
                    Algorithm::Radix
                } else {
                    Algorithm::Bitonic
                }
            }
            a => a,
        }
    }

    /// Sort host inputs longer than `keys` in GPU pieces merged on the host, as inputs larger
    /// than one binding are. For tests and for capping GPU memory use.
    pub fn with_piece_limit(mut self, keys: usize) -> Self {
        self.piece_limit = Some(keys.max(1));
        self
    }

    /// Workgroup size for records of `planes` words: the largest power of two up to 256 whose
    /// tile (16 records per invocation) fits the device's workgroup memory.
    pub fn workgroup_size(gpu: &Gpu, planes: u32) -> u32 {
        let per_invocation = 16 * 4 * planes; // bytes of workgroup memory
        let by_memory = gpu.limits.max_compute_workgroup_storage_size / per_invocation;
        let cap = by_memory
            .min(gpu.limits.max_compute_invocations_per_workgroup)
            .clamp(2, 256);
        1 << cap.ilog2()
    }

    fn network(&self, gpu: &Gpu, planes: u32) -> Result<Arc<NetworkKernels>> {
        let mut cache = self.networks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = cache.get(&planes) {
            return Ok(k.clone());
        }
        let wg = Self::workgroup_size(gpu, planes);
        let source = bitonic_wgsl::bitonic(planes, wg);
        let module = kernel::module(gpu, "bitonic", &source)?;
        let layout = BindLayout::new(
            gpu,
            "bitonic",
            &[(0, Slot::params::<BitonicParams>()), (1, Slot::ReadWrite)],
        );
        let kernels = Arc::new(NetworkKernels {
            wg,
            local_sort: kernel::pipeline(gpu, &module, "local_sort", &layout)?,
            local_merge: kernel::pipeline(gpu, &module, "local_merge", &layout)?,
            global: [
                kernel::pipeline(gpu, &module, "global_steps_1", &layout)?,
                kernel::pipeline(gpu, &module, "global_steps_2", &layout)?,
                kernel::pipeline(gpu, &module, "global_steps_3", &layout)?,
            ],
            layout,
        });
        cache.insert(planes, kernels.clone());
        Ok(kernels)
    }

    /// Planes per record for a job: [segment id][key hi][key lo][index].
    fn planes(key_type: KeyType, segment_plane: bool, index_plane: bool) -> u32 {
        segment_plane as u32 + 1 + key_type.is_wide() as u32 + index_plane as u32
    }

    /// The largest `n` one sort can take on this device with these options (larger host inputs
    /// are sorted in pieces).
    pub fn max_len(gpu: &Gpu, key_type: KeyType, with_index: bool, order: SortOrder) -> u64 {
        let segment_plane = order.segment_size.is_some_and(|s| !s.is_power_of_two());
        let planes = Self::planes(key_type, segment_plane, with_index) as u64;
        let by_planes = gpu.max_binding() / (4 * planes);
        let by_keys = gpu.max_binding() / key_type.size() as u64;
        by_planes.min(by_keys).min(u32::MAX as u64 / 2) & !3
    }

    /// Build the pipelines a sort of `n` keys of `key_type` will use, so that a caller can do it
    /// while the keys are still uploading (first use compiles shaders: about 0.1 s on the GPU
    /// machine, as long as the upload of 1 GiB).
    pub fn warm_up(
        &self,
        gpu: &Gpu,
        key_type: KeyType,
        n: u32,
        order: SortOrder,
        values: bool,
        permutation: bool,
    ) -> Result<()> {
        let algorithm = self.algorithm_for(gpu, n, key_type, order, values || permutation);
        if algorithm == Algorithm::Radix {
            // a segmented sort: an argsort by key, then one by segment (u32, ascending)
            let segmented = order.segment_size.is_some_and(|s| s < n);
            self.radix.pipelines(
                gpu,
                key_type,
                order.descending,
                values || permutation || segmented,
                &self.key_bits_of(key_type),
                self.radix.split_for(gpu, key_type, n),
            )?;
            if segmented {
                self.radix
                    .pipelines(gpu, KeyType::U32, false, true, &(0..32), None)?;
            }
        } else {
            let segment_plane = order
                .segment_size
                .is_some_and(|s| !s.is_power_of_two() && s < n);
            self.network(
                gpu,
                Self::planes(key_type, segment_plane, values || permutation),
            )?;
        }
        Ok(())
    }

    /// [`Self::record`] for keys the host holds too: `host_keys` are the bytes `job.keys` was
    /// filled from (the same `job.n` keys). A sample of them lets the radix sort choose its plan
    /// on the host: 32-bit keys with a top-digit bucket too large for the MSD path go straight
    /// to the LSD passes rather than counting on the GPU, finding that and counting again. The
    /// result is the same either way; bytes of another length are refused.
    pub fn record_sampled(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        job: &SortJob<'_>,
        host_keys: &[u8],
    ) -> Result<SortStats> {
        if host_keys.len() as u64 != job.n as u64 * job.key_type.size() as u64 {
            return Err(Error::InvalidInput(format!(
                "{} bytes of host keys for {} {} keys",
                host_keys.len(),
                job.n,
                job.key_type
            )));
        }
        let ruled_out = self.radix.msd_ruled_out(host_keys, job.key_type);
        self.record_with(gpu, encoder, job, !ruled_out)
    }

    /// Record a sort of `job` into `encoder`. Nothing is submitted; the caller submits.
    pub fn record(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        job: &SortJob<'_>,
    ) -> Result<SortStats> {
        self.record_with(gpu, encoder, job, true)
    }

    /// [`Self::record`]; `msd_ok` false keeps the radix sort off its MSD path.
    fn record_with(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        job: &SortJob<'_>,
        msd_ok: bool,
    ) -> Result<SortStats> {
        let n = job.n;
        let payload = job.values.is_some() || job.permutation.is_some();
        let algorithm = self.algorithm_for(gpu, n, job.key_type, job.order, payload);
        if job.order.segment_size == Some(0) {
            return Err(Error::InvalidInput(
                "segment size must be at least 1".into(),
            ));
        }
        if algorithm == Algorithm::Radix {
            return match job.order.segment_size {
                Some(s) if s < n => self.record_segmented_radix(gpu, encoder, job, s),
                // one segment holds every key: a plain sort
                _ => self.record_radix(
                    gpu,
                    encoder,
                    &SortJob {
                        order: SortOrder {
                            segment_size: None,
                            ..job.order
                        },
                        ..*job
                    },
                    None,
                    msd_ok,
                ),
            };
        }
        if self.key_bits.is_some() {
            return Err(Error::InvalidInput(
                "key-bit ranges are a radix sort option (Algorithm::Radix or Auto)".into(),
            ));
        }
        let want_index = job.values.is_some() || job.permutation.is_some();
        let max = Self::max_len(gpu, job.key_type, want_index, job.order);
        if n as u64 > max {
            return Err(Error::TooLarge(format!(
                "{n} keys exceed the {max} one sort can hold in a {} MiB binding on {}",
                gpu.max_binding() >> 20,
                gpu.adapter.name
            )));
        }
        let seg = job.order.segment_size;
        // Power-of-two segments are aligned blocks of the network: stop the stages there.
        // Other segment sizes sort on (segment id, key), which keeps every key in its segment.
        let seg = seg.filter(|&s| (s as u64) < n as u64);
        let segment_plane = seg.is_some_and(|s| !s.is_power_of_two());
        let k_end = match seg {
            Some(s) if s.is_power_of_two() => s,
            _ => n.max(1).next_power_of_two(),
        };
        let planes = Self::planes(job.key_type, segment_plane, want_index);
        let net = self.network(gpu, planes)?;
        let plane_vecs = n.div_ceil(4).max(1);
        let plane_stride = plane_vecs * 4;
        let scratch =
            transfer::storage_buffer(gpu, "sort planes", planes as u64 * plane_stride as u64 * 4)?;
        let tile = net.wg * 16;
        let plan = BitonicPlan::new(n, k_end, tile, MAX_FUSED_GLOBAL_STEPS);

        let mut key_params = ParamBlocks::new(gpu);
        let kp = key_params.push(&KeyParams {
            n,
            plane_stride,
            kind: job.key_type.code(),
            descending: job.order.descending as u32,
            seg_size: seg.unwrap_or(1),
            flags: segment_plane as u32 | (want_index as u32) << 1,
            pad: [0; 2],
        });
        let key_params = key_params.finish(gpu, "key params");
        let mut net_params = ParamBlocks::new(gpu);
        let base = BitonicParams {
            n,
            plane_vecs,
            k: 0,
            j: 0,
            mirror: 0,
            k_end,
            pad: [0; 2],
        };
        let offsets: Vec<u32> = plan
            .passes
            .iter()
            .map(|p| {
                net_params.push(&match *p {
                    Pass::LocalSort => base,
                    Pass::Global { k, j, mirror, .. } => BitonicParams {
                        k,
                        j,
                        mirror: mirror as u32,
                        ..base
                    },
                    Pass::LocalMerge { k } => BitonicParams {
                        k,
                        j: tile / 2,
                        ..base
                    },
                })
            })
            .collect();
        let net_params = net_params.finish(gpu, "bitonic params");

        // Without an index plane the decode kernel never touches the permutation slot; a tiny
        // buffer fills it (binding `scratch` twice would alias two writable bindings).
        let perm_buffer;
        let perm: &wgpu::Buffer = match job.permutation {
            Some(p) => p,
            None => {
                perm_buffer = transfer::storage_buffer(
                    gpu,
                    "permutation",
                    if want_index { n as u64 * 4 } else { 4 },
                )?;
                &perm_buffer
            }
        };
        let element_groups = n.div_ceil(ELEMENTWISE_WG);
        let tiles = plane_vecs.div_ceil(net.wg * 4);
        let mut codec_dispatches = 0;
        let network_dispatches = plan.dispatches();
        gpu.checked(|| -> Result<()> {
            let codec = self
                .keys
                .codec_layout
                .bind(gpu, &[&key_params, job.keys, &scratch, perm]);
            let network = net.layout.bind(gpu, &[&net_params, &scratch]);
            if n > 0 {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("encode keys"),
                    timestamp_writes: None,
                });
                kernel::dispatch(
                    gpu,
                    &mut pass,
                    &self.keys.encode,
                    &codec,
                    &[kp],
                    element_groups,
                );
                codec_dispatches += 1;
            }
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("bitonic sort"),
                    timestamp_writes: None,
                });
                for (p, &offset) in plan.passes.iter().zip(&offsets) {
                    let (pipeline, groups) = match *p {
                        Pass::LocalSort => (&net.local_sort, tiles),
                        Pass::LocalMerge { .. } => (&net.local_merge, tiles),
                        Pass::Global { k, steps, .. } => {
                            // groups of 2^steps vec4s over the vec4s of whole k-blocks
                            let span = plane_vecs.div_ceil(k / 4) as u64 * (k / 4) as u64;
                            let threads = (span >> steps) as u32;
                            (&net.global[steps as usize - 1], threads.div_ceil(net.wg))
                        }
                    };
                    kernel::dispatch(gpu, &mut pass, pipeline, &network, &[offset], groups);
                }
            }
            if n > 0 {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("decode keys"),
                    timestamp_writes: None,
                });
                kernel::dispatch(
                    gpu,
                    &mut pass,
                    &self.keys.decode,
                    &codec,
                    &[kp],
                    element_groups,
                );
                codec_dispatches += 1;
            }
            if let (Some(values), true) = (job.values, n > 0) {
                self.gather(gpu, encoder, n, perm, values)?;
                codec_dispatches += 1;
            }
            Ok(())
        })??;
        Ok(SortStats {
            n,
            planes,
            tile,
            network_dispatches,
            global_dispatches: plan.global_dispatches(),
            algorithm,
            codec_dispatches,
            radix_unstable_first: false,
            radix_msd: false,
            radix_two_bindings: false,
            upload_s: 0.0,
            gpu_s: 0.0,
            download_s: 0.0,
        })
    }

    /// Record a radix sort of the first `count[0]` keys of `job` (a u32 in a GPU buffer, clamped to
    /// `job.n`, which is the buffers' capacity): for callers whose key count is only known on the
    /// GPU (e.g. splat renderers after culling). Keys past the count are left as they are. With a
    /// GPU count, ask for the values or the permutation, not both.
    pub fn record_counted(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        job: &SortJob<'_>,
        count: &wgpu::Buffer,
    ) -> Result<SortStats> {
        if self.algorithm == Algorithm::Bitonic || job.order.segment_size.is_some() {
            return Err(Error::InvalidInput(
                "a GPU-resident count needs the radix sort (no segments)".into(),
            ));
        }
        if job.values.is_some() && job.permutation.is_some() {
            return Err(Error::InvalidInput(
                "with a GPU-resident count, ask for the values or the permutation, not both".into(),
            ));
        }
        self.record_radix(gpu, encoder, job, Some(count), true)
    }

    fn record_radix(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        job: &SortJob<'_>,
        count: Option<&wgpu::Buffer>,
        msd_ok: bool,
    ) -> Result<SortStats> {
        let n = job.n;
        let max = self.radix.max_keys(gpu, job.key_type);
        if n as u64 > max {
            return Err(Error::TooLarge(format!(
                "{n} keys exceed the {max} one radix sort can hold on {}",
                gpu.adapter.name
            )));
        }
        // the values gathered through the permutation are bound whole
        if job.values.is_some() && job.permutation.is_some() && n as u64 * 4 > gpu.max_binding() {
            return Err(Error::TooLarge(format!(
                "{n} values and their permutation exceed one {} MiB binding on {}; ask for one of them",
                gpu.max_binding() >> 20,
                gpu.adapter.name
            )));
        }
        let key_bits = self.key_bits_of(job.key_type);
        self.record_radix_on(gpu, encoder, job, count, key_bits, msd_ok)
    }

    /// [`Self::record_radix`] on the bits `key_bits` of the sortable key.
    fn record_radix_on(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        job: &SortJob<'_>,
        count: Option<&wgpu::Buffer>,
        key_bits: std::ops::Range<u32>,
        msd_ok: bool,
    ) -> Result<SortStats> {
        use crate::sort::radix::{Payload, RadixJob};
        let n = job.n;
        // values alone travel with the keys; with the permutation too they are gathered after
        let payload = match (job.values, job.permutation) {
            (Some(v), None) => Payload::Values(v),
            (_, Some(p)) => Payload::Index(p),
            (None, None) => Payload::None,
        };
        let mut codec_dispatches = 0;
        let recorded = gpu.checked(|| -> Result<crate::sort::radix::Recorded> {
            let d = self.radix.record(
                gpu,
                encoder,
                &RadixJob {
                    key_type: job.key_type,
                    descending: job.order.descending,
                    keys: job.keys,
                    capacity: n,
                    count,
                    payload,
                    key_bits: key_bits.clone(),
                    msd_ok,
                },
            )?;
            if let (Some(values), Some(perm), true) = (job.values, job.permutation, n > 1) {
                self.gather(gpu, encoder, n, perm, values)?;
                codec_dispatches += 1;
            }
            Ok(d)
        })??;
        Ok(SortStats {
            n,
            planes: job.key_type.is_wide() as u32 + 1 + !matches!(payload, Payload::None) as u32,
            tile: self
                .radix
                .tile_for(job.key_type, !matches!(payload, Payload::None)),
            network_dispatches: recorded.dispatches,
            global_dispatches: 0,
            codec_dispatches,
            radix_unstable_first: recorded.unstable_first,
            radix_msd: recorded.msd,
            radix_two_bindings: recorded.two_bindings,
            algorithm: Algorithm::Radix,
            upload_s: 0.0,
            gpu_s: 0.0,
            download_s: 0.0,
        })
    }

    /// A segmented sort on the radix path: a stable argsort of every key (on the sorter's key
    /// bits), then a stable sort of each element's segment (`perm / size`) on the bits the
    /// segment count needs, then the keys, permutation and values gathered through both. Every
    /// segment ends in key order, equal keys in input order, as the bitonic network leaves them.
    fn record_segmented_radix(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        job: &SortJob<'_>,
        size: u32,
    ) -> Result<SortStats> {
        let n = job.n;
        // its gathers bind the keys whole
        if n as u64 * job.key_type.size() as u64 > gpu.max_binding() {
            return Err(Error::TooLarge(format!(
                "{n} {} keys in segments exceed one {} MiB binding on {}",
                job.key_type,
                gpu.max_binding() >> 20,
                gpu.adapter.name
            )));
        }
        let whole = SortOrder {
            segment_size: None,
            ..job.order
        };
        let words = n as u64 * 4;
        let by_key = transfer::storage_buffer(gpu, "argsort by key", words)?;
        let segments = transfer::storage_buffer(gpu, "segment of each", words)?;
        let by_segment = transfer::storage_buffer(gpu, "argsort by segment", words)?;
        let keys_out = transfer::storage_buffer(
            gpu,
            "keys by segment",
            n as u64 * job.key_type.size() as u64,
        )?;
        let perm_temp;
        let perm = match job.permutation {
            Some(p) => p,
            None => {
                perm_temp = transfer::storage_buffer(gpu, "permutation", words)?;
                &perm_temp
            }
        };
        let first = self.record_radix_on(
            gpu,
            encoder,
            &SortJob {
                order: whole,
                values: None,
                permutation: Some(&by_key),
                ..*job
            },
            None,
            self.key_bits_of(job.key_type),
            true,
        )?;
        self.elementwise(
            gpu,
            encoder,
            &self.keys.segment_of,
            (n, 0, size),
            [&by_key, &by_key, &segments],
        )?;
        let last_segment = (n - 1) / size;
        let segment_bits = 32 - last_segment.leading_zeros();
        let second = self.record_radix_on(
            gpu,
            encoder,
            &SortJob {
                key_type: KeyType::U32,
                order: SortOrder::default(),
                keys: &segments,
                n,
                values: None,
                permutation: Some(&by_segment),
            },
            None,
            0..segment_bits,
            true,
        )?;
        let wide = if job.key_type.is_wide() { 4 } else { 0 };
        self.elementwise(
            gpu,
            encoder,
            &self.keys.gather,
            (n, wide, 1),
            [&by_segment, job.keys, &keys_out],
        )?;
        encoder.copy_buffer_to_buffer(
            &keys_out,
            0,
            job.keys,
            0,
            n as u64 * job.key_type.size() as u64,
        );
        self.elementwise(
            gpu,
            encoder,
            &self.keys.gather,
            (n, 0, 1),
            [&by_segment, &by_key, perm],
        )?;
        if let Some(values) = job.values {
            self.gather(gpu, encoder, n, perm, values)?;
        }
        Ok(SortStats {
            network_dispatches: first.network_dispatches + second.network_dispatches,
            codec_dispatches: 3 + job.values.is_some() as usize,
            planes: first.planes + 1,
            ..first
        })
    }

    /// One dispatch of an elementwise entry of keys.wgsl over `n` elements (`(n, flags,
    /// seg_size)`): `out[i]` from `src` through `perm` (gather_values, `flags` 4 for two-word
    /// elements) or from `perm` alone (segment_of, segments of `seg_size`); buffers `[perm, src,
    /// out]`.
    fn elementwise(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        pipeline: &wgpu::ComputePipeline,
        (n, flags, seg_size): (u32, u32, u32),
        [perm, src, out]: [&wgpu::Buffer; 3],
    ) -> Result<()> {
        let mut params = ParamBlocks::new(gpu);
        let off = params.push(&KeyParams {
            n,
            plane_stride: 0,
            kind: 0,
            descending: 0,
            seg_size,
            flags,
            pad: [0; 2],
        });
        let params = params.finish(gpu, "elementwise params");
        let bind = self
            .keys
            .gather_layout
            .bind(gpu, &[&params, perm, src, out]);
        gpu.checked(|| {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("keys elementwise"),
                timestamp_writes: None,
            });
            kernel::dispatch(
                gpu,
                &mut pass,
                pipeline,
                &bind,
                &[off],
                n.div_ceil(ELEMENTWISE_WG),
            );
        })
    }

    /// values[i] = values[perm[i]] for the first `n` values.
    fn gather(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        n: u32,
        perm: &wgpu::Buffer,
        values: &wgpu::Buffer,
    ) -> Result<()> {
        let sorted = transfer::storage_buffer(gpu, "sorted values", n as u64 * 4)?;
        self.elementwise(
            gpu,
            encoder,
            &self.keys.gather,
            (n, 0, 1),
            [perm, values, &sorted],
        )?;
        encoder.copy_buffer_to_buffer(&sorted, 0, values, 0, n as u64 * 4);
        Ok(())
    }

    /// Sort host keys in place on the GPU as `job` says (with a u32 payload; returning the
    /// permutation when it asks for it). Inputs larger than one binding are sorted in pieces and
    /// merged.
    pub fn sort_host<T: SortKey>(
        &self,
        gpu: &Gpu,
        keys: &mut [T],
        job: HostSort<'_>,
    ) -> Result<(Option<Vec<u32>>, SortStats)> {
        let HostSort {
            values,
            permutation: want_permutation,
            order,
        } = job;
        if let Some(v) = values.as_deref() {
            if v.len() != keys.len() {
                return Err(Error::InvalidInput(format!(
                    "{} keys but {} values",
                    keys.len(),
                    v.len()
                )));
            }
        }
        let want_index = values.is_some() || want_permutation;
        let max = self.one_sort_max(gpu, T::TYPE, want_index, order, keys.len());
        if keys.len() > max {
            return crate::sort::merge::sort_in_pieces(
                self,
                gpu,
                keys,
                values,
                want_permutation,
                order,
                max,
            );
        }
        let n = keys.len() as u32;
        let t_upload = std::time::Instant::now();
        let key_buf = transfer::buffer_from(gpu, "keys", keys)?;
        let upload_s = t_upload.elapsed().as_secs_f64();
        let perm_buf = if want_index {
            Some(transfer::storage_buffer(gpu, "permutation", n as u64 * 4)?)
        } else {
            None
        };
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("sort"),
            });
        let stats = self.record_sampled(
            gpu,
            &mut encoder,
            &SortJob {
                key_type: T::TYPE,
                order,
                keys: &key_buf,
                n,
                values: None,
                permutation: perm_buf.as_ref(),
            },
            bytemuck::cast_slice(keys),
        )?;
        let t_gpu = std::time::Instant::now();
        gpu.queue.submit([encoder.finish()]);
        gpu.wait()?;
        let gpu_s = t_gpu.elapsed().as_secs_f64();
        let t_download = std::time::Instant::now();
        transfer::download(gpu, &key_buf, 0, bytemuck::cast_slice_mut(keys))?;
        let perm = match perm_buf {
            Some(b) => Some(transfer::read_vec::<u32>(gpu, &b, n as usize)?),
            None => None,
        };
        let stats = SortStats {
            upload_s,
            gpu_s,
            download_s: t_download.elapsed().as_secs_f64(),
            ..stats
        };
        if let (Some(v), Some(p)) = (values, perm.as_ref()) {
            // The payload gather is a pure permutation; on the host it costs one pass.
            let src = v.to_vec();
            for (dst, &i) in v.iter_mut().zip(p) {
                *dst = src[i as usize];
            }
        }
        Ok((if want_permutation { perm } else { None }, stats))
    }

    /// The most keys [`Sorter::sort_host`] sorts as one GPU sort (more go in pieces merged on
    /// the host), for an input of `n` keys.
    pub fn one_sort_max(
        &self,
        gpu: &Gpu,
        key_type: KeyType,
        with_index: bool,
        order: SortOrder,
        n: usize,
    ) -> usize {
        let mut max = Self::max_len(gpu, key_type, with_index, order) as usize;
        // max_len bounds the bitonic network's planes; where the radix sort runs, a whole input
        // is one GPU sort up to what it holds: two ranges of one buffer each for the keys and
        // the permutation (segmented sorts, whose other buffers are bound whole, one binding)
        let n32 = n.min(u32::MAX as usize) as u32;
        if n > max && self.algorithm_for(gpu, n32, key_type, order, with_index) == Algorithm::Radix
        {
            let segmented = order.segment_size.is_some_and(|s| (s as usize) < n);
            let radix = match segmented {
                true => crate::sort::radix::RadixKernels::one_binding_keys(gpu, key_type),
                false => self.radix.max_keys(gpu, key_type),
            };
            max = max.max((radix & !3) as usize);
        }
        if let Some(limit) = self.piece_limit {
            max = max.min(limit);
        }
        max
    }

    /// The stable permutation that orders rows by several key words, most significant first
    /// (a lexicographic argsort of composite keys: DataFusion's `ORDER BY a, b`), as one GPU
    /// job: the least significant word is argsorted, then each more significant word is
    /// gathered on the GPU into that order and sorted stably with the permutation as its
    /// payload. Each word crosses to the GPU once and only the permutation comes back. `None`
    /// where the words do not fit one GPU sort (more than one binding or one sort holds): sort
    /// word by word on the host then ([`Sorter::sort_host`]).
    pub fn argsort_words(&self, gpu: &Gpu, words: &[KeyWord<'_>]) -> Result<Option<Vec<u32>>> {
        let Some(n) = words.first().map(KeyWord::len) else {
            return Err(Error::InvalidInput("no key words to sort by".into()));
        };
        if words.iter().any(|w| w.len() != n) {
            return Err(Error::InvalidInput("key words of different lengths".into()));
        }
        let order = SortOrder::default();
        let fits = words.iter().all(|w| {
            let t = w.key_type();
            n as u64 * t.size() as u64 <= gpu.max_binding()
                && n <= self.one_sort_max(gpu, t, true, order, n)
        });
        if !fits || n > u32::MAX as usize {
            return Ok(None);
        }
        if n == 0 {
            return Ok(Some(Vec::new()));
        }
        let n32 = n as u32;
        let perm = transfer::storage_buffer(gpu, "permutation", n as u64 * 4)?;
        for (pass, word) in words.iter().rev().enumerate() {
            let key_type = word.key_type();
            let raw = transfer::buffer_from(gpu, "key word", word.bytes())?;
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            let gathered;
            let job = if pass == 0 {
                SortJob {
                    key_type,
                    order,
                    keys: &raw,
                    n: n32,
                    values: None,
                    permutation: Some(&perm),
                }
            } else {
                // this word in the order of the less significant words, which the sort keeps
                // within its ties (stable); the permutation rides along as the payload
                gathered =
                    transfer::storage_buffer(gpu, "gathered key word", word.bytes().len() as u64)?;
                let two_words = if key_type.is_wide() { 4 } else { 0 };
                self.elementwise(
                    gpu,
                    &mut encoder,
                    &self.keys.gather,
                    (n32, two_words, 1),
                    [&perm, &raw, &gathered],
                )?;
                SortJob {
                    key_type,
                    order,
                    keys: &gathered,
                    n: n32,
                    values: Some(&perm),
                    permutation: None,
                }
            };
            self.record(gpu, &mut encoder, &job)?;
            gpu.checked(|| gpu.queue.submit([encoder.finish()]))?;
            gpu.wait()?;
        }
        Ok(Some(transfer::read_vec(gpu, &perm, n)?))
    }

    /// Convenience: sort a host slice in place.
    pub fn sort<T: SortKey>(
        &self,
        gpu: &Gpu,
        keys: &mut [T],
        order: SortOrder,
    ) -> Result<SortStats> {
        Ok(self
            .sort_host(
                gpu,
                keys,
                HostSort {
                    order,
                    ..HostSort::default()
                },
            )?
            .1)
    }

    /// Convenience: the stable sorting permutation of `keys` (keys untouched).
    pub fn argsort<T: SortKey>(&self, gpu: &Gpu, keys: &[T], order: SortOrder) -> Result<Vec<u32>> {
        let mut copy = keys.to_vec();
        Ok(self
            .sort_host(
                gpu,
                &mut copy,
                HostSort {
                    permutation: true,
                    order,
                    ..HostSort::default()
                },
            )?
            .0
            .unwrap_or_default())
    }
}
