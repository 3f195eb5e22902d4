//! Scans of 64-bit elements (u64, i64, f64) on the GPU: u64 and i64 in one dispatch a chunk
//! (`shaders/scan64_chained.wgsl`: tiles chained by a decoupled look-back), f64 in three
//! (`shaders/scan64.wgsl`: tile totals, tile prefixes in one workgroup, tile scans, as its bits
//! cannot travel in the look-back's u32 status words); the running value carried on the GPU from
//! chunk to chunk. WGSL has no 64-bit integers, so u64 and i64 travel as two u32 words with
//! carries and signed compares spelled out; f64 needs the device's SHADER_F64. The CPU twin is
//! `reference::scan::scan64`.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::device::kernel::{self, BindLayout, Slot};
use crate::device::transfer::{self, Drainer, Filler};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::{KeyType, SortKey};
use crate::scan::streamed::{self, ScanStream};
use crate::scan::{check_lengths, ScanJob, ScanOp};

/// Elements a workgroup scans: shaders/scan64.wgsl's TILE (f64) and scan64_chained.wgsl's
/// CHAINED_TILE (integers).
const TILE: u64 = 1024;
const CHAINED_TILE: u64 = 2048;
/// Words before the first tile's status in the chained scan's state, and words a status.
const STATUS_HEADER: u64 = 4;
const STATUS_WORDS: u64 = 4;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n: u32,
    tiles: u32,
    carry_in: u32,
    carry_out: u32,
}

/// Whether `op` applies to 64-bit elements of `t`: every operator on u64 and i64, add on f64.
pub fn supports(t: KeyType, op: ScanOp) -> bool {
    match t {
        KeyType::U64 | KeyType::I64 => true,
        KeyType::F64 => op == ScanOp::Add,
        _ => false,
    }
}

/// The WGSL that defines `T`, `combine`, `identity`, `INCLUSIVE` and the input for one scan:
/// elements of `t`, or (`widen`) 32-bit integers of that type widened to `t` as they are read.
fn prelude(
    t: KeyType,
    op: ScanOp,
    inclusive: bool,
    widen: Option<KeyType>,
    spin_limit: u32,
    no_lookback: bool,
) -> String {
    let input = match widen {
        None => {
            "@group(0) @binding(1) var<storage, read> src: array<T>;
                 fn element(i: u32) -> T { return src[i]; }
"
        }
        Some(KeyType::I32) => {
            "@group(0) @binding(1) var<storage, read> src: array<u32>;
                 fn element(i: u32) -> T {
  let x = src[i];
                   return vec2<u32>(x, select(0u, 0xffffffffu, x >= 0x80000000u));
}
"
        }
        Some(_) => {
            "@group(0) @binding(1) var<storage, read> src: array<u32>;
                 fn element(i: u32) -> T { return vec2<u32>(src[i], 0u); }
"
        }
    };
    let body = match (t, op) {
        (KeyType::F64, _) => "alias T = f64;\nfn identity() -> T { return 0.0lf; }\n\
             fn combine(a: T, b: T) -> T { return a + b; }\n"
            .to_string(),
        (_, ScanOp::Add) => "fn identity() -> T { return vec2<u32>(0u, 0u); }\n\
             fn combine(a: T, b: T) -> T {\n  let lo = a.x + b.x;\n  \
             return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));\n}\n"
            .to_string(),
        (_, ScanOp::And) => "fn identity() -> T { return vec2<u32>(0xffffffffu, 0xffffffffu); }\n\
             fn combine(a: T, b: T) -> T { return a & b; }\n"
            .to_string(),
        (_, ScanOp::Or) => "fn identity() -> T { return vec2<u32>(0u, 0u); }\n\
             fn combine(a: T, b: T) -> T { return a | b; }\n"
            .to_string(),
        (_, ScanOp::Xor) => "fn identity() -> T { return vec2<u32>(0u, 0u); }\n\
             fn combine(a: T, b: T) -> T { return a ^ b; }\n"
            .to_string(),
        (_, ScanOp::Max | ScanOp::Min) => {
            let signed = t == KeyType::I64;
            // a before b in the type's order: high words (signed for i64), then low words
            let high = if signed {
                "bitcast<i32>(a.y) < bitcast<i32>(b.y)"
            } else {
                "a.y < b.y"
            };
            let identity = match (op, signed) {
                (ScanOp::Max, false) => "vec2<u32>(0u, 0u)",
                (ScanOp::Max, true) => "vec2<u32>(0u, 0x80000000u)",
                (_, false) => "vec2<u32>(0xffffffffu, 0xffffffffu)",
                (_, true) => "vec2<u32>(0xffffffffu, 0x7fffffffu)",
            };
            let pick = if op == ScanOp::Max {
                "select(a, b, below)"
            } else {
                "select(b, a, below)"
            };
            format!(
                "fn identity() -> T {{ return {identity}; }}\n\
                 fn combine(a: T, b: T) -> T {{\n  \
                 let below = {high} || (a.y == b.y && a.x < b.x);\n  return {pick};\n}}\n"
            )
        }
    };
    let alias = if t == KeyType::F64 {
        ""
    } else {
        "alias T = vec2<u32>;\n"
    };
    format!(
        "{alias}{body}const INCLUSIVE: u32 = {}u;\nconst SPIN_LIMIT: u32 = {spin_limit}u;\n\
         const NO_LOOKBACK: u32 = {}u;\n{input}",
        inclusive as u32, no_lookback as u32
    )
}

