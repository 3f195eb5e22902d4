//! gpusort-sched: planning that needs no GPU (METHODS.md method 5). This crate never depends on
//! wgpu, so every plan can be unit-tested on any machine.
//!
//! - [`stencil`]: the out-of-core stencil plan (METHODS.md method 4).
//!
//! Today: splitting work into blocks, and task graphs ordered topologically into the mapping
//! table a merged launch reads (launch slot → task, block). The merged launch itself is future
//! work (issue: scheduler).

pub mod stencil;

use std::ops::Range;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("the task graph has a cycle through task '{0}'")]
    Cycle(String),
    #[error("task '{task}' depends on unknown task {dep}")]
    UnknownDependency { task: String, dep: usize },
    #[error("block size must be at least 1")]
    ZeroBlock,
}

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub task: u32,
    pub block: u32,
}

#[derive(Clone, Debug, Default)]
pub struct TaskGraph {
    pub tasks: Vec<Task>,
}

impl TaskGraph {
    pub fn add(&mut self, task: Task) -> usize {
        self.tasks.push(task);
        self.tasks.len() - 1
    }

    /// Tasks in an order where every task follows the tasks it depends on (Kahn's algorithm;
    /// ties keep insertion order, so independent tasks launch in the order they were given).
    pub fn topological_order(&self) -> Result<Vec<usize>, PlanError> {
        let n = self.tasks.len();
        let mut indegree = vec![0usize; n];
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, t) in self.tasks.iter().enumerate() {
            for &d in &t.deps {
                if d >= n {
                    return Err(PlanError::UnknownDependency {
                        task: t.name.clone(),
                        dep: d,
                    });
                }
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

    /// The mapping table of one merged launch: every block of every task, producers first
    /// (lower slots are handed out first, so a block only waits on blocks that started before it).
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

    /// Workgroup memory a merged launch of these tasks must declare: the largest any needs.
    pub fn workgroup_memory(&self) -> u32 {
        self.tasks
            .iter()
            .map(|t| t.workgroup_memory)
            .max()
            .unwrap_or(0)
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
}
