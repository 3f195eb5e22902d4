//! LSD radix sort (shaders/radix.wgsl): one histogram read, then one sweep per 8-bit digit that
//! ranks a whole tile by digit at once and finds its output places by a decoupled look-back. The
//! sorter (`Sorter` with `Algorithm::Radix`) records it; the order, stability and NaN rules
//! are the bitonic sort's. Keys-only sorts of 32-bit keys over every bit, from
//! `sort::SortTuning::msd_from` keys, take an MSD path instead (shaders/radix_msd.wgsl: every pass
//! unstable, a local sort of tiles of 16-bit buckets, a fall back to the LSD passes decided on the
//! GPU). CPU twins: `reference::radix`.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::device::kernel::{self, BindLayout, ParamBlocks, Slot};
use crate::device::transfer;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::KeyType;
use crate::sort::radix_layout::{
    msd_range_shift, scratch_words, ARGS_SLOTS, CONTROL_WORDS, C_DENSE_COUNT, C_MSD_FLAG,
    C_MSD_RANGE, MAX_PASSES, MSD_ARGS, MSD_BIN_BITS, MSD_CONTROL_WORDS, MSD_RECOUNT, MSD_STEPS,
    PLAN_WORDS, UNSTABLE_ARGS,
};
use crate::sort::radix_wgsl;
use crate::sort::tuning::SortTuning;

/// Invocations per radix workgroup: one per digit value, or twice that (`WIDE_WG`).
const RADIX_WG: u32 = 256;
/// Values of one digit (8 bits).
pub(crate) const RADIX: u32 = 256;
/// With subgroups, where the workgroup memory fits: 512 invocations (the second half idle where
/// the work is per digit), twice the tile with the same registers an invocation: a fifth faster
/// than 256 from 2^26 keys (BENCHMARKS.md). Not with 8-lane subgroups (lavapipe): their rank
/// counters would need 32 KiB.
const WIDE_WG: u32 = 512;
/// Sorts of 64-bit keys with a payload move three words a key: where the device allows and
/// their tile fits, workgroups of 1024 invocations (`SortTuning::wide_payload_wg`), which spread a
/// tile's per-digit work (look-back, digit scans) over twice the keys (BENCHMARKS.md).
const WIDE_PAYLOAD_WG: u32 = 1024;
/// Keys one radix sort can hold: the look-back's status words keep counts in 30 bits.
pub const RADIX_MAX_KEYS: u32 = (1 << 30) - 1;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct RadixParams {
    capacity: u32,
    gpu_count: u32,
    begin_bit: u32,
    end_bit: u32,
    passes: u32,
    pass: u32,
    make_index: u32,
    unstable_passes: u32,
    msd: u32,
    pad: [u32; 3],
}

/// What travels with the keys.
#[derive(Clone, Copy)]
pub(crate) enum Payload<'a> {
    None,
    /// u32 values, permuted along with the keys.
    Values(&'a wgpu::Buffer),
    /// Filled with the sorting permutation (the input index of each output key).
    Index(&'a wgpu::Buffer),
}

/// One radix sort of GPU-resident keys, in place.
pub(crate) struct RadixJob<'a> {
    pub key_type: KeyType,
    pub descending: bool,
    /// `capacity` keys of `key_type` (the first `count` of them are sorted).
    pub keys: &'a wgpu::Buffer,
    pub capacity: u32,
    /// A GPU-resident count (u32 at offset 0), clamped to `capacity`; None sorts `capacity`.
    pub count: Option<&'a wgpu::Buffer>,
    pub payload: Payload<'a>,
    /// The bits of the sortable key sorted on (see [`key_bits_error`]).
    pub key_bits: Range<u32>,
    /// Whether the MSD path may run (false where a sample of the keys rules it out:
    /// [`top_digit_too_full`]).
    pub msd_ok: bool,
}

/// Keys of the sample [`top_digit_too_full`] reads, at even strides.
const SAMPLE_KEYS: usize = 4096;

/// Whether a sample of 32-bit keys (`key_bytes`, native order) puts more than four times
/// `limit` keys in one top-digit bucket: the MSD path would count the top digit, find a bucket
/// over `limit` (RADIX tiles) and fall back to the LSD passes, counting every digit again. Four
/// times, so that uniform keys, whose buckets may come near the limit at 2^28 keys, keep the path
/// (a sample bucket that far above its share is beyond chance). The top digit of the sortable
/// value is a one-to-one function of the stored top byte for every 32-bit type (the sign flips
/// it, or every bit) and either direction mirrors the buckets, so the stored byte is counted.
/// Not where the GPU would sort relative to the keys' range (`radix_layout::msd_range_shift`,
/// tiles of `tile` keys), as the sample's range suggests: its buckets are other ones; nor for
/// buckets of one value (few distinct keys), which the path takes however full.
pub(crate) fn top_digit_too_full(
    key_bytes: &[u8],
    key_type: KeyType,
    limit: u64,
    tile: u32,
) -> bool {
    if key_type.size() != 4 || key_bytes.len() < 4 {
        return false;
    }
    let n = key_bytes.len() / 4;
    let sample = n.min(SAMPLE_KEYS);
    // each bucket's keys and the lowest and highest of them
    let mut buckets = [(0u32, u32::MAX, 0u32); RADIX as usize];
    let (mut lo, mut hi) = (u32::MAX, 0);
    for i in 0..sample {
        let at = (i * n / sample) * 4;
        let key = u32::from_ne_bytes(key_bytes[at..at + 4].try_into().expect("4 bytes"));
        let b = &mut buckets[(key >> 24) as usize];
        *b = (b.0 + 1, b.1.min(key), b.2.max(key));
        // (the GPU's ascending sortable word, NaNs canonical)
        let s = crate::keys::order::encode(key_type, false, key, 0).0;
        (lo, hi) = (lo.min(s), hi.max(s));
    }
    // a bucket of one value (not every key) is sorted by the top digit's pass however full
    // (radix.wgsl's top_single)
    let fullest = buckets
        .iter()
        .filter(|b| !(b.1 == b.2 && (b.0 as usize) < sample))
        .map(|b| b.0)
        .max()
        .unwrap_or(0) as u64;
    // fullest / sample of n keys above 4 * limit
    let crowded = fullest * n as u64 > 4 * limit * sample as u64;
    crowded && msd_range_shift(lo, hi, n as u64, tile).is_none()
}

pub(crate) struct Pipelines {
    count_digits: wgpu::ComputePipeline,
    prepare: wgpu::ComputePipeline,
    sweep: wgpu::ComputePipeline,
    /// The unstable sweep for the first pass that runs (keys-only shapes, where enabled).
    sweep_unstable: Option<wgpu::ComputePipeline>,
    /// The MSD path's kernels (keys-only shapes of 32-bit keys, where enabled and they fit).
    msd: Option<MsdPipelines>,
    finish: wgpu::ComputePipeline,
}