/// The bits of `op`'s identity on 64-bit elements of `t`: the running value a scan starts from.
fn identity(t: KeyType, op: ScanOp) -> [u8; 8] {
    match (t, op) {
        (KeyType::F64, _) | (_, ScanOp::Add | ScanOp::Or | ScanOp::Xor) => [0; 8],
        (_, ScanOp::And) => [0xff; 8],
        (KeyType::I64, ScanOp::Max) => i64::MIN.to_le_bytes(),
        (KeyType::I64, _) => i64::MAX.to_le_bytes(),
        (_, ScanOp::Max) => [0; 8],
        _ => [0xff; 8],
    }
}

/// One type and operator's kernels: the chained scan (integers), or the three of f64's.
enum Kernels {
    Chained(wgpu::ComputePipeline),
    ThreeSteps {
        totals: wgpu::ComputePipeline,
        prefixes: wgpu::ComputePipeline,
        scans: wgpu::ComputePipeline,
    },
}

impl Kernels {
    /// Elements a workgroup scans.
    fn tile(&self) -> u64 {
        match self {
            Kernels::Chained(_) => CHAINED_TILE,
            Kernels::ThreeSteps { .. } => TILE,
        }
    }

    /// The scan of `n` elements bound by `bind` (whose params say `tiles(n)` tiles), `state` the
    /// chained scan's look-back state (zeroed here; unused by f64's steps).
    fn record(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        bind: &wgpu::BindGroup,
        state: &wgpu::Buffer,
        n: u64,
    ) {
        let tiles = n.div_ceil(self.tile()) as u32;
        if let Kernels::Chained(_) = self {
            enc.clear_buffer(
                state,
                0,
                Some((STATUS_HEADER + STATUS_WORDS * tiles as u64) * 4),
            );
        }
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("scan64"),
            timestamp_writes: None,
        });
        match self {
            Kernels::Chained(scan) => kernel::dispatch(gpu, &mut pass, scan, bind, &[], tiles),
            Kernels::ThreeSteps {
                totals,
                prefixes,
                scans,
            } => {
                kernel::dispatch(gpu, &mut pass, totals, bind, &[], tiles);
                kernel::dispatch(gpu, &mut pass, prefixes, bind, &[], 1);
                kernel::dispatch(gpu, &mut pass, scans, bind, &[], tiles);
            }
        }
    }
}

impl Params {
    /// Piece `c` of a scan, `len` elements in tiles of `tile`: it reads the running value from
    /// carry slot c % 2 and leaves it, itself included, in the other for the next piece (the
    /// chained scan's; f64's steps keep theirs in slot 0).
    fn piece(len: u64, tile: u64, c: u64) -> Params {
        Params {
            n: len as u32,
            tiles: len.div_ceil(tile) as u32,
            carry_in: (c % 2) as u32,
            carry_out: ((c + 1) % 2) as u32,
        }
    }
}

/// A scan's scratch for pieces of at most `longest` elements: f64's tile totals, the chained
/// scan's look-back state (a stand-in for f64), and the two carry slots, the first holding
/// `before`, the value the first piece starts from.
struct Scratch {
    totals: wgpu::Buffer,
    state: wgpu::Buffer,
    carry: wgpu::Buffer,
}

