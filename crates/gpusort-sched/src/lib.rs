//! gpusort-sched: planning that needs no GPU (METHODS.md method 5). This crate never depends on
//! wgpu, so every plan can be unit-tested on any machine.
//!
//! - [`stencil`]: the out-of-core stencil plan (METHODS.md method 4).
//! - [`TaskGraph::plan`]: many tasks, each split into workgroup-sized blocks and possibly
//!   depending on others, planned into merged launches: each launch's mapping table (launch slot →
//!   task, block) in topological order, its dependency levels (what safe mode dispatches one by
//!   one) and the workgroup memory it declares. gpusort-core's `schedule` module runs the plans.
//!
//! Workgroup memory: one launch declares the largest amount any of its tasks needs, so a task
//! that needs far less would run at the big task's occupancy. Needs are banded by powers of
//! [`MEMORY_RATIO`] (a class holds needs in (R^(c-1), R^c] bytes); tasks of different bands go to
//! separate launches, ordered so that every dependency is met by an earlier launch or inside the
//! same one. Within a launch no task needs more than R times what another needs.

pub mod stencil;

use std::ops::Range;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("the task graph has a cycle through task '{0}'")]
    Cycle(String),
    #[error("task '{task}' depends on unknown task {dep}")]
    UnknownDependency { task: String, dep: usize },
    #[error("task '{0}' depends on itself")]
    SelfDependency(String),
    #[error("block size must be at least 1")]
    ZeroBlock,
}

/// Width of a workgroup-memory band: tasks of one launch need within this factor of each other.
pub const MEMORY_RATIO: u32 = 4;

/// `n` items in blocks of `block` (the last may be shorter).
pub fn split(n: u64, block: u64) -> Result<Vec<Range<u64>>, PlanError> {
    if block == 0 {
        return Err(PlanError::ZeroBlock);
    }
    Ok((0..n.div_ceil(block))
        .map(|i| i * block..((i + 1) * block).min(n))
        .collect())
}

/// One task: a kernel family run over `blocks` workgroup-sized blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub name: String,
    pub blocks: u32,
    /// Bytes of workgroup memory one block needs.
    pub workgroup_memory: u32,
    /// Indices of the tasks this one waits for.
    pub deps: Vec<usize>,
}

/// One entry of a merged launch's mapping table: which task and block a launch slot runs.
/// `task` indexes [`Launch::tasks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub task: u32,
    pub block: u32,
}

/// One merged launch: its tasks (graph indices, in table order), the mapping table, and the
/// slot ranges of its dependency levels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub tasks: Vec<usize>,
    pub table: Vec<Slot>,
    /// `levels[l]` are the table slots of the tasks at dependency depth `l` within this launch
    /// (depth 0: no dependency inside the launch). Levels are contiguous and in order.
    pub levels: Vec<Range<u32>>,
    /// Level of each entry of `tasks`.
    pub task_levels: Vec<u32>,
    /// The dependencies of each entry of `tasks` that lie inside this launch (as indices into
    /// `tasks`); dependencies on earlier launches are met before this one starts.
    pub deps: Vec<Vec<u32>>,
    /// Workgroup memory the launch declares: the largest any of its tasks needs.
    pub workgroup_memory: u32,
}

/// Merged launches of a task graph, in the order they must run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub launches: Vec<Launch>,
}

impl Plan {
    /// Slots (workgroups) over all launches.
    pub fn slots(&self) -> usize {
        self.launches.iter().map(|l| l.table.len()).sum()
    }

    /// Dispatches safe mode needs: one per dependency level of every launch.
    pub fn levels(&self) -> usize {
        self.launches.iter().map(|l| l.levels.len()).sum()
    }
}

#[derive(Clone, Debug, Default)]
pub struct TaskGraph {
    pub tasks: Vec<Task>,
}

/// Memory class: the band of [`MEMORY_RATIO`] powers the need falls in.
fn memory_class(bytes: u32) -> u32 {
    bytes
        .max(1)
        .next_power_of_two()
        .ilog2()
        .div_ceil(MEMORY_RATIO.ilog2())
}