/// radix_msd.wgsl's kernels, from the unstable module.
struct MsdPipelines {
    range_plan: wgpu::ComputePipeline,
    count: wgpu::ComputePipeline,
    scan: wgpu::ComputePipeline,
    sweep: wgpu::ComputePipeline,
    local: wgpu::ComputePipeline,
    plan_rest: wgpu::ComputePipeline,
    dense: wgpu::ComputePipeline,
}

pub(crate) struct RadixKernels {
    /// The smallest subgroup size when the subgroup ranking is used.
    min_subgroup: Option<u32>,
    /// Whether ballots are one word (no subgroup of the device exceeds 32 lanes).
    narrow_ballot: bool,
    /// `tuning.items`, `tuning.payload_items`, `tuning.unstable_items` and `tuning.wide_items`
    /// cut to what the device's workgroup memory holds: keys an invocation holds in sorts without
    /// and with a payload, in the unstable sweep, and in keys-only sorts of 64-bit keys.
    items: [u32; 4],
    /// Invocations per workgroup.
    wg: u32,
    /// Digits a word of the subgroup rank tables (SortTuning::pack resolved for this device).
    pack: u32,
    /// Sorts of 64-bit keys with a payload where their own workgroup size fits
    /// (`SortTuning::wide_payload_wg`): invocations, keys an invocation and rank-table packing.
    wide_payload: Option<SweepShape>,
    /// What the device lacks for any radix sweep (storage buffers, or workgroup memory: 16 KiB
    /// without subgroups, say); None where the chosen shape fits.
    short_of: Option<String>,
    /// Whether msd_local's bins and tile fit the device's workgroup memory (the MSD path's
    /// condition besides SortTuning::msd_from).
    msd_fits: bool,
    /// Whether the last sort recorded recorded the MSD path (RadixKernels::last_msd_outcome).
    last_recorded_msd: Mutex<bool>,
    tuning: SortTuning,
    layout: BindLayout,
    /// The layout of jobs beyond one binding: bindings 10..=13 hold the keys, the alternate
    /// keys, the payload and its alternate from element `Shape::split` on. None where the device
    /// grants too few storage buffers for it (such jobs are then refused: sorted in pieces).
    split_layout: Option<BindLayout>,
    /// Compiled per shape: the key order is a shader constant.
    by_shape: Mutex<HashMap<Shape, Arc<Pipelines>>>,
    /// The sorts' alternate buffers and look-back state, kept between sorts.
    scratch: Scratch,
}