impl Scratch {
    fn new(gpu: &Gpu, t: KeyType, longest: u64, before: [u8; 8]) -> Result<Scratch> {
        let words = match t {
            KeyType::F64 => 4,
            _ => STATUS_HEADER + STATUS_WORDS * longest.div_ceil(CHAINED_TILE).max(1),
        };
        let mut slots = before.to_vec();
        slots.extend_from_slice(&[0; 8]);
        Ok(Scratch {
            totals: transfer::storage_buffer(gpu, "scan64 totals", longest.div_ceil(TILE) * 8)?,
            state: transfer::storage_buffer(gpu, "scan64 look-back", words * 4)?,
            carry: transfer::buffer_from(gpu, "scan64 carry", &slots)?,
        })
    }

    /// The bind group of one piece: its params, its input and output ranges, this scratch.
    fn bind(
        &self,
        gpu: &Gpu,
        layout: &BindLayout,
        params: &wgpu::Buffer,
        src: (&wgpu::Buffer, u64, Option<u64>),
        dst: (&wgpu::Buffer, u64, Option<u64>),
    ) -> wgpu::BindGroup {
        layout.bind_ranges(
            gpu,
            &[
                (params, 0, None),
                src,
                dst,
                (&self.totals, 0, None),
                (&self.carry, 0, None),
                (&self.state, 0, None),
            ],
        )
    }
}

/// The 64-bit scans of one device; kernels are compiled on first use of each type and operator.
/// (element type, operator, inclusive, the 32-bit type widened on reading if any).
type KernelKey = (KeyType, ScanOp, bool, Option<KeyType>);

/// One streamed 64-bit scan: elements of `t` (read from 32-bit integers of `widen`'s type
/// where given), `before` the running value the first chunk starts from (None: the
/// operator's identity), chunks of at most `chunk` elements (None: the streamed jobs' size).
struct Pass {
    t: KeyType,
    widen: Option<KeyType>,
    before: Option<[u8; 8]>,
    n: usize,
    op: ScanOp,
    inclusive: bool,
    chunk: Option<usize>,
}

impl Pass {
    /// A scan of a whole array in the streamed jobs' chunks.
    fn whole(t: KeyType, widen: Option<KeyType>, n: usize, op: ScanOp, inclusive: bool) -> Pass {
        Pass {
            t,
            widen,
            before: None,
            n,
            op,
            inclusive,
            chunk: None,
        }
    }
}

pub struct Scanner64 {
    layout: BindLayout,
    /// Elements a chunk holds at most (None: as many as one binding takes).
    chunk: Option<usize>,
    /// The chained scan's longest wait on a silent predecessor (reads) before it reduces that
    /// tile itself: the scans' default, capped on CPU devices (`scan::spin_cap`).
    spin_limit: u32,
    /// Measuring only (`ScanTuning::no_lookback`), results wrong: the chained scan's tiles
    /// ignore their predecessors, to time what the look-back costs.
    no_lookback: bool,
    /// Tiles scanned by subgroups (`ScanTuning::scan64_subgroup_tiles`), where they are in use.
    subgroup_tiles: bool,
    kernels: Mutex<HashMap<KernelKey, std::sync::Arc<Kernels>>>,
}

impl Scanner64 {
    pub fn new(gpu: &Gpu) -> Scanner64 {
        let layout = BindLayout::new(
            gpu,
            "scan64",
            &[
                (0, Slot::Uniform),
                (1, Slot::Read),
                (2, Slot::ReadWrite),
                (3, Slot::ReadWrite),
                (4, Slot::ReadWrite),
                (5, Slot::ReadWrite),
            ],
        );
        Scanner64 {
            layout,
            chunk: None,
            spin_limit: crate::scan::DEFAULT_SPIN_LIMIT.min(crate::scan::spin_cap(gpu)),
            no_lookback: false,
            subgroup_tiles: false,
            kernels: Mutex::new(HashMap::new()),
        }
    }

    /// This scanner with its compiled kernels dropped (a builder changed how they are built).
    fn recompiled(mut self) -> Scanner64 {
        self.kernels
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self
    }

    /// Measuring only, results wrong (`ScanTuning::no_lookback`): the chained scan's tiles ignore
    /// their predecessors, so a bench times the scan without its look-back.
    pub fn without_look_back(mut self, skip: bool) -> Scanner64 {
        self.no_lookback = skip;
        self.recompiled()
    }

