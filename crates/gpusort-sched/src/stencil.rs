//! The out-of-core stencil plan (METHODS.md method 4): how thick the sub-blocks along the
//! streaming (outermost) axis are, how many there are, and how many time steps each residency
//! advances (`T`, temporal blocking with redundant halo computation).
//!
//! The rules, from the method:
//! - a sub-block plus its halo fits the GPU memory budget and one storage binding;
//! - the halo (`R·T` rows each side) is smaller than the sub-block;
//! - there are more sub-blocks than staging buffers in flight (two), so transfers overlap compute,
//!   and none is larger than 256 MiB (unless its halo needs it), so the staging stays small;
//! - among the `T` that satisfy those, take the one with the least predicted time, where a
//!   sub-block costs the larger of its transfer time and its compute time (they overlap) —
//!   which favours `T` up to where compute catches up with transfer.
//!
//! A grid whose two ping-pong copies fit the budget and one binding is run in core: uploaded
//! once, all steps on the GPU, downloaded once.

use thiserror::Error;

/// Staging slots the streamer keeps in flight; a plan wants more sub-blocks than this.
pub const SLOTS_IN_FLIGHT: u64 = 2;
/// Largest sub-block, in bytes, the planner chooses (host staging holds two of them each way).
pub const MAX_BLOCK_BYTES: u64 = 256 << 20;
/// Largest time block the planner tries on its own (more rarely pays: the redundant halo work
/// grows with `T²` while the transfer saved shrinks as `1/T`).
pub const MAX_AUTO_TIME_BLOCK: u64 = 64;

#[derive(Debug, Error, PartialEq)]
pub enum StencilPlanError {
    #[error("a GPU memory budget of {budget} bytes is too small: the thinnest sub-block the stencil allows (radius + 1 rows) with its halo needs {needed} bytes (raise --gpu-memory)")]
    BudgetTooSmall { budget: u64, needed: u64 },
    #[error("one row of the grid ({row_bytes} bytes) with its halo does not fit one storage binding of {max_binding} bytes on this device")]
    RowTooLarge { row_bytes: u64, max_binding: u64 },
    #[error("--time-block {time_block} does not fit: its halo of {halo} rows each side needs more GPU memory than the budget of {budget} bytes allows")]
    TimeBlockTooLarge {
        time_block: u64,
        halo: u64,
        budget: u64,
    },
    #[error("--time-block must be at least 1")]
    ZeroTimeBlock,
}

/// The grid and the work, as the planner sees them: rows along the streaming axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StencilProblem {
    /// Extent of the streaming (outermost) axis.
    pub rows: u64,
    /// Cells in one row (the product of the inner axes).
    pub row_cells: u64,
    /// Bytes of one cell (4 for f32, 8 for f64).
    pub cell_bytes: u64,
    pub radius: u64,
    pub steps: u64,
    /// Periodic along the streaming axis (the `wrap` boundary): resident regions then run past
    /// the grid's ends instead of being clipped (their rows are taken modulo `rows`).
    pub periodic: bool,
}

impl StencilProblem {
    pub fn row_bytes(&self) -> u64 {
        self.row_cells * self.cell_bytes
    }
    pub fn grid_bytes(&self) -> u64 {
        self.rows * self.row_bytes()
    }
}

/// What the device allows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    /// Bytes of GPU memory the job may use.
    pub memory: u64,
    /// Largest storage binding, in bytes.
    pub max_binding: u64,
}

/// Measured speeds the prediction uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speeds {
    pub upload_bytes_per_s: f64,
    pub download_bytes_per_s: f64,
    /// Cell updates per second of one stencil step on the GPU.
    pub cells_per_s: f64,
}

/// How a streamer treats halos: the method's reuse, or the naive baseline for comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Streaming {
    /// Overlaps stay on the GPU, `T` steps per residency.
    Reuse,
    /// Every sub-block is sent with its halo, one step per transfer (the baseline of the method).
    Naive,
}

/// The plan the streamer follows.
#[derive(Clone, Debug, PartialEq)]
pub struct StencilPlan {
    pub in_core: bool,
    pub streaming: Streaming,
    /// Rows per sub-block (the last may be thinner).
    pub block_rows: u64,
    pub blocks: u64,
    /// Steps per residency.
    pub time_block: u64,
    /// Passes over the grid: `ceil(steps / time_block)`.
    pub sweeps: u64,
    /// Halo rows on each side of a sub-block: `radius · time_block`.
    pub halo_rows: u64,
    /// GPU memory the plan uses, in bytes.
    pub gpu_bytes: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Cell updates including the redundant halo work.
    pub cell_updates: u64,
    pub predicted_s: f64,
}