/// Scratch buffers by role, each grown to the largest sort so far and reused by later sorts.
/// Allocating them afresh every sort (3 GiB for an argsort of 2^28 keys) made repeated sorts up
/// to twice as slow, and renderers sorting every frame want no per-frame allocation.
/// Sorts recorded one after another may share them: the queue runs them in order, and each sort
/// clears the state it needs zeroed.
#[derive(Default)]
struct Scratch(Mutex<HashMap<&'static str, wgpu::Buffer>>);

impl Scratch {
    /// The buffer for `role`, at least `bytes` long, made by `make` (a `transfer` constructor)
    /// when none kept is large enough.
    fn get(
        &self,
        gpu: &Gpu,
        role: &'static str,
        bytes: u64,
        make: fn(&Gpu, &str, u64) -> Result<wgpu::Buffer>,
    ) -> Result<wgpu::Buffer> {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = kept
            .get(role)
            .filter(|b| b.size() >= transfer::buffer_size(bytes))
        {
            return Ok(b.clone());
        }
        // the smaller one goes first, so both are never held at once
        kept.remove(role);
        let b = make(gpu, role, bytes)?;
        kept.insert(role, b.clone());
        Ok(b)
    }

    fn bytes(&self) -> u64 {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.values().map(|b| b.size()).sum()
    }

    fn release(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// What one set of radix pipelines is compiled for.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Shape {
    key_type: KeyType,
    descending: bool,
    payload: bool,
    /// An ascending sort on part of a float's bits (the function nan_test).
    nan_test: bool,
    /// Keys in the first binding of each array, for jobs beyond one binding (None: one binding).
    split: Option<u32>,
}

/// Whether an ascending radix sort of `key_type` on `bits` reads digits through key_encode's NaN
/// test (radix.wgsl, sortable): on part of a float's bits a NaN's every bit is one, as in the CPU
/// twin; whole keys and descending orders need no pipelines of their own for it.
pub(crate) fn nan_test(key_type: KeyType, descending: bool, bits: &Range<u32>) -> bool {
    key_type.is_float() && !descending && *bits != (0..8 * key_type.size() as u32)
}

/// Why a key-bit range is refused for keys of `key_type`, if it is.
pub fn key_bits_error(key_type: KeyType, bits: &Range<u32>) -> Option<String> {
    let width = 8 * key_type.size() as u32;
    (bits.start >= bits.end || bits.end > width).then(|| {
        format!(
            "key bits {}..{} are not a non-empty range within the {width} bits of {key_type} keys",
            bits.start, bits.end
        )
    })
}

impl RadixKernels {
    /// How these kernels are built (builders start from it, so their settings combine).
    pub(crate) fn tuning(&self) -> SortTuning {
        self.tuning
    }

    pub(crate) fn new(gpu: &Gpu, tuning: SortTuning) -> RadixKernels {
        let slots = [
            (0, Slot::params::<RadixParams>()),
            (1, Slot::ReadWrite),
            (2, Slot::ReadWrite),
            (3, Slot::ReadWrite),
            (4, Slot::ReadWrite),
            (5, Slot::ReadWrite),
            (6, Slot::ReadWrite),
            (7, Slot::Read),
            (8, Slot::ReadWrite),
            (9, Slot::ReadWrite),
        ];
        // a device granted fewer storage buffers (a caller's device with wgpu's default 8) sorts
        // bitonic: the layout is then never used, and one it could not create is not made
        let buffers = slots.len() as u32 - 1;
        let granted = gpu.limits.max_storage_buffers_per_shader_stage;
        let buffers_short = granted < buffers;
        let layout = BindLayout::new(
            gpu,
            "radix",
            if buffers_short { &slots[..1] } else { &slots },
        );
        let rest = [10, 11, 12, 13].map(|b| (b, Slot::ReadWrite));
        let split_slots: Vec<_> = slots.iter().chain(&rest).copied().collect();
        let split_layout = (granted >= buffers + rest.len() as u32)
            .then(|| BindLayout::new(gpu, "radix beyond one binding", &split_slots));
        let min_subgroup = gpu.subgroups().map(|s| s.min_size.clamp(4, RADIX_WG));
        let (wg, items) = sweep_shape(
            &tuning,
            min_subgroup,
            gpu.limits.max_compute_invocations_per_workgroup,
            gpu.limits.max_compute_workgroup_storage_size,
        );
        // decided for the keys-only tile; a sort with a payload holds fewer keys an invocation,
        // so its scratch is the larger of its own tile (which fits) and the same tables
        let pack = counters_a_word(
            tuning.pack,
            items[0],
            min_subgroup,
            wg,
            gpu.limits.max_compute_workgroup_storage_size,
        );
        let wide_payload = wide_payload_shape(
            &tuning,
            wg,
            min_subgroup,
            gpu.limits.max_compute_invocations_per_workgroup,
            gpu.limits.max_compute_workgroup_storage_size,
        );
        let narrow_ballot =
            !tuning.wide_ballot && gpu.subgroups().is_some_and(|s| s.max_size <= 32);
        let storage = gpu.limits.max_compute_workgroup_storage_size;
        let needs = items
            .iter()
            .map(|&i| sweep_bytes(i, min_subgroup, wg, 2))
            .max()
            .unwrap_or(0);
        RadixKernels {
            min_subgroup,
            narrow_ballot,
            items,
            wg,
            pack,
            wide_payload,
            short_of: if buffers_short {
                Some(format!(
                    "{buffers} storage buffers per shader stage (the device grants {})",
                    gpu.limits.max_storage_buffers_per_shader_stage
                ))
            } else {
                (needs > storage).then(|| {
                    format!("{needs} bytes of workgroup memory (the device has {storage})")
                })
            },
            msd_fits: msd_local_bytes(wg, items[2], min_subgroup.is_some()) <= storage,
            last_recorded_msd: Mutex::new(false),
            tuning,
            layout,
            split_layout,
            by_shape: Mutex::new(HashMap::new()),
            scratch: Scratch::default(),
        }
    }

    /// Whether this device's workgroup memory holds a radix sweep (`Algorithm::Auto` picks the
    /// bitonic sort where it does not).
    pub(crate) fn fits_device(&self) -> bool {
        self.short_of.is_none()
    }

    /// How the MSD path of the last sort recorded went on the GPU, once that sort has run (None
    /// where it did not record the MSD path). Reads the kept control words back: for tests and
    /// the bench's notes.
    pub(crate) fn last_msd_outcome(&self, gpu: &Gpu) -> Result<Option<MsdOutcome>> {
        if !*self
            .last_recorded_msd
            .lock()
            .unwrap_or_else(|p| p.into_inner())
        {
            return Ok(None);
        }
        // the flag, msd_dense's bucket count, msd_scan's tiles, whether relative to the range
        let mut words = [0u8; 16];
        self.control_words(gpu, C_MSD_FLAG, &mut words)?;
        let word = |i: usize| u32::from_le_bytes(words[4 * i..4 * i + 4].try_into().unwrap());
        const _: () = assert!(C_DENSE_COUNT == C_MSD_FLAG + 1 && C_MSD_RANGE == C_MSD_FLAG + 3);
        Ok(Some(match word(0) {
            0 => MsdOutcome::Ran {
                dense_buckets: word(1),
                ranged: word(3) != 0,
            },
            1 => MsdOutcome::FellBack,
            _ => MsdOutcome::LsdAtOnce,
        }))
    }

    #[cfg(feature = "test-hooks")]
    /// Which LSD passes the last sort recorded ran (bit p: pass p), once it has run: its plan's
    /// word, read back (for tests; meaningless where the MSD path ran).
    pub(crate) fn last_lsd_passes(&self, gpu: &Gpu) -> Result<u32> {
        let mut word = [0u8; 4];
        self.control_words(gpu, super::radix_layout::C_LSD_RAN, &mut word)?;
        Ok(u32::from_le_bytes(word))
    }

    /// The kept control words from word `at` (the last sort's, once it has run), read back.
    fn control_words(&self, gpu: &Gpu, at: u32, bytes: &mut [u8]) -> Result<()> {
        let control = self.scratch.get(
            gpu,
            "radix control",
            MSD_CONTROL_WORDS * 4,
            transfer::storage_buffer,
        )?;
        transfer::download(gpu, &control, at as u64 * 4, bytes)
    }

    /// Bytes of scratch kept for later sorts.
    pub(crate) fn scratch_bytes(&self) -> u64 {
        self.scratch.bytes()
    }

    /// Drop the kept scratch (the next sort allocates again).
    pub(crate) fn release_scratch(&self) {
        self.scratch.release()
    }

    #[cfg(feature = "test-hooks")]
    /// Digits a word of the subgroup rank tables.
    pub(crate) fn counters_a_word(&self) -> u32 {
        self.pack
    }

    #[cfg(feature = "test-hooks")]
    /// Keys per sweep tile, for sorts without or with a payload.
    pub(crate) fn tile(&self, payload: bool) -> u32 {
        self.tile_for(KeyType::U32, payload)
    }

    /// The stable sweep's shape for keys of this type, without or with a payload: keys-only sorts
    /// of 64-bit keys hold their own count of keys (`SortTuning::wide_items`), sorts of 64-bit keys
    /// with a payload may have workgroups of their own size (`SortTuning::wide_payload_wg`).
    fn sweep_of(&self, key_type: KeyType, payload: bool) -> SweepShape {
        let shared = |items| SweepShape {
            wg: self.wg,
            items,
            pack: self.pack,
        };
        match (key_type.is_wide(), payload) {
            (true, true) => self.wide_payload.unwrap_or(shared(self.items[1])),
            (true, false) => shared(self.items[3]),
            (false, payload) => shared(self.items[payload as usize]),
        }
    }

    /// Keys an invocation of the unstable sweep holds for keys of this type: 64-bit keys hold
    /// no more than in their stable sweeps (`SortTuning::wide_items`): twice the words at the
    /// 32-bit count took the sweep to 114 registers on an H200, one workgroup an SM.
    fn unstable_items_for(&self, key_type: KeyType) -> u32 {
        match key_type.is_wide() {
            true => self.items[2].min(self.items[3]),
            false => self.items[2],
        }
    }

    /// Keys per stable sweep tile for keys of this type, without or with a payload.
    pub(crate) fn tile_for(&self, key_type: KeyType, payload: bool) -> u32 {
        let shape = self.sweep_of(key_type, payload);
        shape.wg * shape.items
    }

    /// The unstable sweep's tile, the MSD path's too.
    pub(crate) fn msd_tile(&self) -> u32 {
        self.wg * self.items[2]
    }

    /// Whether a sample of host keys (`key_bytes`, `key_type`) rules the MSD path out: only for
    /// sorts large enough to take it, against its limit of RADIX tiles in a top-digit bucket.
    pub(crate) fn msd_ruled_out(&self, key_bytes: &[u8], key_type: KeyType) -> bool {
        let n = key_bytes.len() / key_type.size();
        let limit = RADIX as u64 * self.msd_tile() as u64;
        n as u64 >= self.tuning.msd_from as u64
            && top_digit_too_full(key_bytes, key_type, limit, self.msd_tile())
    }

    /// Keys of `key_type` one binding holds, within what one radix sort indexes.
    pub(crate) fn one_binding_keys(gpu: &Gpu, key_type: KeyType) -> u64 {
        (gpu.max_binding() / key_type.size() as u64).min(RADIX_MAX_KEYS as u64)
    }

    /// Keys the first binding of each array holds in a job beyond one binding: as many as fit
    /// one binding, a multiple of 64 (so the second binding's offset is aligned for any device),
    /// or fewer where the tuning asks (tests).
    pub(crate) fn part_keys(&self, gpu: &Gpu, key_type: KeyType) -> u32 {
        let fits = Self::one_binding_keys(gpu, key_type) as u32;
        let part = self.tuning.binding_keys.map_or(fits, |k| k.clamp(64, fits));
        part & !63
    }

    /// Where a job of `capacity` keys splits its arrays (`Shape::split`): None within the first
    /// part, or where the device has no layout for two bindings (the job then fits one).
    pub(crate) fn split_for(&self, gpu: &Gpu, key_type: KeyType, capacity: u32) -> Option<u32> {
        let part = self.part_keys(gpu, key_type);
        (capacity > part && self.split_layout.is_some()).then_some(part)
    }

    /// The most keys of `key_type` one radix sort takes on `gpu`: one binding's worth where the
    /// device has no layout for two, else what two bindings hold, each array one buffer (a
    /// caller's keys stay one buffer however large).
    pub(crate) fn max_keys(&self, gpu: &Gpu, key_type: KeyType) -> u64 {
        let one = Self::one_binding_keys(gpu, key_type);
        match self.split_layout {
            None => one,
            Some(_) => {
                let part = self.part_keys(gpu, key_type) as u64;
                let buffer = gpu.limits.max_buffer_size / key_type.size() as u64;
                (part + one).min(buffer).max(one).min(RADIX_MAX_KEYS as u64)
            }
        }
    }

    pub(crate) fn pipelines(
        &self,
        gpu: &Gpu,
        key_type: KeyType,
        descending: bool,
        payload: bool,
        key_bits: &Range<u32>,
        split: Option<u32>,
    ) -> Result<Arc<Pipelines>> {
        let nan_test = nan_test(key_type, descending, key_bits);
        let shape = Shape {
            key_type,
            descending,
            payload,
            nan_test,
            split,
        };
        let layout = match split {
            None => &self.layout,
            Some(_) => self.split_layout.as_ref().ok_or_else(|| {
                Error::TooLarge(format!(
                    "a radix sort beyond one binding needs four more storage buffers per shader stage than the {} granted",
                    gpu.limits.max_storage_buffers_per_shader_stage
                ))
            })?,
        };
        let mut cache = self.by_shape.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.get(&shape) {
            return Ok(p.clone());
        }
        let sweep = self.sweep_of(key_type, payload);
        let config = |unstable: bool| radix_wgsl::RadixConfig {
            items: sweep.items,
            wg: sweep.wg,
            kind: key_type.code(),
            descending,
            nan_test,
            payload,
            min_subgroup: self.min_subgroup,
            spin_limit: self.tuning.spin_limit.min(crate::scan::spin_cap(gpu)),
            max_dim: gpu.limits.max_compute_workgroups_per_dimension,
            window: self.tuning.window,
            probe: self.tuning.probe,
            group_tiles: crate::scan::group_tiles(gpu),
            stable_sweep_groups: match payload {
                true => self.tuning.payload_workgroups,
                false => self.tuning.workgroups,
            },
            unstable_sweep_groups: self.tuning.unstable_workgroups,
            narrow_ballot: self.narrow_ballot,
            early_counts: self.tuning.early_counts,
            count_first: self.tuning.count_first,
            spare_lanes: self.tuning.spare_lanes,
            hist_chunks: self.tuning.hist_chunks,
            pack: sweep.pack,
            unstable,
            unstable_items: self.unstable_items_for(key_type),
            msd_local_groups: self.tuning.msd_local_groups,
            msd_prefetch: self.tuning.msd_prefetch,
            split,
        };
        let module = kernel::module(gpu, "radix", &radix_wgsl::radix(&config(false)))?;
        let (sweep_unstable, msd) = match !payload && self.tuning.unstable_first {
            true => {
                let source = radix_wgsl::radix(&config(true));
                let module = kernel::module(gpu, "radix unstable", &source)?;
                let pipe = |entry| kernel::pipeline(gpu, &module, entry, layout);
                // f32 keys sort faster on the LSD passes at every key set measured (their top
                // digits cluster: uniform floats 3.5x, BENCHMARKS.md), unless a tuning asks
                let msd_type = key_type != KeyType::F32 || self.tuning.msd_f32;
                let msd = match !key_type.is_wide() && self.msd_fits && msd_type {
                    true => Some(MsdPipelines {
                        range_plan: pipe("msd_range_plan")?,
                        count: pipe("msd_count")?,
                        scan: pipe("msd_scan")?,
                        sweep: pipe("msd_sweep")?,
                        local: pipe("msd_local")?,
                        plan_rest: pipe("msd_plan_rest")?,
                        dense: pipe("msd_dense")?,
                    }),
                    false => None,
                };
                (Some(pipe("sweep")?), msd)
            }
            false => (None, None),
        };
        let p = Arc::new(Pipelines {
            count_digits: kernel::pipeline(gpu, &module, "count_digits", layout)?,
            prepare: kernel::pipeline(gpu, &module, "prepare", layout)?,
            sweep: kernel::pipeline(gpu, &module, "sweep", layout)?,
            sweep_unstable,
            msd,
            finish: kernel::pipeline(gpu, &module, "finish", layout)?,
        });
        cache.insert(shape, p.clone());
        Ok(p)
    }

    /// Record `job` into `enc` (sweeps of skipped passes and an unneeded finish dispatch zero
    /// workgroups).
    pub(crate) fn record(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        job: &RadixJob<'_>,
    ) -> Result<Recorded> {
        if let Some(e) = key_bits_error(job.key_type, &job.key_bits) {
            return Err(Error::InvalidInput(e));
        }
        if let Some(short) = &self.short_of {
            return Err(Error::InvalidInput(format!(
                "the radix sort needs {short} on {}; use the bitonic sort",
                gpu.adapter.name
            )));
        }
        debug_assert!(job.capacity <= RADIX_MAX_KEYS, "the sorter checks the size");
        // one key still runs a pass: it makes the permutation and canonical NaNs
        if job.capacity == 0 {
            return Ok(Recorded::default());
        }
        let key_words = job.key_type.is_wide() as u32 + 1;
        let with_payload = !matches!(job.payload, Payload::None);
        if job.capacity as u64 > self.max_keys(gpu, job.key_type) {
            return Err(Error::TooLarge(format!(
                "{} keys exceed the {} one radix sort of {} keys holds on {}",
                job.capacity,
                self.max_keys(gpu, job.key_type),
                job.key_type,
                gpu.adapter.name
            )));
        }
        let split = self.split_for(gpu, job.key_type, job.capacity);
        let pipes = self.pipelines(
            gpu,
            job.key_type,
            job.descending,
            with_payload,
            &job.key_bits,
            split,
        )?;
        let cap = job.capacity as u64;
        let tiles = job
            .capacity
            .div_ceil(self.tile_for(job.key_type, with_payload));
        let storage = |role, bytes| self.scratch.get(gpu, role, bytes, transfer::storage_buffer);
        let keys_alt = storage("radix keys", cap * 4 * key_words as u64)?;
        let (payload, payload_alt) = match job.payload {
            Payload::None => (
                storage("radix no payload", 16)?,
                storage("radix no payload alt", 16)?,
            ),
            Payload::Values(b) | Payload::Index(b) => {
                (b.clone(), storage("radix payload", cap * 4)?)
            }
        };
        let control = storage("radix control", MSD_CONTROL_WORDS * 4)?;
        let plan = storage("radix plan", PLAN_WORDS * 4)?;
        // two halves of a row a tile, each stable pass zeroing the next one's (radix.wgsl)
        let status = storage("radix look-back", 2 * tiles as u64 * 256 * 4)?;
        let no_count;
        let count = match job.count {
            Some(c) => c,
            None => {
                no_count = storage("radix count", 16)?;
                &no_count
            }
        };
        let args = self.scratch.get(
            gpu,
            "radix dispatch sizes",
            ARGS_SLOTS * 12,
            transfer::indirect_buffer,
        )?;
        // indirect dispatches read `args`, so they bind a stand-in for it
        let no_args = storage("radix no dispatch sizes", 16)?;
        let passes = job.key_bits.len().div_ceil(8) as u32;
        // count_digits keeps a histogram for each pass a key of this type can have
        debug_assert!(passes <= job.key_type.size() as u32);
        // keys equal on the sorted bits are the same key only when every bit is sorted on
        let every_bit = job.key_bits == (0..8 * job.key_type.size() as u32);
        let unstable = match &pipes.sweep_unstable {
            Some(sweep) if every_bit && !with_payload => Some(sweep),
            _ => None,
        };
        // the MSD path (radix_msd.wgsl): keys-only, every bit, 32-bit keys (pipes.msd), large
        // enough; probes below 512 measure the LSD passes, those from 512 msd_local. Beyond
        // 65,536 tiles of keys some 16-bit bucket holds more than a tile, so the path would
        // surely fall back (a GPU-resident count may be smaller: left to the GPU)
        let bucket_fits =
            job.count.is_some() || job.capacity as u64 <= (1 << 16) * self.msd_tile() as u64;
        let msd = match (&pipes.msd, unstable) {
            (Some(m), Some(_))
                if job.msd_ok
                    && bucket_fits
                    && job.capacity >= self.tuning.msd_from
                    && self.tuning.probe & 511 == 0 =>
            {
                Some(m)
            }
            _ => None,
        };
        // kept from earlier sorts: digit counts and tickets start from zero, the MSD path's bucket
        // counts too where it runs (the look-back state is zeroed on the GPU: radix.wgsl)
        let control_words = if msd.is_some() {
            MSD_CONTROL_WORDS
        } else {
            CONTROL_WORDS
        };
        *self
            .last_recorded_msd
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = msd.is_some();
        enc.clear_buffer(&control, 0, Some(control_words * 4));
        // passes recorded both as the unstable sweep and as the stable one (prepare sizes one of
        // the two, the other empty): the two lowest digits', so that the first pass that runs is
        // the unstable sweep also where the lowest digit is the same in every key (floats of
        // small integers, aligned ids); with probe 256 (measuring only, results wrong) every
        // pass runs unstable, to time what an MSD sort's passes cost
        let unstable_passes: u32 = match unstable {
            None => 0,
            Some(_) if self.tuning.probe & 256 != 0 => u32::MAX,
            Some(_) => 0b11,
        };
        let base = RadixParams {
            capacity: job.capacity,
            gpu_count: job.count.is_some() as u32,
            begin_bit: job.key_bits.start,
            end_bit: job.key_bits.end,
            passes,
            pass: 0,
            make_index: matches!(job.payload, Payload::Index(_)) as u32,
            unstable_passes,
            msd: msd.is_some() as u32,
            pad: [0; 3],
        };
        let mut params = ParamBlocks::new(gpu);
        let offsets: Vec<u32> = (0..passes)
            .map(|pass| params.push(&RadixParams { pass, ..base }))
            .collect();
        let params = params.finish(gpu, "radix params");
        let buffers = |args: &wgpu::Buffer| {
            let whole: [&wgpu::Buffer; 10] = [
                &params,
                job.keys,
                &keys_alt,
                &payload,
                &payload_alt,
                &control,
                &status,
                count,
                args,
                &plan,
            ];
            match (split, &self.split_layout) {
                (Some(part), Some(layout)) => {
                    // each array in two ranges: keys [0, part) at 1..=4, the rest at 10..=13
                    let ranges =
                        split_ranges(&whole, part as u64..cap, key_words as u64 * 4, with_payload);
                    layout.bind_ranges(gpu, &ranges)
                }
                _ => self.layout.bind(gpu, &whole),
            }
        };
        let (prep, run) = (buffers(&args), buffers(&no_args));
        let count_groups = job
            .capacity
            .div_ceil(self.tuning.hist_chunks * self.tile_for(job.key_type, with_payload));
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("radix count digits"),
                timestamp_writes: None,
            });
            kernel::dispatch(
                gpu,
                &mut pass,
                &pipes.count_digits,
                &prep,
                &[offsets[0]],
                count_groups,
            );
            kernel::dispatch(gpu, &mut pass, &pipes.prepare, &prep, &[offsets[0]], 1);
        }
        let stop = self.tuning.stop; // measuring only
        let recorded = |dispatches| Recorded {
            dispatches,
            unstable_first: unstable.is_some(),
            msd: msd.is_some(),
            two_bindings: split.is_some(),
        };
        if stop == 1 {
            return Ok(recorded(2));
        }
        // The MSD path, sized by prepare and msd_scan's last workgroup; where it falls back (or
        // prepare chose the LSD plan at once) its dispatches are empty and the LSD passes below
        // run instead. One compute pass from here on: nothing is cleared between the passes (the
        // sweeps zero the look-back state they hand on), so the fall back's empty dispatches
        // cost no barriers of their own.
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("radix passes"),
            timestamp_writes: None,
        });
        let mut msd_dispatches = 0;
        if let (Some(m), Some(top_sweep)) = (msd, unstable) {
            let top = offsets[passes as usize - 1];
            let indirect = |pass: &mut wgpu::ComputePass<'_>, pipe, slot: u64| {
                pass.set_pipeline(pipe);
                pass.set_bind_group(0, &run, &[top]);
                pass.dispatch_workgroups_indirect(&args, (MSD_ARGS + slot) * 12);
            };
            // the path's dispatches in order (`SortTuning::stop` 10 + k, measuring only, records
            // the first k and nothing after them; 3 the first six, up to msd_sweep)
            // Where prepare chose to sort relative to the keys' range, the top digit is counted
            // again and msd_range_plan plans the path (an empty dispatch and one workgroup that
            // returns at once otherwise). Where the path falls back, msd_sweep's dispatch counts
            // every digit again and msd_plan_rest's plans the LSD passes (the dispatches exclude
            // each other, so each does either job, and a sort that does not fall back pays no
            // dispatch for it).
            let steps: [&dyn Fn(&mut wgpu::ComputePass<'_>); MSD_STEPS] = [
                &|p| indirect(p, &pipes.count_digits, MSD_RECOUNT),
                // it writes `args`, so it binds them
                &|p| kernel::dispatch(gpu, p, &m.range_plan, &prep, &[top], 1),
                &|p| indirect(p, top_sweep, 0),
                &|p| indirect(p, &m.count, 1),
                // its last workgroup sizes what follows (msd_decide), so it binds `args`
                &|p| kernel::dispatch(gpu, p, &m.scan, &prep, &[top], 256),
                &|p| indirect(p, &m.sweep, 2),
                &|p| indirect(p, &m.local, 3),
                // msd_dense's size (the buckets msd_local left: none unless some tile held dense
                // keys), or the fall back's plan; it writes `args`, so it binds them
                &|p| kernel::dispatch(gpu, p, &m.plan_rest, &prep, &[top], 1),
                &|p| indirect(p, &m.dense, 4),
            ];
            let first = match stop {
                3 => 6,
                10.. => (stop - 10) as usize,
                _ => steps.len(),
            };
            for step in &steps[..first] {
                step(&mut pass);
            }
            if stop >= 10 {
                return Ok(recorded(2 + first));
            }
            msd_dispatches = first;
        }
        let mut both_ways = 0;
        for (p, &off) in offsets.iter().enumerate() {
            if stop > 20 && p as u32 >= stop - 20 {
                break; // measuring only: the first stop - 20 passes
            }
            pass.set_bind_group(0, &run, &[off]);
            // prepare sizes an unstable pass's dispatch in its own args slot
            if let Some(sweep) = unstable.filter(|_| (unstable_passes >> p) & 1 == 1) {
                pass.set_pipeline(sweep);
                pass.dispatch_workgroups_indirect(&args, (UNSTABLE_ARGS + p as u64) * 12);
                both_ways += 1;
            }
            pass.set_pipeline(&pipes.sweep);
            pass.dispatch_workgroups_indirect(&args, p as u64 * 12);
        }
        // the last pass's output copied back where the passes ran an odd number of times (an
        // empty dispatch otherwise: prepare zeroes it for the MSD path, which sorts in place,
        // and its fall back's plan sizes it again)
        if stop == 2 || stop > 20 {
            return Ok(recorded(2 + msd_dispatches + passes as usize + both_ways));
        }
        pass.set_pipeline(&pipes.finish);
        pass.set_bind_group(0, &run, &[offsets[0]]);
        pass.dispatch_workgroups_indirect(&args, MAX_PASSES as u64 * 12);
        Ok(recorded(3 + msd_dispatches + passes as usize + both_ways))
    }
}