    /// u64/i64 tiles scanned by subgroups in contiguous runs (`ScanTuning::scan64_subgroup_tiles`)
    /// where this device's subgroups are in use; else as before. Same results.
    pub fn with_subgroup_tiles(mut self, gpu: &Gpu, on: bool) -> Scanner64 {
        self.subgroup_tiles = on && gpu.subgroups().is_some();
        self.recompiled()
    }

    /// Waits of at most `reads` on a silent predecessor (0: every tile reduces its silent
    /// predecessors at once), so that tests reach the look-back's fallback. Same results.
    pub fn with_spin_limit(mut self, reads: u32) -> Scanner64 {
        self.spin_limit = reads;
        self.recompiled()
    }

    /// Chunks of at most `elements` (rounded up to whole tiles), so that tests can carry a
    /// running value across chunks without gigabytes of input.
    pub fn with_chunk(mut self, elements: usize) -> Scanner64 {
        self.chunk = Some(elements.div_ceil(TILE as usize).max(1) * TILE as usize);
        self
    }

    fn kernels(
        &self,
        gpu: &Gpu,
        t: KeyType,
        op: ScanOp,
        inclusive: bool,
        widen: Option<KeyType>,
    ) -> Result<std::sync::Arc<Kernels>> {
        let mut cache = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = cache.get(&(t, op, inclusive, widen)) {
            return Ok(k.clone());
        }
        let chained = t != KeyType::F64;
        let subgroups = chained && self.subgroup_tiles;
        let part = |on: bool, source: &'static str| if on { source } else { "" };
        let source = format!(
            "{}{}\n{}\n{}\n{}",
            prelude(t, op, inclusive, widen, self.spin_limit, self.no_lookback),
            crate::wgsl::COMMON,
            crate::wgsl::SCAN64,
            part(chained, crate::wgsl::SCAN64_CHAINED),
            part(subgroups, crate::wgsl::SCAN64_CHAINED_SUBGROUP),
        );
        let module = kernel::module(gpu, "scan64", &source)?;
        let pipe = |entry| kernel::pipeline(gpu, &module, entry, &self.layout);
        let k = std::sync::Arc::new(match chained {
            true if subgroups => Kernels::Chained(pipe("scan_chained_sg")?),
            true => Kernels::Chained(pipe("scan_chained")?),
            false => Kernels::ThreeSteps {
                totals: pipe("tile_totals")?,
                prefixes: pipe("tile_prefixes")?,
                scans: pipe("tile_scans")?,
            },
        });
        cache.insert((t, op, inclusive, widen), k.clone());
        Ok(k)
    }

    /// Scan `data` (u64, i64 or f64) as `job` says (its operator, inclusive or not, chunks of at
    /// most `job.chunk` elements, and `job.before`: what everything before `data` combines to,
    /// for a part of a longer array such as a device group's), handing each finished chunk of
    /// results to `sink(first_index, results)` in order: [`crate::scan::Scanner::scan_streamed`]
    /// for 64-bit elements. Integer operators wrap; f64 additions happen in a tree order, so the
    /// last bits may differ from a sequential sum.
    pub fn scan_streamed<T: SortKey>(
        &self,
        gpu: &Gpu,
        data: &[T],
        job: &ScanStream<T>,
        mut sink: impl FnMut(usize, &[T]) -> Result<()> + Send,
    ) -> Result<()> {
        let before = match job.before {
            None => None,
            Some(b) => Some(<[u8; 8]>::try_from(bytemuck::bytes_of(&b)).map_err(|_| {
                Error::InvalidInput(format!("{} is not a 64-bit element type", T::TYPE))
            })?),
        };
        let pass = Pass {
            t: T::TYPE,
            widen: None,
            before,
            n: data.len(),
            op: job.op,
            inclusive: job.inclusive,
            chunk: Some(job.chunk),
        };
        self.run(
            gpu,
            pass,
            |r, slot| slot.fill(0, bytemuck::cast_slice(&data[r])),
            |r, slot| {
                let mut piece = transfer::zeroed_vec::<T>(r.len());
                slot.drain(0, bytemuck::cast_slice_mut(&mut piece));
                (r.start, piece)
            },
            |_, (at, piece)| sink(at, &piece),
        )
    }