impl StencilPlan {
    /// Rows of the resident region for a sub-block of `block_rows` rows, before clipping at the
    /// grid's ends.
    pub fn resident_rows(&self) -> u64 {
        self.block_rows + 2 * self.halo_rows
    }
}

/// One sub-block of one sweep, as the streamer runs it. Row numbers are along the streaming axis;
/// resident rows run past the grid's ends only for periodic problems.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubBlock {
    pub sweep: u64,
    /// Index within the sweep.
    pub k: u64,
    /// Steps this sweep advances.
    pub steps: u64,
    /// Output rows `[z0, z1)`.
    pub z0: i64,
    pub z1: i64,
    /// Resident rows `[lo, hi)`.
    pub lo: i64,
    pub hi: i64,
    /// First row sent from the host: rows `[lo, new_lo)` are the overlap kept on the GPU.
    pub new_lo: i64,
    /// Rows `[keep_lo, hi)` stay on the GPU for the next sub-block.
    pub keep_lo: i64,
}

impl SubBlock {
    /// The rows still needed once `step` of the sweep's steps are done (the valid region shrinks
    /// by the radius per step until it is the sub-block's own rows).
    pub fn rows_after(&self, step: u64, radius: u64) -> (i64, i64) {
        let shrink = (radius * (self.steps - step)) as i64;
        (
            (self.z0 - shrink).max(self.lo),
            (self.z1 + shrink).min(self.hi),
        )
    }

    /// Rows computed over the sweep's steps, redundant halo rows included.
    pub fn rows_computed(&self, radius: u64) -> u64 {
        (1..=self.steps)
            .map(|s| {
                let (c0, c1) = self.rows_after(s, radius);
                (c1 - c0) as u64
            })
            .sum()
    }
}

impl StencilPlan {
    /// Every sub-block of every sweep, in the order the streamer runs them: the one layout both
    /// the prediction and the streamer use.
    pub fn sub_blocks(&self, p: &StencilProblem) -> Vec<SubBlock> {
        let rows = p.rows as i64;
        let b = self.block_rows as i64;
        let reuse = self.streaming == Streaming::Reuse;
        let unclipped = p.periodic && !self.in_core;
        let resident = |z0: i64, z1: i64, h: i64| {
            if unclipped {
                (z0 - h, z1 + h)
            } else {
                ((z0 - h).max(0), (z1 + h).min(rows))
            }
        };
        let steps = p.steps.max(1);
        let mut out = Vec::new();
        for sweep in 0..self.sweeps {
            let ts = (steps - sweep * self.time_block).min(self.time_block);
            let h = if self.in_core {
                0
            } else {
                (p.radius * ts) as i64
            };
            let mut prev_hi = i64::MIN;
            for k in 0..self.blocks {
                let z0 = k as i64 * b;
                let z1 = (z0 + b).min(rows);
                let (lo, hi) = resident(z0, z1, h);
                let new_lo = if reuse && k > 0 { prev_hi.max(lo) } else { lo };
                let keep_lo = if reuse && k + 1 < self.blocks {
                    resident(z1, (z1 + b).min(rows), h).0.min(hi)
                } else {
                    hi
                };
                prev_hi = hi;
                out.push(SubBlock {
                    sweep,
                    k,
                    steps: ts,
                    z0,
                    z1,
                    lo,
                    hi,
                    new_lo,
                    keep_lo,
                });
            }
        }
        out
    }
}

/// GPU bytes of the streamer for sub-blocks of `b` rows and halo `h`: two ping-pong copies of the
/// resident region plus the overlap kept for the next sub-block.
fn streamer_bytes(p: &StencilProblem, b: u64, h: u64, streaming: Streaming) -> u64 {
    let overlap = if streaming == Streaming::Reuse {
        2 * h
    } else {
        0
    };
    (2 * (b + 2 * h) + overlap) * p.row_bytes()
}