/// The radix layout's buffers for a job beyond one binding, as (buffer, offset, size) ranges:
/// keys, alternate keys, payload and its alternate cut at element `cut.start` (elements of
/// `key_bytes`, 4 for the payloads) into bindings 1..=4 and, up to `cut.end`, 10..=13; every
/// other binding whole. Without a payload its stand-ins are bound whole in both places.
fn split_ranges<'a>(
    whole: &[&'a wgpu::Buffer; 10],
    cut: Range<u64>,
    key_bytes: u64,
    payload: bool,
) -> Vec<(&'a wgpu::Buffer, u64, Option<u64>)> {
    let bytes = |i: usize| match i {
        1 | 2 => key_bytes,
        _ => 4,
    };
    let is_cut = |i: usize| (1..=2).contains(&i) || (payload && (3..=4).contains(&i));
    let first = (0..10).map(|i| match is_cut(i) {
        true => (whole[i], 0, Some(cut.start * bytes(i))),
        false => (whole[i], 0, None),
    });
    let rest = (1..=4).map(|i| match is_cut(i) {
        true => (
            whole[i],
            cut.start * bytes(i),
            Some((cut.end - cut.start) * bytes(i)),
        ),
        false => (whole[i], 0, None),
    });
    first.chain(rest).collect()
}

