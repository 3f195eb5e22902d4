//! A batch as the merged kernel takes it: each task's phases, the plan's launches, and the
//! buffers' layout.

use gpusort_sched::{Plan, Task, TaskGraph};

use crate::error::{Error, Result};
use crate::keys::KeyType;
use crate::sort::{BitonicPlan, Pass};

use super::batch::*;

/// One phase: a gpusort-sched task with the kernel's descriptor.
#[derive(Clone, Copy)]
pub(super) struct Phase {
    pub(super) kind: u32,
    pub(super) offset: u32,
    pub(super) n: u32,
    pub(super) blocks: u32,
    pub(super) a: u32,
    pub(super) b: u32,
    pub(super) flags: u32,
    pub(super) cap: u32,
    pub(super) partials: u32,
    pub(super) dst: u32,
    pub(super) count_at: u32,
}

/// The phases of every task, as a graph for gpusort-sched.
pub(super) struct Expanded {
    pub(super) phases: Vec<Phase>,
    pub(super) graph: TaskGraph,
    /// First partial of each phase (scans).
    pub(super) partial_at: Vec<u32>,
    pub(super) partials: u32,
}

pub(super) fn capacity_for(n: u32) -> u32 {
    CAPACITIES.into_iter().find(|&c| n <= c).unwrap_or(MAX_CAP)
}

pub(super) fn expand(batch: &Batch, data_words: u64) -> Result<Expanded> {
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
pub(super) struct Params {
    pub(super) mode: u32,
    pub(super) begin: u32,
    pub(super) end: u32,
    pub(super) deferred_at: u32,
    pub(super) tasks_at: u32,
    pub(super) deps_at: u32,
    pub(super) table_at: u32,
    pub(super) ticket_at: u32,
    pub(super) marks_at: u32,
    pub(super) done_at: u32,
    pub(super) partials_at: u32,
    pub(super) args_at: u32,
    pub(super) pad: [u32; 4],
}

pub(super) const MODE_MERGED: u32 = 0;
pub(super) const MODE_LEVEL: u32 = 1;
pub(super) const MODE_RESUME: u32 = 2;

/// One launch laid out in the plan, state and args buffers.
pub(super) struct LaunchLayout {
    pub(super) cap: u32,
    pub(super) base: Params,
    pub(super) levels: Vec<std::ops::Range<u32>>,
    pub(super) slots: u32,
}

/// The buffers' contents for a whole batch.
pub(super) struct Layouts {
    pub(super) plan_words: Vec<u32>,
    pub(super) state_words: u64,
    pub(super) args_words: Vec<u32>,
    pub(super) launches: Vec<LaunchLayout>,
}

pub(super) fn lay_out(ex: &Expanded, plan: &Plan) -> Layouts {
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
