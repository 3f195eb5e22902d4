//! Many small tasks in shared GPU launches (METHODS.md method 5): the merged launch of
//! shaders/merged.wgsl, fed by gpusort-sched's plans.
//!
//! A [`Batch`] lists tasks (sorts, scans and stable splits of regions of one u32 data buffer)
//! and their dependencies. Each task becomes one or more phases (a sort longer than one block
//! runs the bitonic plan's passes, a scan or split longer than one block counts or reduces, then
//! applies), each phase a
//! gpusort-sched task split into blocks of `CAP` words. The plan groups phases into launches by
//! workgroup memory and orders them; the [`Scheduler`] records each launch either
//!
//! - **merged**: one dispatch for every block of the launch (workgroups take tickets, wait on
//!   their producers with bounded spins, and defer when a wait runs out), then one indirect
//!   "resume" dispatch of one workgroup that runs whatever was deferred, in table order (zero
//!   workgroups when nothing was): two dispatches per launch however deep the graph; or
//! - **safe**: one plain dispatch per dependency level, no waiting at all.
//!
//! [`Mode::Auto`] picks merged where a self-test on this device ([`Scheduler::merged_proven`])
//! gave the CPU reference's results, else safe.
//!
//! Elements: the merged kernels take 32-bit elements (u32, i32, f32), sort them in the library's
//! key order (NaN last both ways, -0.0 before +0.0), scan them with the scan operators, and split
//! them with the compaction predicates. 64-bit elements and payloads go through
//! [`crate::Sorter`] and [`crate::scan::Scanner`].
//!
//! ```
//! use gpusort_core::schedule::{Batch, Scheduler, Work};
//! use gpusort_core::scan::ScanOp;
//! use gpusort_core::{Gpu, GpuOptions, KeyType};
//!
//! # fn main() -> gpusort_core::Result<()> {
//! let gpu = Gpu::new(&GpuOptions::default())?;
//! // 100 small sorts of 300 keys each, then a sum scan of the first region once it is sorted
//! let mut data: Vec<u32> = (0..30_000u32).map(|i| i.wrapping_mul(2_654_435_761) % 1000).collect();
//! let mut batch = Batch::default();
//! let sort = Work::Sort { key_type: KeyType::U32, descending: false };
//! let first = batch.add(sort, 0, 300, &[]);
//! for t in 1..100 {
//!     batch.add(sort, 300 * t, 300, &[]);
//! }
//! let scan = Work::Scan { key_type: KeyType::U32, op: ScanOp::Add, inclusive: true };
//! batch.add(scan, 0, 300, &[first]);
//! let want = gpusort_core::schedule::reference(&batch, &data);
//! Scheduler::new(&gpu)?.run_host(&gpu, &batch, &mut data)?;
//! assert_eq!(data, want);
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use gpusort_sched::{Plan, Task, TaskGraph};

use crate::device::kernel::{self, Layout, ParamBlocks, Slot};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::KeyType;
use crate::scan::ScanOp;
use crate::sort::{BitonicPlan, Pass};

use crate::device::transfer;

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
const MAX_CAP: u32 = 4096;
const TASK_WORDS: usize = 12;
const FLAG_MIRROR: u32 = 1;
const FLAG_ENCODE: u32 = 2;
const FLAG_DECODE: u32 = 4;
const FLAG_DESCENDING: u32 = 8;
const FLAG_INCLUSIVE: u32 = 1;
const FLAG_KEEP_REST: u32 = 1;
const FLAG_FAIL: u32 = 0x10000;
const FLAG_STEPS_SHIFT: u32 = 4;
/// Global steps one sort phase fuses in registers (groups of up to 8 elements).
const MAX_FUSED_STEPS: u32 = 3;

/// Invocations per workgroup for blocks of `cap` words: one per compare-exchange pair up to 256.
pub fn workgroup_size(cap: u32) -> u32 {
    (cap / 2).clamp(1, 256)
}

/// Bytes of workgroup memory a block of `cap` words declares (the padded tile and the sums).
fn workgroup_memory(cap: u32) -> u32 {
    (cap + cap / 32 + workgroup_size(cap)) * 4
}

