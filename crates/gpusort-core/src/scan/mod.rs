//! Scans, stream compaction and stable partition (METHODS.md method 3): the [`Scanner`], single
//! pass with a bounded decoupled look-back (shaders/common/lookback.wgsl); 64-bit scans
//! ([`scan64`]) and scans of any length streamed through the GPU ([`streamed`]). Subgroup kernels
//! where the device has SUBGROUP; workgroup-memory twins otherwise.
//!
//! ```
//! use gpusort_core::scan::{Predicate, ScanOp, Scanner};
//! use gpusort_core::{Gpu, GpuOptions};
//!
//! # fn main() -> gpusort_core::Result<()> {
//! let gpu = Gpu::new(&GpuOptions::default())?;
//! let scanner = Scanner::new(&gpu)?;
//! let data: Vec<i32> = vec![3, -1, 4, -1, 5, -9, 2, 6];
//! assert_eq!(scanner.scan(&gpu, &data, ScanOp::Add, true)?, [3, 2, 6, 5, 10, 1, 3, 9]);
//! assert_eq!(scanner.scan(&gpu, &data, ScanOp::Max, false)?[..3], [i32::MIN, 3, 3]);
//! let (kept, _) = scanner.compact(&gpu, &data, None, Predicate::AtLeast(0))?;
//! assert_eq!(kept, [3, 4, 5, 2, 6]);
//! let (parts, _, split) = scanner.partition(&gpu, &data, None, Predicate::Below(0))?;
//! assert_eq!((&parts[..split], &parts[split..]), (&[-1, -1, -9][..], &[3, 4, 5, 2, 6][..]));
//! # Ok(())
//! # }
//! ```

pub mod scan64;
pub mod streamed;
pub(crate) mod wgsl;

// the jobs of both scanners' streamed entries, where their users look first
pub use scan64::Scanner64;
pub use streamed::{ScanStream, SplitStream};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::device::kernel::{self, BindLayout, ParamBlocks, Slot};
use crate::device::transfer;
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::{KeyType, SortKey};
use crate::scan::wgsl as scan_wgsl;

/// How the single-pass kernels are built: a plain value chosen by the caller, never read from the
/// environment. The defaults are the fastest configuration measured (docs/BENCHMARKS.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct ScanTuning {
    /// Invocations per scan workgroup (128, 256, 512 or 1024).
    pub scan_wg: u32,
    /// Vec4s each scan invocation holds (4, 8, 12 or 16; straight-line code).
    pub scan_rounds: u32,
    /// Scan workgroups launched at most, each looping over tiles and loading its next tile
    /// before it looks back for the current one (0: one per tile). 1024 is more than any
    /// current GPU holds at once, so no SM idles, and few enough that surplus ones cost nothing.
    pub scan_workgroups: u32,
    /// Invocations per compaction workgroup without a payload (256, 512 or 1024; half with one).
    pub compact_wg: u32,
    /// Vec4s each compaction invocation holds (2..=16): 10 is the largest tile whose half-kept
    /// elements still fit the stage in one phase.
    pub compact_rounds: u32,
    /// Elements a compaction tile's workgroup-memory stage holds (0: the rule of
    /// [`ScanTuning::compact_stage_size`]); smaller values test tiles written out in several phases.
    pub compact_stage: u32,
    /// Measuring only, results wrong when non-zero: bit 0 skips the packing, bit 1 the write-out.
    pub compact_probe: u32,
    /// Compaction workgroups launched at most, each looping over tiles (0: one per tile).
    pub compact_workgroups: u32,
    /// Compaction's look-back statuses are one word each (value and flag; counts below 2^31):
    /// one load a predecessor instead of two. The scan's sums need all 32 bits.
    pub compact_one_word: bool,
    /// A looping compaction workgroup loads its next tile after packing the current one, so the
    /// two tiles are never live at once (fewer registers).
    pub compact_late_loads: bool,
    /// Predecessors the look-back reads per round on subgroups (1..=64, at most the subgroup's
    /// width); 1 is the classic tile-by-tile walk.
    pub window: u32,
    /// Rounds without progress a workgroup waits on a predecessor before it reduces that tile
    /// itself; 0 takes the fallback every time (for tests).
    pub spin_limit: u32,
    /// After a round that found the nearest tile silent, wait on that tile alone (scan).
    pub scan_wait_nearest: bool,
    /// The same for compaction.
    pub compact_wait_nearest: bool,
    /// Count compaction's kept elements with the shuffle ladder (faster on an H100) instead of
    /// one-bit scans over the count bits.
    pub count_ladder: bool,
    /// Measuring only, results wrong: tiles ignore their predecessors (what the look-back costs).
    pub no_lookback: bool,
    /// u64/i64 scans' tiles scanned by subgroups in contiguous runs (scan64_chained_subgroup.wgsl)
    /// where the device's subgroups are in use, instead of eight consecutive elements an
    /// invocation: off until measured (docs/BENCHMARKS.md, 64-bit scans).
    pub scan64_subgroup_tiles: bool,
    /// Words from one scan tile's look-back status to the next (a power of two, 2..=128): 32,
    /// one 128-byte line each, so tiles polled at once do not share a line.
    pub state_stride: u32,
    /// The same for compaction's one-word statuses: 32, a 128-byte line each.
    pub compact_state_stride: u32,
    /// Count the look-back's walk rounds, silent reads and fallbacks, read with
    /// [`Scanner::look_back_counters`] (measuring).
    pub counters: bool,
}