/// How a sort that recorded the MSD path ran on the GPU (radix.wgsl's C_MSD_FLAG).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsdOutcome {
    /// The MSD path sorted the keys; `dense_buckets` 16-bit buckets of them by msd_dense's
    /// counting sort (their tiles had a bin of more than `MSD_GROUP_MAX` keys); `ranged`: relative
    /// to the keys' range (`radix_layout::msd_range_shift`).
    Ran { dense_buckets: u32, ranged: bool },
    /// A 16-bit bucket held more keys than msd_local takes: the LSD passes sorted them, after the
    /// top digit's pass and the bucket counts had run, and the digits were counted again.
    FellBack,
    /// A top-digit bucket was already too large (or there were no keys): prepare chose the LSD
    /// passes at once, and the digits were counted again for them.
    LsdAtOnce,
}

/// What [`RadixKernels::record`] recorded.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Recorded {
    pub dispatches: usize,
    /// The lowest digit's pass is the unstable sweep (it runs unless that digit is the same in
    /// every key).
    pub unstable_first: bool,
    /// The MSD path was recorded (the GPU may still fall back to the LSD passes).
    pub msd: bool,
    /// The job exceeded one binding: each array was bound as two ranges.
    pub two_bindings: bool,
}

/// Workgroup bytes of msd_local and msd_dense (radix_msd.wgsl) in workgroups of `wg` invocations
/// holding `items` keys each: their bins and a tile of words, the scan's helpers, the job and flag.
pub(crate) fn msd_local_bytes(wg: u32, items: u32, subgroups: bool) -> u32 {
    ((1 << MSD_BIN_BITS) + wg * items) * 4 + crate::scan::scan_helper_bytes(wg, subgroups) + 32
}