/// `global_group_r(d, g, lo, mirror)` for r = 1..=3: the fused global steps of
/// shaders/merged.wgsl on one group of 2^r elements, straight-line (see `own_networks`).
pub fn global_networks() -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for r in 1..=MAX_FUSED_STEPS as usize {
        let size = 1usize << r;
        let _ = writeln!(
            s,
            "fn global_group_{r}(d: Task, g: u32, lo: u32, mirror: bool) {{"
        );
        for m in 0..size {
            let _ = writeln!(
                s,
                "    let i{m} = group_index(g, lo, {r}u, mirror, {m}u);\n    var x{m} = load_elem(d, i{m});"
            );
        }
        let cx = |s: &mut String, a: usize, b: usize| {
            let _ = writeln!(
                s,
                "        {{ let t = x{a}; x{a} = min(t, x{b}); x{b} = max(t, x{b}); }}"
            );
        };
        // the first step: mirrored (m with m ^ (size - 1)) or plain (m with m | size / 2)
        s.push_str("    if (mirror) {\n");
        for m in 0..size / 2 {
            cx(&mut s, m, m ^ (size - 1));
        }
        s.push_str("    } else {\n");
        for m in (0..size).filter(|m| m & (size / 2) == 0) {
            cx(&mut s, m, m | (size / 2));
        }
        s.push_str("    }\n");
        let mut j = size / 4;
        while j >= 1 {
            for m in (0..size).filter(|m| m & j == 0) {
                cx(&mut s, m, m | j);
            }
            j /= 2;
        }
        for m in 0..size {
            let _ = writeln!(s, "    store_elem(d, i{m}, x{m});");
        }
        s.push_str("}\n\n");
    }
    s
}