impl Default for ScanTuning {
    fn default() -> ScanTuning {
        ScanTuning {
            // 256 invocations: two workgroups of this register-heavy kernel (two tiles in
            // registers) share an SM, so one loads while the other looks back
            scan_wg: 256,
            scan_rounds: 8,
            scan_workgroups: 1024,
            compact_workgroups: 1024,
            compact_wg: 256,
            compact_rounds: 10,
            compact_stage: 0,
            compact_probe: 0,
            window: 32,
            compact_one_word: true,
            compact_late_loads: true,
            spin_limit: DEFAULT_SPIN_LIMIT,
            scan_wait_nearest: true,
            compact_wait_nearest: false,
            count_ladder: true,
            no_lookback: false,
            scan64_subgroup_tiles: false,
            counters: false,
            state_stride: 32,
            compact_state_stride: 32,
        }
    }
}

impl ScanTuning {
    /// This tuning, or an error naming the first field out of the range the kernels take.
    pub fn checked(self) -> Result<ScanTuning> {
        let workgroups = |v: u32| v <= 65_535;
        let bad = [
            ("scan_wg", [128, 256, 512, 1024].contains(&self.scan_wg)),
            ("scan_rounds", [4, 8, 12, 16].contains(&self.scan_rounds)),
            ("scan_workgroups", workgroups(self.scan_workgroups)),
            ("compact_wg", [256, 512, 1024].contains(&self.compact_wg)),
            ("compact_rounds", (2..=16).contains(&self.compact_rounds)),
            ("compact_stage", self.compact_stage <= 1 << 16),
            ("compact_probe", self.compact_probe < 4),
            ("compact_workgroups", workgroups(self.compact_workgroups)),
            ("window", (1..=64).contains(&self.window)),
            ("spin_limit", self.spin_limit <= 1 << 24),
            ("state_stride", stride_ok(self.state_stride)),
            ("compact_state_stride", stride_ok(self.compact_state_stride)),
        ]
        .into_iter()
        .find(|(_, ok)| !ok);
        match bad {
            Some((field, _)) => Err(Error::InvalidInput(format!(
                "scan tuning: {field} is out of range"
            ))),
            None => Ok(self),
        }
    }

    /// These settings with workgroups no larger than `gpu` allows (a device made with wgpu's
    /// default limits takes 256 invocations): the same results from smaller tiles.
    pub fn fitted(mut self, gpu: &Gpu) -> ScanTuning {
        let max = gpu
            .limits
            .max_compute_invocations_per_workgroup
            .min(gpu.limits.max_compute_workgroup_size_x);
        while self.scan_wg > max && self.scan_wg > 128 {
            self.scan_wg /= 2;
        }
        while self.compact_wg > max && self.compact_wg > 256 {
            self.compact_wg /= 2;
        }
        self
    }

    /// These settings with the look-back's wait at most `spin_cap` rounds ([`spin_cap`]).
    pub fn capped(mut self, spin_cap: u32) -> ScanTuning {
        self.spin_limit = self.spin_limit.min(spin_cap);
        self
    }

