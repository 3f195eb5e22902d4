//! What a batch is: its tasks and their work, the modes, the merged launch's limits and the
//! task descriptor's words the kernel, the plan and the twin share.

use crate::keys::KeyType;
use crate::scan::ScanOp;

/// Sorts up to this many keys (or with segments up to this size) run in a merged launch when a
/// job has several; larger ones sort one by one, where the single sort's tuned kernels win (on
/// an H100, 1000 sorts of 2^16 keys ran 6.3x faster merged than one dispatch chain each:
/// docs/BENCHMARKS.md).
pub const MERGED_SORT_MAX: usize = 1 << 16;

/// Scans and splits up to this many elements run in a merged launch when a job has several;
/// larger ones go one by one through the single-pass scan, which reads and writes each element
/// once (the merged scan reads twice).
pub const MERGED_SCAN_MAX: usize = 1 << 20;

/// Whether a sort of `len` keys (its segments' size where it has segments) of `key_type` runs in
/// a job's merged launch: the merged kernels sort 32-bit keys whole in bitonic blocks, so a sort
/// asked of the radix sort (`algorithm`) or on part of the key bits (`whole_keys` false) goes
/// one by one.
pub fn sort_merges(
    key_type: KeyType,
    algorithm: crate::sort::Algorithm,
    whole_keys: bool,
    len: usize,
) -> bool {
    !key_type.is_wide()
        && !matches!(algorithm, crate::sort::Algorithm::Radix)
        && whole_keys
        && len <= MERGED_SORT_MAX
}

/// Whether a scan or split of `len` elements of `key_type` runs in a job's merged launch (the
/// merged kernels take 32-bit elements).
pub fn scan_merges(key_type: KeyType, len: usize) -> bool {
    !key_type.is_wide() && len <= MERGED_SCAN_MAX
}

/// Block capacities (words of workgroup memory) the merged kernel is built for. A task uses the
/// smallest that holds it; longer tasks are split into blocks of the largest.
pub const CAPACITIES: [u32; 3] = [256, 1024, 4096];
pub(super) const MAX_CAP: u32 = 4096;
pub(super) const TASK_WORDS: usize = 12;
pub(super) const FLAG_MIRROR: u32 = 1;
pub(super) const FLAG_ENCODE: u32 = 2;
pub(super) const FLAG_DECODE: u32 = 4;
pub(super) const FLAG_DESCENDING: u32 = 8;
pub(super) const FLAG_INCLUSIVE: u32 = 1;
pub(super) const FLAG_KEEP_REST: u32 = 1;
pub(super) const FLAG_FAIL: u32 = 0x10000;
pub(super) const FLAG_STEPS_SHIFT: u32 = 4;
/// Global steps one sort phase fuses in registers (groups of up to 8 elements).
pub(super) const MAX_FUSED_STEPS: u32 = 3;

/// Invocations per workgroup for blocks of `cap` words: one per compare-exchange pair up to 256.
pub fn workgroup_size(cap: u32) -> u32 {
    (cap / 2).clamp(1, 256)
}

/// Bytes of workgroup memory a block of `cap` words declares (the padded tile and the sums).
pub(super) fn workgroup_memory(cap: u32) -> u32 {
    (cap + cap / 32 + workgroup_size(cap)) * 4
}

/// What a task does to its region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Sort the region's keys in place.
    Sort { key_type: KeyType, descending: bool },
    /// Scan the region in place.
    Scan {
        key_type: KeyType,
        op: ScanOp,
        inclusive: bool,
    },
    /// Stable split of the region into `dst..dst + n` (which must not overlap it): the elements
    /// passing `test` first, in order, then — for a partition (`keep_rest`) — the others, in
    /// order; a compaction leaves the rest of the destination as it was. The passing count is
    /// stored at data word `count_at`.
    Split {
        key_type: KeyType,
        test: Test,
        keep_rest: bool,
        dst: u32,
        count_at: u32,
    },
}

/// What a split keeps first, with pivots as the element's bits (`f32::to_bits` etc.); the
/// semantics of [`crate::scan::Predicate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    Below(u32),
    AtLeast(u32),
    NonZero,
}

impl Work {
    pub(super) fn key_type(&self) -> KeyType {
        match *self {
            Work::Sort { key_type, .. }
            | Work::Scan { key_type, .. }
            | Work::Split { key_type, .. } => key_type,
        }
    }
}

/// One task of a batch: `work` on data words `offset..offset + n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchTask {
    pub work: Work,
    pub offset: u32,
    pub n: u32,
    /// Tasks (indices into the batch) that must finish first.
    pub deps: Vec<usize>,
    pub(super) fail_first: bool,
}

/// Tasks over one data buffer, with dependencies.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub tasks: Vec<BatchTask>,
}

impl Batch {
    /// Add a task; returns its index (for later tasks' `deps`).
    pub fn add(&mut self, work: Work, offset: u32, n: u32, deps: &[usize]) -> usize {
        self.tasks.push(BatchTask {
            work,
            offset,
            n,
            deps: deps.to_vec(),
            fail_first: false,
        });
        self.tasks.len() - 1
    }

    /// Testing the fallback: every block of `task` gives up in the merged launch, as a failed or
    /// stalled producer would, and must be finished by the resume dispatches.
    #[doc(hidden)]
    pub fn fail_in_merged_launch(&mut self, task: usize) {
        self.tasks[task].fail_first = true;
    }

    /// Data words the batch touches.
    pub fn words(&self) -> u64 {
        self.tasks
            .iter()
            .map(|t| t.offset as u64 + t.n as u64)
            .max()
            .unwrap_or(0)
    }
}

/// How launches are recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Mode {
    /// Per launch: merged when it has at least [`MERGED_FROM_LEVELS`] dependency levels and this
    /// device passed the self-test, else safe.
    #[default]
    Auto,
    /// Two dispatches per launch (the launch and the fallback's resume dispatch).
    Merged,
    /// One dispatch per dependency level.
    Safe,
}

/// Dependency levels from which `Auto` runs a launch merged. On the H100 (docs/BENCHMARKS.md)
/// one dispatch per level costs about 8 µs, less than what the merged launch's waiting costs
/// shallow graphs: safe mode was as fast or faster up to 15 levels, even at 50 levels, and the
/// merged launch 1.23-1.31x faster at 100 to 1000 levels.
pub const MERGED_FROM_LEVELS: usize = 64;

/// What a recorded batch did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RunStats {
    /// The mode that ran (`Auto` resolved): `Merged` when any launch ran merged.
    pub mode: Mode,
    /// Launches that ran merged.
    pub merged_launches: usize,
    pub tasks: usize,
    /// Phases: gpusort-sched tasks after splitting sorts and scans into passes.
    pub phases: usize,
    pub launches: usize,
    /// Workgroups over all launches (blocks of all phases).
    pub blocks: usize,
    /// Dispatches recorded (merged: two per launch, the launch and its resume dispatch; safe: one
    /// per dependency level).
    pub dispatches: usize,
    /// Blocks the merged launch deferred to the resume dispatches (host runs only).
    pub deferred: u64,
}