/// The register networks of shaders/merged.wgsl for `per` words per invocation: `own_sort(li,
/// kmax)` runs every stage up to min(kmax, per) on the invocation's own consecutive words,
/// `own_merge(li)` the steps below `per` of a later stage. Straight-line code over named
/// variables, as in bitonic_wgsl.rs, so no key sits in a dynamically indexed array (drivers put
/// those in slow local memory).
pub fn own_networks(per: u32) -> String {
    use std::fmt::Write;
    let per = per as usize;
    let cx = |out: &mut String, a: usize, b: usize| {
        let _ = writeln!(
            out,
            "        {{ let x = r{a}; r{a} = min(x, r{b}); r{b} = max(x, r{b}); }}"
        );
    };
    let load = |out: &mut String| {
        out.push_str("    let base = li * PER_INVOCATION;\n");
        for m in 0..per {
            let _ = writeln!(out, "    var r{m} = tile[pad(base + {m}u)];");
        }
    };
    let store = |out: &mut String| {
        for m in 0..per {
            let _ = writeln!(out, "    tile[pad(base + {m}u)] = r{m};");
        }
    };
    let mut s = String::from("fn own_sort(li: u32, kmax: u32) {\n");
    load(&mut s);
    let mut k = 2;
    while k <= per {
        let _ = writeln!(s, "    if (kmax >= {k}u) {{");
        let mut j = k / 2;
        while j >= 1 {
            for m in 0..per {
                let partner = if j == k / 2 { m ^ (k - 1) } else { m | j };
                if partner > m && (j == k / 2 || m & j == 0) {
                    cx(&mut s, m, partner);
                }
            }
            j /= 2;
        }
        s.push_str("    }\n");
        k *= 2;
    }
    store(&mut s);
    s.push_str("}\n\nfn own_merge(li: u32) {\n");
    load(&mut s);
    let mut j = per / 2;
    while j >= 1 {
        for m in (0..per).filter(|m| m & j == 0) {
            cx(&mut s, m, m | j);
        }
        j /= 2;
    }
    store(&mut s);
    s.push_str("}\n");
    s
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
    fn key_type(&self) -> KeyType {
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
    fail_first: bool,
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

/// One phase: a gpusort-sched task with the kernel's descriptor.
#[derive(Clone, Copy)]
struct Phase {
    kind: u32,
    offset: u32,
    n: u32,
    blocks: u32,
    a: u32,
    b: u32,
    flags: u32,
    cap: u32,
    partials: u32,
    dst: u32,
    count_at: u32,
}

/// The phases of every task, as a graph for gpusort-sched.
struct Expanded {
    phases: Vec<Phase>,
    graph: TaskGraph,
    /// First partial of each phase (scans).
    partial_at: Vec<u32>,
    partials: u32,
}

fn capacity_for(n: u32) -> u32 {
    CAPACITIES.into_iter().find(|&c| n <= c).unwrap_or(MAX_CAP)
}

fn expand(batch: &Batch, data_words: u64) -> Result<Expanded> {
    // the task-level graph first, for errors that name the user's tasks
    let mut user = TaskGraph::default();
    for (i, t) in batch.tasks.iter().enumerate() {
        if t.offset as u64 + t.n as u64 > data_words {
            return Err(Error::InvalidInput(format!(
                "task {i} covers words {}..{} of a {data_words}-word buffer",
                t.offset,
                t.offset as u64 + t.n as u64
            )));
        }
        if !matches!(
            t.work.key_type(),
            KeyType::U32 | KeyType::I32 | KeyType::F32
        ) {
            return Err(Error::InvalidInput(format!(
                "the merged launch takes 32-bit elements, not {}",
                t.work.key_type()
            )));
        }
        if let Work::Split { dst, count_at, .. } = t.work {
            let (src, out) = (
                t.offset as u64..t.offset as u64 + t.n as u64,
                dst as u64..dst as u64 + t.n as u64,
            );
            let overlaps = |a: &std::ops::Range<u64>, b: &std::ops::Range<u64>| {
                a.start < b.end && b.start < a.end
            };
            if out.end > data_words || count_at as u64 >= data_words {
                return Err(Error::InvalidInput(format!(
                    "task {i}'s destination or count lies outside the {data_words}-word buffer"
                )));
            }
            if overlaps(&src, &out)
                || src.contains(&(count_at as u64))
                || out.contains(&(count_at as u64))
            {
                return Err(Error::InvalidInput(format!(
                    "task {i}'s source, destination and count word must not overlap"
                )));
            }
        }
        user.add(Task {
            name: format!("task {i}"),
            blocks: 1,
            workgroup_memory: 0,
            deps: t.deps.clone(),
        });
    }
    user.topological_order()
        .map_err(|e| Error::InvalidInput(e.to_string()))?;

    let mut phases: Vec<Phase> = Vec::new();
    let mut chain: Vec<(usize, usize)> = Vec::new(); // (first, last) phase of each task
    for t in &batch.tasks {
        let first = phases.len();
        let cap = capacity_for(t.n);
        let blocks = t.n.div_ceil(cap).max(1);
        let base = Phase {
            kind: 0,
            offset: t.offset,
            n: t.n,
            blocks,
            a: 0,
            b: 0,
            flags: if t.fail_first { FLAG_FAIL } else { 0 },
            cap,
            partials: 0,
            dst: 0,
            count_at: 0,
        };
        // scans and splits: a per-block count (reduce) phase when there is more than one block,
        // then the apply phase, which reads the counts
        let mut counted = |count_kind: u32, apply: Phase| {
            if blocks > 1 {
                phases.push(Phase {
                    kind: count_kind,
                    partials: blocks,
                    ..apply
                });
            }
            phases.push(apply);
        };
        match t.work {
            Work::Sort {
                key_type,
                descending,
            } => {
                let key_flags = base.flags
                    | key_type.code() << 8
                    | if descending { FLAG_DESCENDING } else { 0 };
                let span = t.n.max(1).next_power_of_two().min(cap);
                let plan = BitonicPlan::new(
                    t.n.max(2),
                    t.n.max(2).next_power_of_two(),
                    cap,
                    MAX_FUSED_STEPS,
                );
                for pass in &plan.passes {
                    phases.push(match *pass {
                        Pass::LocalSort => Phase {
                            a: span,
                            flags: key_flags | FLAG_ENCODE,
                            ..base
                        },
                        Pass::Global {
                            j, mirror, steps, ..
                        } => Phase {
                            kind: 1,
                            // groups of 2^steps over the spans of 2j indices covering n
                            blocks: ((t.n.div_ceil(2 * j) * 2 * j) >> steps).div_ceil(cap >> steps),
                            b: j,
                            flags: key_flags
                                | steps << FLAG_STEPS_SHIFT
                                | if mirror { FLAG_MIRROR } else { 0 },
                            ..base
                        },
                        Pass::LocalMerge { .. } => Phase {
                            kind: 2,
                            flags: key_flags,
                            ..base
                        },
                    });
                }
                phases.last_mut().expect("a sort has a phase").flags |= FLAG_DECODE;
            }
            Work::Scan {
                key_type,
                op,
                inclusive,
            } => {
                let (code, identity) = op.code(key_type).ok_or_else(|| {
                    Error::InvalidInput(format!("no {op:?} scan of {key_type} elements"))
                })?;
                counted(
                    3,
                    Phase {
                        kind: 4,
                        a: code,
                        b: identity,
                        flags: base.flags | if inclusive { FLAG_INCLUSIVE } else { 0 },
                        ..base
                    },
                );
            }
            Work::Split {
                key_type,
                test,
                keep_rest,
                dst,
                count_at,
            } => {
                let (a, b) = match test {
                    Test::Below(p) => (0, p),
                    Test::AtLeast(p) => (1, p),
                    Test::NonZero => (2, 0),
                };
                counted(
                    5,
                    Phase {
                        kind: 6,
                        a,
                        b,
                        flags: base.flags
                            | key_type.code() << 8
                            | if keep_rest { FLAG_KEEP_REST } else { 0 },
                        dst,
                        count_at,
                        ..base
                    },
                );
            }
        }
        chain.push((first, phases.len() - 1));
    }
    let mut graph = TaskGraph::default();
    let mut partial_at = Vec::with_capacity(phases.len());
    let mut partials = 0;
    for (i, t) in batch.tasks.iter().enumerate() {
        let (first, last) = chain[i];
        for p in first..=last {
            let deps = if p == first {
                t.deps.iter().map(|&d| chain[d].1).collect()
            } else {
                vec![p - 1]
            };
            graph.add(Task {
                name: format!("task {i} phase {}", p - first),
                blocks: phases[p].blocks,
                workgroup_memory: workgroup_memory(phases[p].cap),
                deps,
            });
            // a scan's apply phase reads the partials its reduce phase wrote
            if phases[p].partials > 0 {
                partial_at.push(partials);
                partials += phases[p].partials;
            } else if matches!(phases[p].kind, 4 | 6) && p > first {
                partial_at.push(partial_at[p - 1]);
            } else {
                partial_at.push(0);
            }
        }
    }
    Ok(Expanded {
        phases,
        graph,
        partial_at,
        partials,
    })
}

#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    mode: u32,
    begin: u32,
    end: u32,
    deferred_at: u32,
    tasks_at: u32,
    deps_at: u32,
    table_at: u32,
    ticket_at: u32,
    marks_at: u32,
    done_at: u32,
    partials_at: u32,
    args_at: u32,
    pad: [u32; 4],
}

const MODE_MERGED: u32 = 0;
const MODE_LEVEL: u32 = 1;
const MODE_RESUME: u32 = 2;

/// One launch laid out in the plan, state and args buffers.
struct LaunchLayout {
    cap: u32,
    base: Params,
    levels: Vec<std::ops::Range<u32>>,
    slots: u32,
}

/// The buffers' contents for a whole batch.
struct Layouts {
    plan_words: Vec<u32>,
    state_words: u64,
    args_words: Vec<u32>,
    launches: Vec<LaunchLayout>,
}

fn lay_out(ex: &Expanded, plan: &Plan) -> Layouts {
    let mut plan_words: Vec<u32> = Vec::new();
    let mut state = 0u32;
    let mut args_words: Vec<u32> = Vec::new();
    let mut launches = Vec::new();
    for launch in &plan.launches {
        let t_count = launch.tasks.len() as u32;
        let tasks_at = plan_words.len() as u32;
        let deps_at = tasks_at + t_count * TASK_WORDS as u32;
        let mut deps: Vec<u32> = Vec::new();
        let mut descriptors = Vec::with_capacity(launch.tasks.len() * TASK_WORDS);
        for (local, &g) in launch.tasks.iter().enumerate() {
            let ph = &ex.phases[g];
            descriptors.extend_from_slice(&[
                ph.kind,
                ph.offset,
                ph.n,
                ph.blocks,
                ph.a,
                ph.b,
                ph.flags,
                deps.len() as u32,
                launch.deps[local].len() as u32,
                ex.partial_at[g],
                ph.dst,
                ph.count_at,
            ]);
            deps.extend_from_slice(&launch.deps[local]);
        }
        plan_words.extend_from_slice(&descriptors);
        plan_words.extend_from_slice(&deps);
        let table_at = plan_words.len() as u32;
        for s in &launch.table {
            plan_words.extend_from_slice(&[s.task, s.block]);
        }
        let slots = launch.table.len() as u32;
        // state: [ticket][deferred count][task marks][per-block completion bits]
        let base = Params {
            tasks_at,
            deps_at,
            table_at,
            ticket_at: state,
            deferred_at: state + 1,
            marks_at: state + 2,
            done_at: state + 2 + t_count,
            partials_at: 0, // filled below, after every launch's state
            args_at: args_words.len() as u32,
            end: slots,
            ..Params::default()
        };
        state = base.done_at + slots.div_ceil(32);
        args_words.extend_from_slice(&[0, 1, 1]);
        launches.push(LaunchLayout {
            cap: launch
                .tasks
                .iter()
                .map(|&g| ex.phases[g].cap)
                .max()
                .unwrap_or(CAPACITIES[0]),
            base,
            levels: launch.levels.clone(),
            slots,
        });
    }
    for l in &mut launches {
        l.base.partials_at = state;
    }
    Layouts {
        plan_words,
        state_words: state as u64 + ex.partials as u64,
        args_words,
        launches,
    }
}

/// Builds the merged kernel once per block capacity; records and runs batches.
pub struct Scheduler {
    layout: Layout,
    pipelines: Mutex<HashMap<u32, Arc<wgpu::ComputePipeline>>>,
    mode: Mode,
    spin_limit: u32,
    proven: OnceLock<bool>,
}

/// Reads a waiting block makes of its producer's mark before it defers. NVIDIA runs started
/// workgroups concurrently and producers hold lower tickets, so waits end within a few reads;
/// the bound matters where workgroups do not progress.
pub const DEFAULT_SPIN_LIMIT: u32 = 1 << 14;

impl Scheduler {
    pub fn new(gpu: &Gpu) -> Result<Scheduler> {
        let layout = Layout::new(
            gpu,
            "merged launch",
            &[
                (0, Slot::params::<Params>()),
                (1, Slot::Read),
                (2, Slot::ReadWrite),
                (3, Slot::ReadWrite),
                (4, Slot::ReadWrite),
            ],
        );
        Ok(Scheduler {
            layout,
            pipelines: Mutex::new(HashMap::new()),
            mode: Mode::Auto,
            spin_limit: DEFAULT_SPIN_LIMIT,
            proven: OnceLock::new(),
        })
    }

    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Bound on a waiting block's reads (0: every block with a producer defers at once; tests).
    pub fn with_spin_limit(mut self, reads: u32) -> Self {
        self.spin_limit = reads;
        self.pipelines = Mutex::new(HashMap::new());
        self
    }

    fn pipeline(&self, gpu: &Gpu, cap: u32) -> Result<Arc<wgpu::ComputePipeline>> {
        let mut cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.get(&cap) {
            return Ok(p.clone());
        }
        let source = merged(cap, self.spin_limit);
        let module = kernel::module(gpu, "merged launch", &source)?;
        let p = Arc::new(kernel::pipeline(gpu, &module, "run", &self.layout)?);
        cache.insert(cap, p.clone());
        Ok(p)
    }

    /// The mode a launch of `levels` dependency levels runs in on `gpu` (`Auto` resolved; the
    /// self-test runs the first time a deep launch asks).
    pub fn launch_mode(&self, gpu: &Gpu, levels: usize) -> Result<Mode> {
        Ok(match self.mode {
            Mode::Auto => {
                if levels >= MERGED_FROM_LEVELS && self.merged_proven(gpu)? {
                    Mode::Merged
                } else {
                    Mode::Safe
                }
            }
            m => m,
        })
    }

    /// Whether the merged launch gave the CPU reference's results on this device: a batch of
    /// dependent multi-block sorts and scans, run once per scheduler (a few milliseconds).
    pub fn merged_proven(&self, gpu: &Gpu) -> Result<bool> {
        if let Some(&p) = self.proven.get() {
            return Ok(p);
        }
        let (batch, data) = self_test_batch();
        let mut got = data.clone();
        let probe = Scheduler::new(gpu)?
            .with_mode(Mode::Merged)
            .with_spin_limit(self.spin_limit);
        probe.run_host(gpu, &batch, &mut got)?;
        let ok = got == reference(&batch, &data);
        tracing::info!(ok, "merged-launch self-test");
        Ok(*self.proven.get_or_init(|| ok))
    }

    /// Record `batch` on `data` (u32 words, at least `batch.words()`, `BufferUsages::STORAGE`)
    /// into `encoder`; nothing is submitted.
    pub fn record(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        batch: &Batch,
        data: &wgpu::Buffer,
    ) -> Result<(RunStats, Recorded)> {
        let ex = expand(batch, data.size() / 4)?;
        let plan = ex
            .graph
            .plan()
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        let lay = lay_out(&ex, &plan);
        let mut stats = RunStats {
            mode: Mode::Safe,
            tasks: batch.tasks.len(),
            phases: ex.phases.len(),
            launches: plan.launches.len(),
            blocks: plan.slots(),
            ..RunStats::default()
        };
        let plan_buf = transfer::buffer_from(gpu, "merged plan", &lay.plan_words)?;
        let state = transfer::storage_buffer(gpu, "merged state", lay.state_words * 4)?;
        let args_bytes: &[u8] = bytemuck::cast_slice(&lay.args_words);
        let args = transfer::indirect_buffer(gpu, "merged resume args", args_bytes.len() as u64)?;
        transfer::upload(gpu, &args, 0, args_bytes)?;
        // resume dispatches read `args` as INDIRECT, so they bind a stand-in for it (they never
        // defer, so never write it)
        let no_args = transfer::storage_buffer(gpu, "merged resume no args", 16)?;
        let mut params = ParamBlocks::new(gpu);
        // (pipeline cap, params offset, how to dispatch)
        enum Launch {
            Groups(u32),
            Indirect(u64),
        }
        let mut dispatches: Vec<(u32, u32, Launch)> = Vec::new();
        for l in &lay.launches {
            let mode = self.launch_mode(gpu, l.levels.len())?;
            if mode == Mode::Merged {
                stats.mode = Mode::Merged;
                stats.merged_launches += 1;
            }
            match mode {
                Mode::Safe => {
                    for r in &l.levels {
                        let p = Params {
                            mode: MODE_LEVEL,
                            begin: r.start,
                            end: r.end,
                            ..l.base
                        };
                        dispatches.push((l.cap, params.push(&p), Launch::Groups(r.end - r.start)));
                    }
                }
                _ => {
                    let p = Params {
                        mode: MODE_MERGED,
                        ..l.base
                    };
                    dispatches.push((l.cap, params.push(&p), Launch::Groups(l.slots)));
                    let p = Params {
                        mode: MODE_RESUME,
                        ..l.base
                    };
                    let at = l.base.args_at as u64 * 4;
                    dispatches.push((l.cap, params.push(&p), Launch::Indirect(at)));
                }
            }
        }
        let params = params.finish(gpu, "merged params");
        stats.dispatches = dispatches.len();
        let pipelines: HashMap<u32, Arc<wgpu::ComputePipeline>> = lay
            .launches
            .iter()
            .map(|l| Ok((l.cap, self.pipeline(gpu, l.cap)?)))
            .collect::<Result<_>>()?;
        gpu.checked(|| {
            let with_args = self
                .layout
                .bind(gpu, &[&params, &plan_buf, &state, &args, data]);
            let without_args = self
                .layout
                .bind(gpu, &[&params, &plan_buf, &state, &no_args, data]);
            encoder.clear_buffer(&state, 0, None);
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("merged launch"),
                timestamp_writes: None,
            });
            for (cap, offset, launch) in &dispatches {
                let pipeline = &pipelines[cap];
                match *launch {
                    Launch::Groups(groups) => {
                        kernel::dispatch(gpu, &mut pass, pipeline, &with_args, &[*offset], groups)
                    }
                    Launch::Indirect(at) => {
                        pass.set_pipeline(pipeline);
                        pass.set_bind_group(0, &without_args, &[*offset]);
                        pass.dispatch_workgroups_indirect(&args, at);
                    }
                }
            }
        })?;
        Ok((
            stats,
            Recorded {
                state,
                deferred_at: lay.launches.iter().map(|l| l.base.deferred_at).collect(),
            },
        ))
    }

    /// Run `batch` on host data (u32 words) and wait: upload, one submit, download.
    pub fn run_host(&self, gpu: &Gpu, batch: &Batch, data: &mut [u32]) -> Result<RunStats> {
        if data.len() as u64 * 4 > gpu.max_binding() {
            return Err(Error::TooLarge(format!(
                "{} data words exceed one {} MiB binding on {}",
                data.len(),
                gpu.max_binding() >> 20,
                gpu.adapter.name
            )));
        }
        let buf = transfer::buffer_from(gpu, "merged data", data)?;
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        let (mut stats, recorded) = self.record(gpu, &mut encoder, batch, &buf)?;
        gpu.queue.submit([encoder.finish()]);
        gpu.wait()?;
        transfer::download(gpu, &buf, 0, bytemuck::cast_slice_mut(data))?;
        stats.deferred = recorded.deferred(gpu)?;
        Ok(stats)
    }
}