impl TaskGraph {
    pub fn add(&mut self, task: Task) -> usize {
        self.tasks.push(task);
        self.tasks.len() - 1
    }

    fn check(&self) -> Result<(), PlanError> {
        let n = self.tasks.len();
        for (i, t) in self.tasks.iter().enumerate() {
            for &d in &t.deps {
                if d >= n {
                    return Err(PlanError::UnknownDependency {
                        task: t.name.clone(),
                        dep: d,
                    });
                }
                if d == i {
                    return Err(PlanError::SelfDependency(t.name.clone()));
                }
            }
        }
        Ok(())
    }

    /// Tasks in an order where every task follows the tasks it depends on (Kahn's algorithm;
    /// ties keep insertion order, so independent tasks launch in the order they were given).
    pub fn topological_order(&self) -> Result<Vec<usize>, PlanError> {
        self.check()?;
        let n = self.tasks.len();
        let mut indegree = vec![0usize; n];
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, t) in self.tasks.iter().enumerate() {
            for &d in &t.deps {
                indegree[i] += 1;
                users[d].push(i);
            }
        }
        let mut ready: std::collections::BTreeSet<usize> =
            (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(i) = ready.pop_first() {
            order.push(i);
            for &u in &users[i] {
                indegree[u] -= 1;
                if indegree[u] == 0 {
                    ready.insert(u);
                }
            }
        }
        match (0..n).find(|&i| indegree[i] > 0) {
            Some(i) => Err(PlanError::Cycle(self.tasks[i].name.clone())),
            None => Ok(order),
        }
    }

    /// The mapping table of one merged launch of every task: every block of every task,
    /// producers first (lower slots are handed out first, so a block only waits on blocks that
    /// started before it).
    pub fn mapping_table(&self) -> Result<Vec<Slot>, PlanError> {
        Ok(self
            .topological_order()?
            .into_iter()
            .flat_map(|t| {
                (0..self.tasks[t].blocks).map(move |b| Slot {
                    task: t as u32,
                    block: b,
                })
            })
            .collect())
    }

    /// Workgroup memory a merged launch of all these tasks must declare: the largest any needs.
    pub fn workgroup_memory(&self) -> u32 {
        self.tasks
            .iter()
            .map(|t| t.workgroup_memory)
            .max()
            .unwrap_or(0)
    }

    /// Plan the graph into merged launches.
    ///
    /// Each task goes to the earliest launch of its memory class that is not before any of its
    /// dependencies' launches (a new launch at the end when there is none), so a dependency is
    /// always met by an earlier launch or inside the same one. Inside a launch, tasks are placed
    /// level by level (level = longest chain of dependencies inside the launch), keeping the
    /// given order within a level: producers get lower slots, and each level's slots are one
    /// contiguous range for safe mode and for the fallback.
    pub fn plan(&self) -> Result<Plan, PlanError> {
        let order = self.topological_order()?;
        let n = self.tasks.len();
        let mut launch_of = vec![0usize; n];
        let mut classes: Vec<u32> = Vec::new();
        for &t in &order {
            let class = memory_class(self.tasks[t].workgroup_memory);
            let lower = self.tasks[t]
                .deps
                .iter()
                .map(|&d| launch_of[d])
                .max()
                .unwrap_or(0);
            launch_of[t] = match (lower..classes.len()).find(|&k| classes[k] == class) {
                Some(k) => k,
                None => {
                    classes.push(class);
                    classes.len() - 1
                }
            };
        }
        // levels within each launch, computed in topological order
        let mut level = vec![0u32; n];
        for &t in &order {
            level[t] = self.tasks[t]
                .deps
                .iter()
                .filter(|&&d| launch_of[d] == launch_of[t])
                .map(|&d| level[d] + 1)
                .max()
                .unwrap_or(0);
        }
        let launches = (0..classes.len())
            .map(|k| {
                let mut tasks: Vec<usize> = (0..n).filter(|&t| launch_of[t] == k).collect();
                // stable: insertion order within a level
                tasks.sort_by_key(|&t| level[t]);
                let mut local = vec![u32::MAX; n];
                for (i, &t) in tasks.iter().enumerate() {
                    local[t] = i as u32;
                }
                let depth = tasks.iter().map(|&t| level[t] + 1).max().unwrap_or(0);
                let mut table = Vec::new();
                let mut levels = Vec::with_capacity(depth as usize);
                let mut i = 0;
                for l in 0..depth {
                    let start = table.len() as u32;
                    while i < tasks.len() && level[tasks[i]] == l {
                        table.extend((0..self.tasks[tasks[i]].blocks).map(|b| Slot {
                            task: i as u32,
                            block: b,
                        }));
                        i += 1;
                    }
                    levels.push(start..table.len() as u32);
                }
                Launch {
                    task_levels: tasks.iter().map(|&t| level[t]).collect(),
                    deps: tasks
                        .iter()
                        .map(|&t| {
                            self.tasks[t]
                                .deps
                                .iter()
                                .filter(|&&d| launch_of[d] == k)
                                .map(|&d| local[d])
                                .collect()
                        })
                        .collect(),
                    workgroup_memory: tasks
                        .iter()
                        .map(|&t| self.tasks[t].workgroup_memory)
                        .max()
                        .unwrap_or(0),
                    table,
                    levels,
                    tasks,
                }
            })
            .collect();
        Ok(Plan { launches })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str, blocks: u32, deps: &[usize]) -> Task {
        Task {
            name: name.into(),
            blocks,
            workgroup_memory: blocks * 16,
            deps: deps.to_vec(),
        }
    }