    /// The scan of `data` straight into `out` (the same length), chunk by chunk.
    pub fn scan_into<T: SortKey>(
        &self,
        gpu: &Gpu,
        data: &[T],
        out: &mut [T],
        op: ScanOp,
        inclusive: bool,
    ) -> Result<()> {
        check_lengths(data.len(), out.len())?;
        let pass = Pass::whole(T::TYPE, None, data.len(), op, inclusive);
        self.run(
            gpu,
            pass,
            |r, slot| slot.fill(0, bytemuck::cast_slice(&data[r])),
            |r, slot| slot.drain(0, bytemuck::cast_slice_mut(&mut out[r])),
            |_, ()| Ok(()),
        )
    }

    /// The scan of 32-bit integers `data` (u32 or i32) in 64 bits (u64 or i64) straight into
    /// `out`: NumPy's cumsum of 32-bit integers. The GPU widens the elements as it reads them,
    /// so the input crosses to the GPU at its own width and no widened copy is made anywhere.
    pub fn scan_widened_into<S: SortKey, T: SortKey>(
        &self,
        gpu: &Gpu,
        data: &[S],
        out: &mut [T],
        op: ScanOp,
        inclusive: bool,
    ) -> Result<()> {
        check_lengths(data.len(), out.len())?;
        match (S::TYPE, T::TYPE) {
            (KeyType::U32, KeyType::U64) | (KeyType::I32, KeyType::I64) => {}
            (s, t) => {
                return Err(Error::InvalidInput(format!(
                    "a widening scan reads u32 into u64 or i32 into i64, not {s} into {t}"
                )))
            }
        }
        let pass = Pass::whole(T::TYPE, Some(S::TYPE), data.len(), op, inclusive);
        self.run(
            gpu,
            pass,
            |r, slot| slot.fill(0, bytemuck::cast_slice(&data[r])),
            |r, slot| slot.drain(0, bytemuck::cast_slice_mut(&mut out[r])),
            |_, ()| Ok(()),
        )
    }

    /// Record the scan of `job.n` 64-bit elements (u64, i64 or f64) from `job.src` into
    /// `job.dst`, GPU buffers of at least `8 * n` bytes each, into `enc`; nothing is submitted:
    /// [`crate::scan::Scanner::record_scan`] for 64-bit elements, so that GPU-resident data and
    /// the bench scan without a trip through the host. One dispatch (f64: three) a piece of at
    /// most one binding (and of this scanner's chunk), the running value passed from piece to
    /// piece on the GPU, so buffers beyond one binding are scanned whole; scratch is made for the
    /// call. Carries between separate calls are the streamed scans' own.
    pub fn record(
        &self,
        gpu: &Gpu,
        enc: &mut wgpu::CommandEncoder,
        job: &ScanJob<'_>,
    ) -> Result<()> {
        let ScanJob {
            src,
            dst,
            n,
            key_type: t,
            op,
            inclusive,
            carry,
        } = *job;
        self.check(gpu, t, op)?;
        if carry.is_some() {
            return Err(Error::InvalidInput(
                "a recorded 64-bit scan takes no carry (the streamed scans carry between pieces)"
                    .into(),
            ));
        }
        if n == 0 {
            return Ok(());
        }
        let k = self.kernels(gpu, t, op, inclusive, None)?;
        // pieces of at most one binding (and this scanner's chunk), each starting at an aligned
        // offset, scanned one after another: the running value passes between them on the GPU
        // (the chained scan's alternating carry slots, f64's steps' slot 0)
        let align = (gpu.limits.min_storage_buffer_offset_alignment as u64 / 8).max(1);
        let piece = (gpu.max_binding() / 8 / align * align)
            .min(self.chunk.map_or(u64::MAX, |c| c as u64))
            .max(align);
        let pieces = (n as u64).div_ceil(piece);
        let scratch = Scratch::new(gpu, t, piece.min(n as u64), identity(t, op))?;
        for c in 0..pieces {
            let at = c * piece;
            let len = piece.min(n as u64 - at);
            let params = wgpu::util::DeviceExt::create_buffer_init(
                &gpu.device,
                &wgpu::util::BufferInitDescriptor {
                    label: Some("scan64 params"),
                    contents: bytemuck::bytes_of(&Params::piece(len, k.tile(), c)),
                    usage: wgpu::BufferUsages::UNIFORM,
                },
            );
            let (range, bytes) = (at * 8, Some(len * 8));
            gpu.checked(|| {
                let bind = scratch.bind(
                    gpu,
                    &self.layout,
                    &params,
                    (src, range, bytes),
                    (dst, range, bytes),
                );
                k.record(gpu, enc, &bind, &scratch.state, len);
            })?;
        }
        Ok(())
    }