    /// Words from one tile's look-back status to the next for the scan or for compaction: the
    /// one place both the kernels' constants and the state buffer's size come from.
    pub fn look_back_stride(&self, compaction: bool) -> u32 {
        if compaction {
            self.compact_state_stride
        } else {
            self.state_stride
        }
    }

    /// Elements per scan tile.
    pub fn scan_tile(&self) -> u32 {
        self.scan_wg * 4 * self.scan_rounds
    }

    /// Elements per compaction tile of `words`-word elements.
    pub fn compact_tile(&self, payload: bool, words: u32) -> u32 {
        self.compact_wg(payload) * 4 * self.compact_rounds / words
    }

    /// Elements of a compaction tile that its workgroup-memory stage holds on a device with
    /// `storage` bytes of workgroup memory: the whole tile where it fits, with the group scans'
    /// arrays ([`scan_helper_bytes`]), in *half* that storage (so that two workgroups share an
    /// SM: drivers do not give an SM the shared memory its register file would allow), else as
    /// many as do (a tile keeping more is written out in several phases). `compact_stage`
    /// overrides the half, up to the whole storage.
    pub fn compact_stage_size(
        &self,
        payload: bool,
        words: u32,
        subgroups: bool,
        storage: u32,
    ) -> u32 {
        let wg = self.compact_wg(payload);
        let per_element = 4 * (words + payload as u32);
        let reserved = scan_helper_bytes(wg, subgroups);
        let stage = if self.compact_stage != 0 {
            self.compact_stage
                .min(storage.saturating_sub(reserved) / per_element)
        } else {
            (storage / 2).saturating_sub(reserved) / per_element
        };
        stage.min(self.compact_tile(payload, words)).max(1)
    }

    /// Invocations per compaction workgroup: `compact_wg`, halved with a payload; a tile is
    /// `compact_rounds` vec4s per invocation, packed in workgroup memory with its payload.
    pub fn compact_wg(&self, payload: bool) -> u32 {
        if payload {
            self.compact_wg / 2
        } else {
            self.compact_wg
        }
    }
}

/// Workgroup memory a `wg`-invocation kernel of the single-pass families uses besides its own
/// arrays, with a little to spare: common/wgscan_subgroup.wgsl's per-subgroup totals (a u32, a
/// vec4 and a u32 a slot, a slot per four invocations) or common/wgscan_shared.wgsl's
/// per-invocation buffers (a u32 and a vec4 each), and the look-back's few words.
pub fn scan_helper_bytes(wg: u32, subgroups: bool) -> u32 {
    let helpers = if subgroups {
        (wg / 4 + 1) * 24
    } else {
        wg * 20
    };
    helpers + 256
}

/// A look-back status stride the kernels take: a power of two from 2 to 128 words.
pub(crate) fn stride_ok(w: u32) -> bool {
    w.is_power_of_two() && (2..=128).contains(&w)
}

/// The look-back state's first words: the ticket, then the counters (common/lookback.wgsl).
const COUNTER_WORDS: usize = 8;

/// Words before the first tile's status in the look-back state: the ticket and the counters, in
/// a status slot's room at least, so that the ticket shares no polled status's sector or line.
pub fn state_header(stride: u32) -> u32 {
    stride.max(COUNTER_WORDS as u32)
}

/// The operator of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanOp {
    Add,
    Max,
    Min,
    And,
    Or,
    Xor,
}

impl ScanOp {
    pub fn parse(s: &str) -> Result<ScanOp> {
        Ok(match s {
            "add" => ScanOp::Add,
            "max" => ScanOp::Max,
            "min" => ScanOp::Min,
            "and" => ScanOp::And,
            "or" => ScanOp::Or,
            "xor" => ScanOp::Xor,
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown scan operator '{s}' (add, max, min, and, or, xor)"
                )))
            }
        })
    }

    /// (operator code in scan.wgsl, identity bits) for elements of `t`; None where the pair makes
    /// no sense (bitwise operators on floats, 64-bit scans).
    pub fn code(self, t: KeyType) -> Option<(u32, u32)> {
        Some(match (self, t) {
            (ScanOp::Add, KeyType::U32 | KeyType::I32) => (0, 0),
            (ScanOp::Add, KeyType::F32) => (1, 0),
            (ScanOp::Max, KeyType::U32) => (2, 0),
            (ScanOp::Min, KeyType::U32) => (3, u32::MAX),
            (ScanOp::Max, KeyType::I32) => (4, i32::MIN as u32),
            (ScanOp::Min, KeyType::I32) => (5, i32::MAX as u32),
            (ScanOp::And, KeyType::U32 | KeyType::I32) => (6, u32::MAX),
            (ScanOp::Or, KeyType::U32 | KeyType::I32) => (7, 0),
            (ScanOp::Xor, KeyType::U32 | KeyType::I32) => (8, 0),
            _ => return None,
        })
    }
}