    #[test]
    fn split_covers_everything_once() {
        assert_eq!(split(10, 4).unwrap(), vec![0..4, 4..8, 8..10]);
        assert_eq!(split(0, 4).unwrap(), Vec::<Range<u64>>::new());
        assert_eq!(split(8, 4).unwrap(), vec![0..4, 4..8]);
        assert_eq!(split(3, 0), Err(PlanError::ZeroBlock));
    }

    #[test]
    fn producers_come_first_in_the_table() {
        let mut g = TaskGraph::default();
        let c = g.add(task("c", 1, &[1, 2]));
        let _a = g.add(task("a", 2, &[]));
        let _b = g.add(task("b", 1, &[1]));
        assert_eq!(g.topological_order().unwrap(), vec![1, 2, 0]);
        let table = g.mapping_table().unwrap();
        assert_eq!(
            table,
            vec![
                Slot { task: 1, block: 0 },
                Slot { task: 1, block: 1 },
                Slot { task: 2, block: 0 },
                Slot {
                    task: c as u32,
                    block: 0
                }
            ]
        );
        assert_eq!(g.workgroup_memory(), 32);
    }

    #[test]
    fn cycles_and_unknown_dependencies_are_rejected() {
        let mut g = TaskGraph::default();
        g.add(task("x", 1, &[1]));
        g.add(task("y", 1, &[0]));
        assert_eq!(g.topological_order(), Err(PlanError::Cycle("x".into())));
        let mut g = TaskGraph::default();
        g.add(task("z", 1, &[7]));
        assert_eq!(
            g.mapping_table(),
            Err(PlanError::UnknownDependency {
                task: "z".into(),
                dep: 7
            })
        );
    }
    fn mem(name: &str, blocks: u32, bytes: u32, deps: &[usize]) -> Task {
        Task {
            name: name.into(),
            blocks,
            workgroup_memory: bytes,
            deps: deps.to_vec(),
        }
    }