/// Workgroup bytes of a `wg`-invocation sweep besides its scratch: its three digit tables
/// (3 KiB), the job and ticket words, the workgroup scan's helpers (`scan::scan_helper_bytes`:
/// per subgroup slot with subgroups, 20 bytes an invocation without, a little to spare) and,
/// without subgroups, the shared ranking's bins (1 KiB). The tests check it against every composed
/// sweep with naga's layouter.
pub(crate) fn other_workgroup_bytes(wg: u32, subgroups: bool) -> u32 {
    let digit_tables = 3 * 256 * 4;
    let words = 32; // job, next_ticket, one_digit, with room
    let bins = if subgroups { 0 } else { 256 * 4 };
    digit_tables + words + crate::scan::scan_helper_bytes(wg, subgroups) + bins
}

/// Workgroup bytes a sweep of `wg` invocations holding `items` keys each needs at most (its
/// scratch with rank tables of `pack` counters a word, and the rest).
fn sweep_bytes(items: u32, min_subgroup: Option<u32>, wg: u32, pack: u32) -> u32 {
    scratch_words(items, min_subgroup, wg, pack) * 4
        + other_workgroup_bytes(wg, min_subgroup.is_some())
}

/// Invocations a sweep workgroup has, and keys an invocation holds in keys-only sorts, sorts with
/// a payload and the unstable sweep, on a device with these limits. By default 512 invocations
/// with subgroups where the whole default tile fits, else 256. An asked-for size is kept where
/// its workgroup memory holds some tile, else 256. Then each count of keys is cut until its tile
/// fits the workgroup memory.
pub(crate) fn sweep_shape(
    t: &SortTuning,
    min_subgroup: Option<u32>,
    max_invocations: u32,
    storage: u32,
) -> (u32, [u32; 4]) {
    let fits = |items: u32, wg: u32| {
        max_invocations >= wg && sweep_bytes(items, min_subgroup, wg, 2) <= storage
    };
    let wg = match t.wg {
        Some(asked) if fits(1, asked) => asked,
        Some(_) => RADIX_WG,
        None if min_subgroup.is_some() && fits(t.items, WIDE_WG) => WIDE_WG,
        None => RADIX_WG,
    };
    let items = [
        t.items,
        t.payload_items,
        t.unstable_items,
        t.wide_items.min(t.items),
    ]
    .map(|mut items| {
        while items > 1 && !fits(items, wg) {
            items -= 1;
        }
        items
    });
    (wg, items)
}