/// Plan a stencil job. `time_block` overrides the planner's choice of `T`.
pub fn plan(
    p: &StencilProblem,
    budget: Budget,
    speeds: Speeds,
    time_block: Option<u64>,
    streaming: Streaming,
) -> Result<StencilPlan, StencilPlanError> {
    if time_block == Some(0) {
        return Err(StencilPlanError::ZeroTimeBlock);
    }
    let steps = p.steps.max(1);
    let grid = p.grid_bytes();
    let in_core_fits = grid <= budget.max_binding && 2 * grid <= budget.memory;
    // Naive streaming is a baseline: never in core, always one step per transfer.
    if in_core_fits && streaming == Streaming::Reuse && time_block.is_none_or(|t| t >= steps) {
        return Ok(evaluate(p, speeds, p.rows.max(1), steps, true, streaming));
    }
    // the thinnest sub-block the rules allow: one row more than its halo
    let thinnest = streamer_bytes(p, (p.radius + 1).min(p.rows), p.radius, streaming);
    if p.row_bytes() * (1 + 2 * p.radius) > budget.max_binding {
        return Err(StencilPlanError::RowTooLarge {
            row_bytes: p.row_bytes(),
            max_binding: budget.max_binding,
        });
    }
    if thinnest > budget.memory {
        return Err(StencilPlanError::BudgetTooSmall {
            budget: budget.memory,
            needed: thinnest,
        });
    }
    let candidates: Vec<u64> = match (streaming, time_block) {
        (Streaming::Naive, _) => vec![1],
        (_, Some(t)) => vec![t.min(steps)],
        (_, None) => (1..=steps.min(MAX_AUTO_TIME_BLOCK)).collect(),
    };
    let mut best: Option<StencilPlan> = None;
    for t in candidates {
        let Some(b) = block_rows(p, budget, t, streaming) else {
            if time_block.is_some() {
                return Err(StencilPlanError::TimeBlockTooLarge {
                    time_block: t,
                    halo: t * p.radius,
                    budget: budget.memory,
                });
            }
            continue;
        };
        let plan = evaluate(p, speeds, b, t, false, streaming);
        if best
            .as_ref()
            .is_none_or(|b| plan.predicted_s < b.predicted_s)
        {
            best = Some(plan);
        }
    }
    // T = 1 always fits once one row does, so there is a plan.
    Ok(best.expect("T = 1 fits whenever the thinnest sub-block does"))
}

/// The thickest sub-block for time block `t` that keeps every rule, if any.
fn block_rows(p: &StencilProblem, budget: Budget, t: u64, streaming: Streaming) -> Option<u64> {
    let h = p.radius * t;
    let row = p.row_bytes().max(1);
    let overlap = if streaming == Streaming::Reuse {
        2 * h
    } else {
        0
    };
    // 2(b + 2h) + overlap rows <= memory; b + 2h rows <= one binding
    let by_memory = (budget.memory / row).checked_sub(4 * h + overlap)? / 2;
    let by_binding = (budget.max_binding / row).checked_sub(2 * h)?;
    let mut b = by_memory.min(by_binding).min(p.rows);
    // sub-blocks of a modest size keep the staging slots small and the pipeline fine-grained,
    // as long as the halo stays a small share of the block
    let by_staging = (MAX_BLOCK_BYTES / row).max(8 * h).max(1);
    b = b.min(by_staging);
    // more sub-blocks than slots in flight, where the grid is thick enough for that
    let for_overlap = p.rows.div_ceil(SLOTS_IN_FLIGHT + 1);
    if p.rows > SLOTS_IN_FLIGHT && for_overlap > h {
        b = b.min(for_overlap);
    }
    // the halo must be smaller than the sub-block (unless the whole grid is one sub-block)
    if b == 0 || (h >= b && b < p.rows) {
        return None;
    }
    Some(b)
}