    #[test]
    fn one_launch_levels_and_table() {
        let mut g = TaskGraph::default();
        g.add(mem("a", 2, 4096, &[]));
        g.add(mem("b", 1, 4096, &[0]));
        g.add(mem("c", 3, 2048, &[]));
        g.add(mem("d", 1, 4096, &[1, 2]));
        let plan = g.plan().unwrap();
        assert_eq!(plan.launches.len(), 1);
        let l = &plan.launches[0];
        assert_eq!(l.tasks, vec![0, 2, 1, 3]);
        assert_eq!(l.task_levels, vec![0, 0, 1, 2]);
        assert_eq!(l.levels, vec![0..5, 5..6, 6..7]);
        assert_eq!(l.deps, vec![vec![], vec![], vec![0], vec![2, 1]]);
        assert_eq!(l.workgroup_memory, 4096);
        let table: Vec<(u32, u32)> = l.table.iter().map(|s| (s.task, s.block)).collect();
        assert_eq!(
            table,
            vec![(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 0), (3, 0)]
        );
        assert_eq!(plan.slots(), 7);
        assert_eq!(plan.levels(), 3);
    }

    #[test]
    fn every_slot_waits_only_on_lower_slots() {
        // a pseudo-random graph: deps only on earlier tasks, so it is acyclic
        let mut g = TaskGraph::default();
        let mut x = 12345u64;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for i in 0..200usize {
            let deps: Vec<usize> = (0..next(4))
                .filter(|_| i > 0)
                .map(|_| next(i as u64) as usize)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let bytes = [1024, 4096, 16384][next(3) as usize];
            g.add(mem(&format!("t{i}"), 1 + next(5) as u32, bytes, &deps));
        }
        let plan = g.plan().unwrap();
        let mut launch_of = vec![usize::MAX; 200];
        let mut first_slot = vec![u32::MAX; 200];
        let mut last_slot = vec![0u32; 200];
        for (k, l) in plan.launches.iter().enumerate() {
            for (s, slot) in l.table.iter().enumerate() {
                let t = l.tasks[slot.task as usize];
                launch_of[t] = k;
                first_slot[t] = first_slot[t].min(s as u32);
                last_slot[t] = last_slot[t].max(s as u32);
            }
            // one memory class per launch
            let (lo, hi) = l.tasks.iter().fold((u32::MAX, 0), |(lo, hi), &t| {
                let m = g.tasks[t].workgroup_memory;
                (lo.min(m), hi.max(m))
            });
            assert!(
                hi <= lo * MEMORY_RATIO,
                "launch {k} mixes {lo} and {hi} bytes"
            );
            // levels are contiguous and cover the table
            assert_eq!(l.levels.first().map(|r| r.start), Some(0));
            assert_eq!(l.levels.last().map(|r| r.end), Some(l.table.len() as u32));
            for w in l.levels.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
        }
        assert!(launch_of.iter().all(|&k| k != usize::MAX));
        for (t, task) in g.tasks.iter().enumerate() {
            for &d in &task.deps {
                assert!(launch_of[d] <= launch_of[t]);
                if launch_of[d] == launch_of[t] {
                    assert!(
                        last_slot[d] < first_slot[t],
                        "task {t} waits on later slots"
                    );
                }
            }
        }
        assert_eq!(
            plan.slots(),
            g.tasks.iter().map(|t| t.blocks as usize).sum::<usize>()
        );
    }

    #[test]
    fn very_different_memory_needs_get_separate_launches() {
        let mut g = TaskGraph::default();
        g.add(mem("small", 4, 1024, &[]));
        g.add(mem("big", 1, 16384, &[]));
        g.add(mem("small after big", 2, 1024, &[1]));
        g.add(mem("near small", 1, 768, &[0]));
        let plan = g.plan().unwrap();
        let tasks: Vec<Vec<usize>> = plan.launches.iter().map(|l| l.tasks.clone()).collect();
        // the dependent small task cannot join the first small launch, which runs before "big"
        assert_eq!(tasks, vec![vec![0, 3], vec![1], vec![2]]);
        let mems: Vec<u32> = plan.launches.iter().map(|l| l.workgroup_memory).collect();
        assert_eq!(mems, vec![1024, 16384, 1024]);
        assert!(
            plan.launches[2].deps[0].is_empty(),
            "met by an earlier launch"
        );
    }

    #[test]
    fn self_dependencies_are_rejected() {
        let mut g = TaskGraph::default();
        g.add(task("me", 1, &[0]));
        assert_eq!(g.plan(), Err(PlanError::SelfDependency("me".into())));
    }
}