/// A stable sweep's workgroup: invocations, keys an invocation holds, digits a rank-table word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SweepShape {
    pub wg: u32,
    pub items: u32,
    pub pack: u32,
}

/// The sweep of 64-bit keys with a payload where it has a workgroup size of its own: the one
/// asked for, or by default `WIDE_PAYLOAD_WG` with subgroups, where the device allows that many
/// invocations and a tile of `payload_items` keys each (cut while it does not fit) holds at
/// least as many keys as the shared shape's. None: the shared shape (`common_wg`) runs them.
pub(crate) fn wide_payload_shape(
    t: &SortTuning,
    common_wg: u32,
    min_subgroup: Option<u32>,
    max_invocations: u32,
    storage: u32,
) -> Option<SweepShape> {
    let wg = match t.wide_payload_wg {
        Some(asked) => asked,
        None if min_subgroup.is_some() => WIDE_PAYLOAD_WG,
        None => return None,
    };
    if wg == common_wg || wg > max_invocations {
        return None;
    }
    let mut items = t.payload_items;
    while items > 1 && sweep_bytes(items, min_subgroup, wg, 2) > storage {
        items -= 1;
    }
    if sweep_bytes(items, min_subgroup, wg, 2) > storage {
        return None;
    }
    // a smaller tile than the shared shape's is no gain (only an asked-for size takes one)
    if t.wide_payload_wg.is_none() && wg * items < common_wg * t.payload_items {
        return None;
    }
    // one counter a word where it fits (the packed tables measured slower in every sweep)
    let pack = match t.pack {
        None if sweep_bytes(items, min_subgroup, wg, 1) <= storage => 1,
        asked => counters_a_word(asked, items, min_subgroup, wg, storage),
    };
    Some(SweepShape { wg, items, pack })
}