fn evaluate(
    p: &StencilProblem,
    speeds: Speeds,
    b: u64,
    t: u64,
    in_core: bool,
    streaming: Streaming,
) -> StencilPlan {
    let h = if in_core { 0 } else { p.radius * t };
    let mut plan = StencilPlan {
        in_core,
        streaming,
        block_rows: b,
        blocks: p.rows.div_ceil(b).max(1),
        time_block: t,
        sweeps: p.steps.max(1).div_ceil(t),
        halo_rows: h,
        gpu_bytes: if in_core {
            2 * p.grid_bytes()
        } else {
            streamer_bytes(p, b, h, streaming)
        },
        bytes_up: 0,
        bytes_down: 0,
        cell_updates: 0,
        predicted_s: 0.0,
    };
    let row = p.row_bytes();
    for sb in plan.sub_blocks(p) {
        let up = (sb.hi - sb.new_lo) as u64 * row;
        let down = (sb.z1 - sb.z0) as u64 * row;
        let cells = sb.rows_computed(p.radius) * p.row_cells;
        plan.bytes_up += up;
        plan.bytes_down += down;
        plan.cell_updates += cells;
        let transfer =
            up as f64 / speeds.upload_bytes_per_s + down as f64 / speeds.download_bytes_per_s;
        let compute = cells as f64 / speeds.cells_per_s;
        // out of core, a sub-block's transfers overlap the GPU work of its neighbours
        plan.predicted_s += if in_core {
            transfer + compute
        } else {
            transfer.max(compute)
        };
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEEDS: Speeds = Speeds {
        upload_bytes_per_s: 20e9,
        download_bytes_per_s: 20e9,
        cells_per_s: 200e9,
    };

    fn problem(rows: u64, row_cells: u64, radius: u64, steps: u64) -> StencilProblem {
        StencilProblem {
            rows,
            row_cells,
            cell_bytes: 4,
            radius,
            steps,
            periodic: false,
        }
    }

    #[test]
    fn small_grid_runs_in_core() {
        let p = problem(1024, 1024, 2, 10);
        let b = Budget {
            memory: 1 << 30,
            max_binding: 1 << 30,
        };
        let plan = plan(&p, b, SPEEDS, None, Streaming::Reuse).unwrap();
        assert!(plan.in_core);
        assert_eq!((plan.blocks, plan.sweeps, plan.time_block), (1, 1, 10));
        assert_eq!(plan.bytes_up, p.grid_bytes());
        assert_eq!(plan.cell_updates, 1024 * 1024 * 10);
    }

    #[test]
    fn out_of_core_plan_keeps_the_rules() {
        let p = problem(4096, 4096, 2, 20);
        for memory in [8 << 20, 32 << 20, 40 << 20] {
            let b = Budget {
                memory,
                max_binding: 16 << 20,
            };
            let plan = plan(&p, b, SPEEDS, None, Streaming::Reuse).unwrap();
            assert!(!plan.in_core);
            assert!(plan.gpu_bytes <= memory, "{plan:?}");
            assert!(plan.resident_rows() * p.row_bytes() <= b.max_binding);
            assert!(plan.halo_rows < plan.block_rows);
            assert!(plan.blocks > SLOTS_IN_FLIGHT);
            assert_eq!(plan.halo_rows, 2 * plan.time_block);
            assert_eq!(plan.sweeps, 20u64.div_ceil(plan.time_block));
            // transfer-bound here, so temporal blocking is chosen
            assert!(plan.time_block > 1, "{plan:?}");
        }
    }

    #[test]
    fn reuse_sends_each_row_once_per_sweep_and_beats_naive() {
        let p = problem(4096, 4096, 2, 8);
        let b = Budget {
            memory: 32 << 20,
            max_binding: 1 << 30,
        };
        let reuse = plan(&p, b, SPEEDS, Some(1), Streaming::Reuse).unwrap();
        assert_eq!(reuse.bytes_up, p.grid_bytes() * 8);
        let naive = plan(&p, b, SPEEDS, None, Streaming::Naive).unwrap();
        assert!(naive.bytes_up > reuse.bytes_up);
        let best = plan(&p, b, SPEEDS, None, Streaming::Reuse).unwrap();
        assert!(
            best.predicted_s < naive.predicted_s / 2.0,
            "{best:?} {naive:?}"
        );
    }

    #[test]
    fn time_block_override_and_errors() {
        let p = problem(1000, 1000, 3, 9);
        let b = Budget {
            memory: 1 << 20,
            max_binding: 1 << 30,
        };
        let plan3 = plan(&p, b, SPEEDS, Some(3), Streaming::Reuse).unwrap();
        assert_eq!((plan3.time_block, plan3.sweeps, plan3.halo_rows), (3, 3, 9));
        assert_eq!(
            plan(&p, b, SPEEDS, Some(0), Streaming::Reuse),
            Err(StencilPlanError::ZeroTimeBlock)
        );
        let long = StencilProblem { steps: 100, ..p };
        assert!(matches!(
            plan(&long, b, SPEEDS, Some(100), Streaming::Reuse),
            Err(StencilPlanError::TimeBlockTooLarge { .. })
        ));
        let tiny = Budget {
            memory: 1000,
            max_binding: 1 << 30,
        };
        assert!(matches!(
            plan(&p, tiny, SPEEDS, None, Streaming::Reuse),
            Err(StencilPlanError::BudgetTooSmall { .. })
        ));
    }

    #[test]
    fn thin_grids_still_plan() {
        // fewer rows than slots in flight, and a grid thinner than the halo
        for rows in [1, 2, 3, 5] {
            let p = problem(rows, 64, 2, 4);
            let b = Budget {
                memory: 3 * 64 * 4 * 5,
                max_binding: 1 << 20,
            };
            let plan = plan(&p, b, SPEEDS, None, Streaming::Reuse).unwrap();
            assert!(plan.blocks * plan.block_rows >= rows, "{plan:?}");
            assert!(plan.gpu_bytes <= b.memory.max(2 * p.grid_bytes()));
        }
    }
}