/// Which elements a compaction keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Predicate<T> {
    /// Elements before `pivot` in the sort order (NaN is last, -0.0 before +0.0).
    Below(T),
    /// Elements not before `pivot`.
    AtLeast(T),
    /// Numerically nonzero elements (±0.0 are zero; NaN is nonzero, as in NumPy).
    NonZero,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ScanParams {
    n: u32,
    carry_in: u32,
    carry_out: u32,
    pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct CompactParams {
    n: u32,
    pivot_hi: u32,
    pivot_lo: u32,
    base_slot: u32,
    count_slot: u32,
    pad: [u32; 3],
}

const NO_SLOT: u32 = u32::MAX;
/// Rounds of reads (one atomic read per look-back lane) a workgroup spends waiting on a
/// predecessor's published value before it reduces that tile itself. On GPUs that run started
/// workgroups concurrently (NVIDIA) the value is normally there within a few reads; the bound
/// only matters where workgroups do not progress.
pub const DEFAULT_SPIN_LIMIT: u32 = 4096;

/// (family: 0 scan / 1 compact, then the family's configuration).
type PipelineKey = (u8, u32, u32, u32);

/// Builds scan and compaction pipelines on first use and records them.
pub struct Scanner {
    subgroups: bool,
    tuning: ScanTuning,
    /// Tiles a looping workgroup takes at most on this device ([`group_tiles`]).
    group_tiles: u32,
    scan_layout: BindLayout,
    compact_layout: BindLayout,
    pipelines: Mutex<HashMap<PipelineKey, Arc<wgpu::ComputePipeline>>>,
    /// With `tuning.counters`: the state buffer of the last scan and compaction recorded.
    last_state: Mutex<[Option<wgpu::Buffer>; 2]>,
    /// Bound where a job has no carry or no payload (the kernels never touch them then); two,
    /// since one buffer may not be bound read-only and read-write at once.
    placeholders: [wgpu::Buffer; 2],
}

fn tiles(n: u32, tile: u32) -> u32 {
    n.div_ceil(tile).max(1)
}

/// Tiles one workgroup takes at most when workgroups loop over tiles (the scan, compaction and
/// radix sweep's GROUP_TILES): 8 on CPU devices, no bound on GPUs. Why CPU devices need one:
/// llvmpipe (lavapipe) gives each shader invocation one budget of 65,535 loop iterations, shared
/// by every loop it runs (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS, an infinite-loop guard); once it is
/// spent every loop stops after its current iteration and the shader carries on, silently
/// wrong. A workgroup running tile after tile with look-back fallbacks used it up and stopped
/// partway through a tile (always at tile 42 / 58 / 76 for workgroups of 512 / 256 / 128); with
/// at most 8 tiles, and short waits ([`spin_cap`]), a workgroup stays far below it. Hardware GPUs
/// loop without the bound, which costs them time (BENCHMARKS.md).
pub fn group_tiles(gpu: &Gpu) -> u32 {
    if gpu.is_software() {
        8
    } else {
        u32::MAX
    }
}

/// The longest look-back wait (rounds without progress before the fallback) this device's
/// kernels are built with: 64 on CPU devices, where every spin round counts against llvmpipe's
/// loop budget (see [`group_tiles`]: with waits of 4096 rounds, compaction tiles written in
/// several phases by looping workgroups, and radix sorts with long waits, came out wrong now and
/// then), no cap on GPUs. A shorter wait only takes the fallback sooner (the waiting workgroup
/// reduces the silent tile itself): the same results.
pub fn spin_cap(gpu: &Gpu) -> u32 {
    if gpu.is_software() {
        64
    } else {
        u32::MAX
    }
}

/// Workgroups launched for `tiles` tiles: one per tile (`cap` 0), else `cap` but at least
/// enough that none takes more than `group_tiles`.
fn launched(tiles: u32, cap: u32, group_tiles: u32) -> u32 {
    match cap {
        0 => tiles,
        w => tiles.min(w.max(tiles.div_ceil(group_tiles))),
    }
}

impl Scanner {
    pub fn new(gpu: &Gpu) -> Result<Scanner> {
        let scan_layout = BindLayout::new(
            gpu,
            "scan",
            &[
                (0, Slot::params::<ScanParams>()),
                (1, Slot::ReadWrite),
                (2, Slot::Read),
                (3, Slot::ReadWrite),
                (4, Slot::ReadWrite),
            ],
        );
        let compact_layout = BindLayout::new(
            gpu,
            "compact",
            &[
                (0, Slot::params::<CompactParams>()),
                (1, Slot::ReadWrite),
                (2, Slot::Read),
                (3, Slot::ReadWrite),
                (4, Slot::ReadWrite),
                (5, Slot::Read),
                (6, Slot::ReadWrite),
            ],
        );
        Ok(Scanner {
            subgroups: gpu.subgroups().is_some(),
            tuning: ScanTuning::default().fitted(gpu),
            group_tiles: group_tiles(gpu),
            scan_layout,
            compact_layout,
            pipelines: Mutex::new(HashMap::new()),
            last_state: Mutex::new([None, None]),
            placeholders: [
                transfer::storage_buffer(gpu, "unused binding", 16)?,
                transfer::storage_buffer(gpu, "unused binding", 16)?,
            ],
        })
    }

    /// This scanner with `tuning` (checked: a field out of range is an error). Every tuning
    /// gives the same results; kernels wait at most the device's [`spin_cap`].
    pub fn with_tuning(mut self, gpu: &Gpu, tuning: ScanTuning) -> Result<Self> {
        self.tuning = tuning.checked()?.fitted(gpu);
        self.pipelines = Mutex::new(HashMap::new());
        Ok(self)
    }

    /// How this scanner's kernels are built.
    pub fn tuning(&self) -> &ScanTuning {
        &self.tuning
    }

    /// The 64-bit scans (u64, i64, f64) of this scanner's tuning
    /// (`ScanTuning::scan64_subgroup_tiles`, and `no_lookback` in measuring builds), so that every
    /// front end that scans 64-bit elements follows the same stored tuning.
    pub fn scanner64(&self, gpu: &Gpu) -> scan64::Scanner64 {
        scan64::Scanner64::new(gpu)
            .with_subgroup_tiles(gpu, self.tuning.scan64_subgroup_tiles)
            .without_look_back(self.tuning.no_lookback)
    }

    /// Whether these kernels use subgroups on this device.
    pub fn uses_subgroups(&self) -> bool {
        self.subgroups
    }

    fn pipeline(&self, gpu: &Gpu, key: PipelineKey) -> Result<Arc<wgpu::ComputePipeline>> {
        let mut cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let (family, a, b, c) = key;
        // the device's bounds are applied here, where kernels are built (as the radix sort's)
        let tuning = self.tuning.capped(spin_cap(gpu));
        let (source, entry, layout) = if family == 0 {
            (
                scan_wgsl::scan(a, b, c != 0, self.subgroups, &tuning, self.group_tiles),
                "scan",
                &self.scan_layout,
            )
        } else {
            (
                scan_wgsl::compact(
                    a,
                    b != 0,
                    c,
                    self.subgroups,
                    &tuning,
                    self.group_tiles,
                    gpu.limits.max_compute_workgroup_storage_size,
                ),
                "compact",
                &self.compact_layout,
            )
        };
        let module = kernel::module(gpu, entry, &source)?;
        let p = Arc::new(kernel::pipeline(gpu, &module, entry, layout)?);
        cache.insert(key, p.clone());
        Ok(p)
    }

    /// The look-back state of a dispatch of `tiles` tiles (`family` 0: scan, 1: compaction),
    /// kept for [`Scanner::look_back_counters`] when counting.
    fn state_buffer(&self, gpu: &Gpu, tiles: u32, family: usize) -> Result<wgpu::Buffer> {
        let stride = self.tuning.look_back_stride(family == 1);
        let b = transfer::storage_buffer(
            gpu,
            "look-back state",
            (state_header(stride) as u64 + stride as u64 * tiles as u64) * 4,
        )?;
        if self.tuning.counters {
            self.last_state.lock().unwrap_or_else(|p| p.into_inner())[family] = Some(b.clone());
        }
        Ok(b)
    }

    /// With `ScanTuning::counters`, the last scan's (`family` 0) or compaction's (1) look-back
    /// counts once its work is done: (walk rounds, silent reads, fallbacks, summed over tiles;
    /// the most tiles in progress at once; the number in progress as each tile started, summed).
    pub fn look_back_counters(&self, gpu: &Gpu, family: usize) -> Result<Option<[u32; 5]>> {
        let state = self.last_state.lock().unwrap_or_else(|p| p.into_inner())[family].clone();
        match state {
            Some(b) => {
                let v: Vec<u32> = transfer::read_vec(gpu, &b, COUNTER_WORDS)?;
                Ok(Some([v[1], v[2], v[3], v[5], v[6]]))
            }
            None => Ok(None),
        }
    }

    /// Record a scan of `job` into `enc` (nothing is submitted: the caller submits).
    pub fn record_scan(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        job: &ScanJob<'_>,
    ) -> Result<()> {
        let ScanJob {
            src,
            dst,
            n,
            key_type: elem,
            op,
            inclusive,
            carry,
        } = *job;
        let (code, identity) = op
            .code(elem)
            .ok_or_else(|| Error::InvalidInput(format!("a {op:?} scan of {elem} is not supported (integers: add, max, min, and, or, xor; f32: add)")))?;
        let pipeline = self.pipeline(gpu, (0, code, identity, inclusive as u32))?;
        let t = tiles(n, self.tuning.scan_tile());
        let groups = launched(t, self.tuning.scan_workgroups, self.group_tiles);
        let state = self.state_buffer(gpu, t, 0)?;
        let (carry_buffer, carry_in, carry_out) = match carry {
            Some(c) => (c.buffer, c.read.unwrap_or(NO_SLOT), c.write),
            None => (&self.placeholders[0], NO_SLOT, NO_SLOT),
        };
        let mut params = ParamBlocks::new(gpu);
        let off = params.push(&ScanParams {
            n,
            carry_in,
            carry_out,
            pad: 0,
        });
        let params = params.finish(gpu, "scan params");
        gpu.checked(|| {
            let bg = self
                .scan_layout
                .bind(gpu, &[&params, &state, src, dst, carry_buffer]);
            enc.clear_buffer(&state, 0, None);
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("scan"),
                timestamp_writes: None,
            });
            kernel::dispatch(gpu, &mut pass, &pipeline, &bg, &[off], groups);
        })
    }

    /// Scan host values (u32, i32 or f32).
    pub fn scan<T: SortKey>(
        &self,
        gpu: &Gpu,
        data: &[T],
        op: ScanOp,
        inclusive: bool,
    ) -> Result<Vec<T>> {
        if T::TYPE.is_wide() {
            return Err(Error::InvalidInput(format!(
                "scans of {} are not supported (u32, i32, f32)",
                T::TYPE
            )));
        }
        let n = u32::try_from(data.len())
            .map_err(|_| Error::TooLarge(format!("{} elements", data.len())))?;
        let bytes = transfer::align_to(data.len() as u64 * 4, 16);
        check_binding(gpu, bytes)?;
        let src = transfer::storage_buffer(gpu, "scan input", bytes)?;
        transfer::upload(gpu, &src, 0, bytemuck::cast_slice(data))?;
        let dst = transfer::storage_buffer(gpu, "scan output", bytes)?;
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        self.record_scan(
            gpu,
            &mut enc,
            &ScanJob {
                src: &src,
                dst: &dst,
                n,
                key_type: T::TYPE,
                op,
                inclusive,
                carry: None,
            },
        )?;
        gpu.queue.submit([enc.finish()]);
        gpu.wait()?;
        transfer::read_vec(gpu, &dst, data.len())
    }

    /// Record a compaction of `job` into `enc`: the count lands in `counts[count_slot]` on the
    /// GPU (nothing is read back, nothing submitted).
    pub fn record_compact<T: SortKey>(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        job: &CompactJob<'_, T>,
    ) -> Result<()> {
        let (predicate, keep, base_slot, count_slot) =
            (job.predicate, job.keep, job.base_slot, job.count_slot);
        if self.tuning.compact_one_word && job.n >= 1 << 31 {
            // one-word statuses hold counts below 2^31 (no binding holds that many elements today)
            return Err(Error::InvalidInput(format!(
                "cannot compact {} elements in one dispatch (at most 2^31 - 1)",
                job.n
            )));
        }
        let words = T::TYPE.size() as u32 / 4;
        let (pred, pivot) = match predicate {
            Predicate::Below(p) => (0, Some(p)),
            Predicate::AtLeast(p) => (1, Some(p)),
            Predicate::NonZero => (2, None),
        };
        // the element type and predicate are compile-time constants of the kernel
        let variant = T::TYPE.code() << 3 | pred << 1 | keep as u32;
        let payload = job.payload.is_some();
        let pipeline = self.pipeline(gpu, (1, words, payload as u32, variant))?;
        let t = tiles(job.n, self.tuning.compact_tile(payload, words));
        let state = self.state_buffer(gpu, t, 1)?;
        let (pivot_hi, pivot_lo) = pivot
            .map(|p| crate::keys::order::encode_key(&p, false))
            .unwrap_or((0, 0));
        let mut params = ParamBlocks::new(gpu);
        let off = params.push(&CompactParams {
            n: job.n,
            pivot_hi,
            pivot_lo,
            base_slot: base_slot.unwrap_or(NO_SLOT),
            count_slot,
            pad: [0; 3],
        });
        let params = params.finish(gpu, "compact params");
        let (pin, pout) = match job.payload {
            Some((a, b)) => (a, b),
            None => (&self.placeholders[0], &self.placeholders[1]),
        };
        gpu.checked(|| {
            let bg = self.compact_layout.bind(
                gpu,
                &[&params, &state, job.src, job.dst, job.counts, pin, pout],
            );
            enc.clear_buffer(&state, 0, None);
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("compact"),
                timestamp_writes: None,
            });
            kernel::dispatch(
                gpu,
                &mut pass,
                &pipeline,
                &bg,
                &[off],
                launched(t, self.tuning.compact_workgroups, self.group_tiles),
            );
        })
    }

    /// Keep the elements matching `predicate`, in order, with their payload.
    pub fn compact<T: SortKey>(
        &self,
        gpu: &Gpu,
        data: &[T],
        payload: Option<&[u32]>,
        predicate: Predicate<T>,
    ) -> Result<(Vec<T>, Option<Vec<u32>>)> {
        let (out, pay, count) = self.split_host(gpu, data, payload, predicate, false)?;
        Ok((out[..count].to_vec(), pay.map(|p| p[..count].to_vec())))
    }

    /// Stable partition: elements matching `predicate` first, the others after, both in input
    /// order. Returns the split index too.
    pub fn partition<T: SortKey>(
        &self,
        gpu: &Gpu,
        data: &[T],
        payload: Option<&[u32]>,
        predicate: Predicate<T>,
    ) -> Result<(Vec<T>, Option<Vec<u32>>, usize)> {
        self.split_host(gpu, data, payload, predicate, true)
    }

    fn split_host<T: SortKey>(
        &self,
        gpu: &Gpu,
        data: &[T],
        payload: Option<&[u32]>,
        predicate: Predicate<T>,
        both: bool,
    ) -> Result<(Vec<T>, Option<Vec<u32>>, usize)> {
        check_payload(data.len(), payload)?;
        let n = u32::try_from(data.len())
            .map_err(|_| Error::TooLarge(format!("{} elements", data.len())))?;
        let bytes = data.len() as u64 * T::TYPE.size() as u64;
        check_binding(gpu, bytes)?;
        let src = transfer::storage_buffer(gpu, "compact input", bytes)?;
        transfer::upload(gpu, &src, 0, bytemuck::cast_slice(data))?;
        let dst = transfer::storage_buffer(gpu, "compact output", bytes)?;
        let counts = transfer::storage_buffer(gpu, "counts", 16)?;
        let pay = match payload {
            Some(p) => Some((
                transfer::buffer_from(gpu, "payload", p)?,
                transfer::storage_buffer(gpu, "payload out", p.len() as u64 * 4)?,
            )),
            None => None,
        };
        let job = CompactJob {
            src: &src,
            dst: &dst,
            counts: &counts,
            n,
            payload: pay.as_ref().map(|(a, b)| (a, b)),
            predicate,
            keep: true,
            base_slot: None,
            count_slot: 0,
        };
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        self.record_compact(gpu, &mut enc, &job)?;
        if both {
            self.record_compact(
                gpu,
                &mut enc,
                &CompactJob {
                    keep: false,
                    base_slot: Some(0),
                    count_slot: 1,
                    ..job
                },
            )?;
        }
        gpu.queue.submit([enc.finish()]);
        gpu.wait()?;
        let c: Vec<u32> = transfer::read_vec(gpu, &counts, 2)?;
        let count = c[0] as usize;
        let len = if both { data.len() } else { count };
        let out: Vec<T> = transfer::read_vec(gpu, &dst, len)?;
        let pay_out = match &pay {
            Some((_, b)) => Some(transfer::read_vec::<u32>(gpu, b, len)?),
            None => None,
        };
        Ok((out, pay_out, count))
    }
}