/// What a recording leaves to inspect after it ran.
pub struct Recorded {
    state: wgpu::Buffer,
    deferred_at: Vec<u32>,
}

impl Recorded {
    /// Blocks the merged launches deferred to their resume dispatches (after the work is done).
    pub fn deferred(&self, gpu: &Gpu) -> Result<u64> {
        let mut total = 0;
        for &at in &self.deferred_at {
            let mut count = [0u32];
            transfer::download(
                gpu,
                &self.state,
                at as u64 * 4,
                bytemuck::cast_slice_mut(&mut count),
            )?;
            total += count[0] as u64;
        }
        Ok(total)
    }
}

fn cast<T: bytemuck::Pod>(words: &[u32]) -> &[T] {
    bytemuck::cast_slice(words)
}

fn words_of<T: bytemuck::Pod>(values: &[T]) -> Vec<u32> {
    bytemuck::cast_slice(values).to_vec()
}

/// The CPU reference of a batch: each task in dependency order on a copy of `data`.
pub fn reference(batch: &Batch, data: &[u32]) -> Vec<u32> {
    use crate::reference::{keys::sorted, scan::scan};
    let mut out = data.to_vec();
    let mut g = TaskGraph::default();
    for t in &batch.tasks {
        g.add(Task {
            name: String::new(),
            blocks: 1,
            workgroup_memory: 0,
            deps: t.deps.clone(),
        });
    }
    let order = g.topological_order().expect("an acyclic batch");
    for i in order {
        let t = &batch.tasks[i];
        let region = &mut out[t.offset as usize..(t.offset + t.n) as usize];
        match t.work {
            Work::Sort {
                key_type,
                descending,
            } => {
                let order = crate::SortOrder {
                    descending,
                    segment_size: None,
                };
                let sorted: Vec<u32> = match key_type {
                    KeyType::F32 => words_of(&sorted(cast::<f32>(region), order)),
                    KeyType::I32 => words_of(&sorted(cast::<i32>(region), order)),
                    _ => sorted::<u32>(region, order),
                };
                region.copy_from_slice(&sorted);
            }
            Work::Scan {
                key_type,
                op,
                inclusive,
            } => {
                let scanned: Vec<u32> = match key_type {
                    KeyType::F32 => words_of(&scan(cast::<f32>(region), op, inclusive)),
                    KeyType::I32 => words_of(&scan(cast::<i32>(region), op, inclusive)),
                    _ => scan::<u32>(region, op, inclusive),
                };
                region.copy_from_slice(&scanned);
            }
            Work::Split {
                key_type,
                test,
                keep_rest,
                dst,
                count_at,
            } => {
                let src = out[t.offset as usize..(t.offset + t.n) as usize].to_vec();
                let (words, count) = split(key_type, &src, test, keep_rest);
                out[dst as usize..dst as usize + words.len()].copy_from_slice(&words);
                out[count_at as usize] = count;
            }
        }
    }
    out
}