/// Digits a word of the subgroup rank tables (SortTuning::pack) for sweeps of `wg` invocations
/// holding `items` keys each (keys-only) on a device with `storage` bytes of workgroup memory:
/// one where it is asked for and fits, or where it costs no workgroup memory (the tables of
/// one-word counters fit in the words the tile needs anyway); else two.
pub(crate) fn counters_a_word(
    asked: Option<u32>,
    items: u32,
    min_subgroup: Option<u32>,
    wg: u32,
    storage: u32,
) -> u32 {
    let words = |pack: u32| scratch_words(items, min_subgroup, wg, pack);
    match asked {
        Some(1) if sweep_bytes(items, min_subgroup, wg, 1) <= storage => 1,
        None if min_subgroup.is_some() && words(1) == words(2) => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample rules the MSD path out only for a top-digit bucket far over its limit: never
    /// for uniform keys whose buckets sit at the limit, always for keys sharing their top byte,
    /// never for 64-bit keys (which do not take the path) or no keys.
    #[test]
    fn a_sample_rules_out_the_msd_path_for_full_buckets_only() {
        use rand::{Rng, SeedableRng};
        let mut r = rand::rngs::StdRng::seed_from_u64(5);
        let bytes = |keys: &[u32]| {
            keys.iter()
                .flat_map(|k| k.to_ne_bytes())
                .collect::<Vec<u8>>()
        };
        let n = 1 << 20;
        // a tile so large that no range is sorted relative to (msd_range_shift), and a real one
        let (big, tile) = (1 << 24, 4608);
        // uniform: each bucket holds n / 256 keys, here the limit itself (and a sample of 4,096)
        let uniform: Vec<u32> = (0..n).map(|_| r.random()).collect();
        let limit = n as u64 / 256;
        for t in [KeyType::U32, KeyType::I32, KeyType::F32] {
            assert!(!top_digit_too_full(&bytes(&uniform), t, limit, tile), "{t}");
        }
        // one top byte: past four times the limit, and not below it
        let low: Vec<u32> = uniform.iter().map(|k| k >> 12).collect();
        assert!(top_digit_too_full(&bytes(&low), KeyType::U32, limit, big));
        // ... unless the GPU would sort them relative to their range: 20 bits across a top digit
        // over 17 absolute 16-bit buckets, about 61,680 keys each, past half a tile
        let across: Vec<u32> = low.iter().map(|k| k + 0x00f8_0000).collect();
        assert!(!top_digit_too_full(
            &bytes(&across),
            KeyType::U32,
            limit,
            tile
        ));
        // (within one top digit the LSD passes skip it: the sample rules the path out)
        assert!(top_digit_too_full(&bytes(&low), KeyType::U32, limit, tile));
        // small signed keys about zero: their range is 2^19, but the stored top byte 0x00 or 0xff
        let small: Vec<u32> = (0..n)
            .map(|_| r.random_range(-(1 << 18)..1 << 18i32) as u32)
            .collect();
        assert!(
            top_digit_too_full(&bytes(&small), KeyType::U32, limit, tile),
            "a 2^32 range as u32"
        );
        assert!(
            !top_digit_too_full(&bytes(&small), KeyType::I32, limit, tile),
            "2^19 as i32"
        );
        assert!(!top_digit_too_full(
            &bytes(&low),
            KeyType::U32,
            n as u64 / 4,
            big
        ));
        assert!(top_digit_too_full(
            &bytes(&low),
            KeyType::U32,
            n as u64 / 4 - 1,
            big
        ));
        // floats in [-1, 1): a quarter of the keys in [0.5, 1), one top byte (0x3f)
        let floats: Vec<u32> = (0..n)
            .map(|_| r.random_range(-1.0..1.0f32).to_bits())
            .collect();
        assert!(top_digit_too_full(
            &bytes(&floats),
            KeyType::F32,
            n as u64 / 32,
            tile
        ));
        // eight values of their own top digits (codes): one value a bucket, the path kept
        let codes: Vec<u32> = (0..n)
            .map(|_| r.random_range(0..8u32) << 29 | 0x0012_3456)
            .collect();
        assert!(!top_digit_too_full(
            &bytes(&codes),
            KeyType::U32,
            limit,
            tile
        ));
        // a few keys: every key sampled
        assert!(top_digit_too_full(
            &bytes(&[7, 7, 7]),
            KeyType::U32,
            0,
            tile
        ));
        assert!(!top_digit_too_full(
            &bytes(&[7, 7, 7]),
            KeyType::U32,
            1,
            tile
        ));
        assert!(!top_digit_too_full(&[], KeyType::U32, 0, tile));
        let wide: Vec<u8> = vec![0; 8 * 1000];
        assert!(!top_digit_too_full(&wide, KeyType::U64, 0, tile));
    }

    fn tuning(wg: Option<u32>) -> SortTuning {
        SortTuning {
            wg,
            items: 9,
            payload_items: 8,
            unstable_items: 9,
            ..SortTuning::default()
        }
    }

    #[test]
    fn sweep_shapes_fit_the_workgroup_memory() {
        // the H100: 48 KiB, 32-lane subgroups: 512 x 9 (and 8 with a payload)
        assert_eq!(
            sweep_shape(&tuning(None), Some(32), 1024, 48 * 1024),
            (512, [9, 8, 9, 7])
        );
        // lavapipe, 32 KiB: with 8-lane subgroups the 512-invocation tables never fit
        assert_eq!(
            sweep_shape(&tuning(None), Some(8), 1024, 32 * 1024),
            (256, [9, 8, 9, 7])
        );
        assert_eq!(
            sweep_shape(&tuning(Some(512)), Some(8), 1024, 32 * 1024),
            (256, [9, 8, 9, 7])
        );
        // without subgroups 512 invocations are kept when asked for, with 8 keys (the scan's
        // buffers take 10 KiB there)
        assert_eq!(sweep_shape(&tuning(None), None, 1024, 32 * 1024).0, 256);
        assert_eq!(
            sweep_shape(&tuning(Some(512)), None, 1024, 32 * 1024),
            (512, [8, 8, 8, 7])
        );
        // WebGPU's minimum, 16 KiB: 256 invocations of 9 keys with subgroups; without them
        // count_digits' 8 KiB of histograms and the scan's 5 KiB leave no room (no tile fits)
        assert_eq!(
            sweep_shape(&tuning(None), Some(32), 256, 16 * 1024),
            (256, [9, 8, 9, 7])
        );
        assert_eq!(
            sweep_shape(&tuning(None), None, 256, 16 * 1024),
            (256, [1, 1, 1, 1])
        );
        assert!(
            sweep_bytes(1, None, 256, 2) > 16 * 1024,
            "so the sorter refuses radix there"
        );
        // every shape chosen fits, by the estimate the layouter test checks
        for storage in [16 * 1024, 32 * 1024, 48 * 1024, 64 * 1024] {
            for sg in [None, Some(8), Some(32), Some(64)] {
                for asked in [None, Some(256), Some(512), Some(1024)] {
                    let (wg, items) = sweep_shape(&tuning(asked), sg, 1024, storage);
                    for i in items {
                        let bytes = scratch_words(i, sg, wg, 2) * 4
                            + other_workgroup_bytes(wg, sg.is_some());
                        assert!(
                            bytes <= storage || (wg == RADIX_WG && i == 1),
                            "{storage} {sg:?} {asked:?}: {wg} x {i}, {bytes} bytes"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn one_counter_a_word_where_it_costs_nothing() {
        // the H100's defaults: 16 rows of 256 words and 256 early counts fit in the 4,608-key tile
        assert_eq!(scratch_words(9, Some(32), 512, 1), 512 * 9);
        assert_eq!(counters_a_word(None, 9, Some(32), 512, 48 * 1024), 1);
        // lavapipe: 8-lane subgroups need 32 rows a 256-invocation workgroup, more than the tile
        assert!(scratch_words(9, Some(8), 256, 1) > scratch_words(9, Some(8), 256, 2));
        assert_eq!(counters_a_word(None, 9, Some(8), 256, 32 * 1024), 2);
        // asked for: only where the larger tables fit
        assert_eq!(counters_a_word(Some(1), 9, Some(8), 256, 32 * 1024), 2);
        assert_eq!(counters_a_word(Some(1), 9, Some(8), 256, 64 * 1024), 1);
        assert_eq!(counters_a_word(Some(2), 9, Some(32), 512, 48 * 1024), 2);
        // without subgroups there are no rank tables to pack
        assert_eq!(counters_a_word(None, 9, None, 256, 32 * 1024), 2);
    }

    #[test]
    fn nan_test_only_where_an_ascending_float_sort_takes_part_of_the_bits() {
        assert!(nan_test(KeyType::F32, false, &(0..16)));
        assert!(nan_test(KeyType::F64, false, &(20..64)));
        // whole keys, descending orders (key_encode already) and integers share the usual kernels
        assert!(!nan_test(KeyType::F32, false, &(0..32)));
        assert!(!nan_test(KeyType::F64, false, &(0..64)));
        assert!(!nan_test(KeyType::F32, true, &(4..20)));
        assert!(!nan_test(KeyType::U32, false, &(4..20)));
        assert!(!nan_test(KeyType::I64, false, &(0..40)));
    }

    #[test]
    fn wide_argsorts_take_the_largest_workgroups_that_fit() {
        let t = SortTuning::default();
        // 1024 invocations, 48 KiB, 32-lane subgroups: 1024 x 8, one counter a word
        let big = wide_payload_shape(&t, 512, Some(32), 1024, 48 << 10);
        assert_eq!(
            big,
            Some(SweepShape {
                wg: 1024,
                items: 8,
                pack: 1
            })
        );
        // not where the device allows fewer invocations, nor without subgroups by default, nor
        // where the tile would come out smaller than the shared shape's
        assert_eq!(wide_payload_shape(&t, 512, Some(32), 512, 48 << 10), None);
        assert_eq!(wide_payload_shape(&t, 256, None, 1024, 48 << 10), None);
        assert_eq!(wide_payload_shape(&t, 512, Some(32), 1024, 24 << 10), None);
        // an asked-for size is taken where it fits, and is no shape of its own where it is the
        // shared one
        let asked = |wg| SortTuning {
            wide_payload_wg: Some(wg),
            ..t
        };
        let small = wide_payload_shape(&asked(256), 512, Some(32), 1024, 48 << 10);
        assert_eq!(small.map(|s| (s.wg, s.items)), Some((256, 8)));
        assert_eq!(
            wide_payload_shape(&asked(512), 512, Some(32), 1024, 48 << 10),
            None
        );
        assert_eq!(
            wide_payload_shape(&asked(512), 256, Some(8), 1024, 32 << 10),
            None
        );
    }
}