/// Where a piece of a longer scan finds what came before it and leaves what it adds up to
/// (u32 slots of `buffer`; `read` None for the first piece, `write` another slot than `read`).
#[derive(Clone, Copy)]
pub struct Carry<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub read: Option<u32>,
    pub write: u32,
}

/// One scan of GPU buffers. Every buffer needs `BufferUsages::STORAGE`; `src` and `dst` hold
/// `n` elements of `key_type`, rounded up to whole 16 bytes (the kernels read vec4s).
#[derive(Clone, Copy)]
pub struct ScanJob<'a> {
    pub src: &'a wgpu::Buffer,
    /// A buffer other than `src`.
    pub dst: &'a wgpu::Buffer,
    pub n: u32,
    /// u32, i32 or f32 here; u64, i64 or f64 in [`scan64::Scanner64::record`].
    pub key_type: KeyType,
    pub op: ScanOp,
    /// Element i is the combination of elements 0..=i (inclusive) or 0..i (exclusive).
    pub inclusive: bool,
    /// For one piece of a longer array: the value before it, and where its end's value goes.
    pub carry: Option<Carry<'a>>,
}

/// One compaction (or one side of a partition) of GPU buffers. Every buffer needs
/// `BufferUsages::STORAGE`; `src` and `dst` are rounded up to whole 16 bytes.
pub struct CompactJob<'a, T> {
    pub src: &'a wgpu::Buffer,
    pub dst: &'a wgpu::Buffer,
    /// u32 slots: the kept count is written to `counts[count_slot]` (and read from
    /// `counts[base_slot]` as the output's start, for a partition's second side).
    pub counts: &'a wgpu::Buffer,
    pub n: u32,
    /// (payload in, payload out), one u32 an element each.
    pub payload: Option<(&'a wgpu::Buffer, &'a wgpu::Buffer)>,
    pub predicate: Predicate<T>,
    /// Keep the elements matching `predicate` (true) or those that do not (false).
    pub keep: bool,
    pub base_slot: Option<u32>,
    pub count_slot: u32,
}

/// A payload, where given, has one value per element.
/// A job writing results into the caller's slice: it must hold one result per element.
pub(crate) fn check_lengths(input: usize, output: usize) -> Result<()> {
    if input != output {
        return Err(Error::InvalidInput(format!(
            "{input} elements but room for {output} results"
        )));
    }
    Ok(())
}

pub(crate) fn check_payload(elements: usize, payload: Option<&[u32]>) -> Result<()> {
    match payload {
        Some(p) if p.len() != elements => Err(Error::InvalidInput(format!(
            "{elements} elements but {} payload values",
            p.len()
        ))),
        _ => Ok(()),
    }
}

fn check_binding(gpu: &Gpu, bytes: u64) -> Result<()> {
    if bytes > gpu.max_binding() {
        return Err(Error::TooLarge(format!(
            "{} MiB exceed the {} MiB one binding holds on {}",
            bytes >> 20,
            gpu.max_binding() >> 20,
            gpu.adapter.name
        )));
    }
    Ok(())
}