/// The CPU twin of a split task on 32-bit words of `key_type`: what it writes to its
/// destination (the passing elements, then for a partition the rest), and the passing count.
pub fn split(key_type: KeyType, src: &[u32], test: Test, keep_rest: bool) -> (Vec<u32>, u32) {
    match key_type {
        KeyType::F32 => split_words::<f32>(src, test, keep_rest),
        KeyType::I32 => split_words::<i32>(src, test, keep_rest),
        _ => split_words::<u32>(src, test, keep_rest),
    }
}

fn split_words<T: crate::SortKey>(src: &[u32], test: Test, keep_rest: bool) -> (Vec<u32>, u32) {
    use crate::scan::Predicate;
    let pivot = |bits: u32| bytemuck::cast::<u32, T>(bits);
    let pred = match test {
        Test::Below(p) => Predicate::Below(pivot(p)),
        Test::AtLeast(p) => Predicate::AtLeast(pivot(p)),
        Test::NonZero => Predicate::NonZero,
    };
    let values: &[T] = bytemuck::cast_slice(src);
    let (kept, split) = if keep_rest {
        let (all, _, split) = crate::reference::scan::partition(values, None, &pred);
        (all, split)
    } else {
        let (kept, _) = crate::reference::scan::compact(values, None, &pred);
        let n = kept.len();
        (kept, n)
    };
    (words_of(&kept), split as u32)
}