    /// Whether this device scans `t` with `op`: the operator applies and f64 has its shaders.
    fn check(&self, gpu: &Gpu, t: KeyType, op: ScanOp) -> Result<()> {
        if !supports(t, op) {
            return Err(Error::InvalidInput(format!(
                "a {op:?} scan of {t} is not supported (u64/i64: every operator; f64: add)"
            )));
        }
        if t == KeyType::F64 && !gpu.features.contains(wgpu::Features::SHADER_F64) {
            return Err(Error::InvalidInput(format!(
                "{} has no 64-bit float shaders (SHADER_F64): an f64 scan needs them; the CPU engine has no such limit",
                gpu.adapter.name
            )));
        }
        Ok(())
    }

    /// The chunk loop (`streamed::run_chunks`: chunk k + 1 copied in while chunk k is scanned)
    /// of `pass`: `fill(range, slot)` puts a chunk's input into the slot's upload side,
    /// `drain(range, slot)` takes its results out of the download side, and `sink(k, what drain
    /// made)` gets that on the writer thread.
    fn run<P: Send>(
        &self,
        gpu: &Gpu,
        pass: Pass,
        mut fill: impl FnMut(std::ops::Range<usize>, &mut Filler<'_>) + Send,
        mut drain: impl FnMut(std::ops::Range<usize>, &Drainer<'_>) -> P + Send,
        sink: impl FnMut(usize, P) -> Result<()> + Send,
    ) -> Result<()> {
        let Pass {
            t,
            widen,
            before,
            n,
            op,
            inclusive,
            chunk,
        } = pass;
        self.check(gpu, t, op)?;
        let k = self.kernels(gpu, t, op, inclusive, widen)?;
        // bytes an input element takes on its way in
        let size_in = if widen.is_some() { 4 } else { 8 };
        // a chunk fills at most one binding, the job's chunk (the streamed jobs' size where it
        // names none) and the scanner's own limit (tests)
        let binding = ((gpu.max_binding() / 8) / TILE * TILE).clamp(TILE, 1 << 28) as usize;
        let chunk = chunk
            .unwrap_or_else(|| streamed::chunk_elements_for(gpu, 8, n))
            .min(self.chunk.unwrap_or(usize::MAX))
            .min(binding)
            .max(1);
        let first = chunk.min(n).max(1) as u64;
        let src = transfer::storage_buffer(gpu, "scan64 src", first * size_in)?;
        let dst = transfer::storage_buffer(gpu, "scan64 dst", first * 8)?;
        let scratch = Scratch::new(gpu, t, first, before.unwrap_or(identity(t, op)))?;
        let params = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("scan64 params"),
            size: std::mem::size_of::<Params>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bind = scratch.bind(gpu, &self.layout, &params, (&src, 0, None), (&dst, 0, None));
        let range = |c: usize| c * chunk..((c + 1) * chunk).min(n);
        streamed::run_chunks(
            gpu,
            n.div_ceil(chunk),
            (first * size_in, first * 8),
            |c, slot| fill(range(c), slot),
            |c, encoder, slot| {
                let len = range(c).len() as u64;
                // applied before this chunk's commands and after the previous chunk's
                gpu.queue.write_buffer(
                    &params,
                    0,
                    bytemuck::bytes_of(&Params::piece(len, k.tile(), c as u64)),
                );
                encoder.copy_buffer_to_buffer(slot.upload_buffer(), 0, &src, 0, len * size_in);
                k.record(gpu, encoder, &bind, &scratch.state, len);
                encoder.copy_buffer_to_buffer(&dst, 0, slot.download_buffer(), 0, len * 8);
                Ok(len * 8)
            },
            |c, slot| drain(range(c), slot),
            sink,
        )
    }

    /// [`Scanner64::scan_into`] a new vector.
    pub fn scan<T: SortKey>(
        &self,
        gpu: &Gpu,
        data: &[T],
        op: ScanOp,
        inclusive: bool,
    ) -> Result<Vec<T>> {
        let mut all = transfer::zeroed_vec(data.len());
        self.scan_into(gpu, data, &mut all, op, inclusive)?;
        Ok(all)
    }
}