/// The self-test: chains of multi-block sorts and scans over shared regions, so a block that ran
/// before its producer finished would change the result.
fn self_test_batch() -> (Batch, Vec<u32>) {
    let n = 3 * MAX_CAP + 123;
    let data = crate::internal::bench::random_u32(2 * n as usize, 7);
    let mut b = Batch::default();
    let sort = Work::Sort {
        key_type: KeyType::U32,
        descending: false,
    };
    let scan = Work::Scan {
        key_type: KeyType::U32,
        op: ScanOp::Xor,
        inclusive: true,
    };
    let a = b.add(sort, 0, n, &[]);
    let c = b.add(scan, 0, n, &[a]);
    let d = b.add(sort, n, n, &[]);
    b.add(scan, n, n, &[c, d]);
    (b, data)
}

/// The merged launch (scheduler) for blocks of `cap` words of workgroup memory, with its
/// generated register networks.
pub fn merged(cap: u32, spin_limit: u32) -> String {
    let wg = workgroup_size(cap);
    let mut s = crate::wgsl::compose_with(
        crate::wgsl::MERGED,
        &[("CAP", cap), ("WG", wg), ("SPIN_LIMIT", spin_limit)],
        &[crate::wgsl::KEY_ORDER, crate::wgsl::SCAN_OP],
    );
    s.push('\n');
    s.push_str(&own_networks(cap / wg));
    s.push_str(&global_networks());
    s
}
