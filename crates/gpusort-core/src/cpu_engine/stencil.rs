//! Stencils on the CPU, bit-identical to their twin (`reference::stencil::run`): each cell sums its
//! taps in the same order, in the same precision, with no fused multiply-add. Rows run in
//! parallel; inside a row whose taps all stay in the grid, the taps go outermost and the cells
//! innermost, over a row of accumulators, which the compiler vectorises; cells that reach past
//! an edge take the boundary rule cell by cell.

use rayon::prelude::*;

use crate::reference::stencil::cell;
use crate::stencil::{Boundary, GridShape, Stencil, StencilValue};

/// `steps` Jacobi steps of `stencil` over `grid` (C order, `shape`), into `out`; `scratch`, of
/// the same length, holds the grid between steps (it may be empty for one step).
// (the reference twin's arguments and three slices: a `StencilJob` would add a dtype that `T`
// already says, and callers step in batches of their own counts)
#[allow(clippy::too_many_arguments)]
pub fn run<T: StencilValue>(
    grid: &[T],
    out: &mut [T],
    scratch: &mut [T],
    shape: GridShape,
    stencil: &Stencil,
    boundary: Boundary,
    cval: f64,
    steps: u32,
) {
    assert_eq!(grid.len(), shape.cells(), "grid length matches its shape");
    assert_eq!(out.len(), grid.len(), "one result a cell");
    if steps == 0 {
        out.copy_from_slice(grid);
        return;
    }
    // steps alternate between `out` and `scratch` so that the last one lands in `out`
    let (mut a, mut b) = (out, scratch);
    if steps.is_multiple_of(2) {
        std::mem::swap(&mut a, &mut b);
    }
    step(grid, a, shape, stencil, boundary, cval);
    for _ in 1..steps {
        step(a, b, shape, stencil, boundary, cval);
        std::mem::swap(&mut a, &mut b);
    }
}

/// One step from `cur` into `next`.
fn step<T: StencilValue>(
    cur: &[T],
    next: &mut [T],
    shape: GridShape,
    stencil: &Stencil,
    boundary: Boundary,
    cval: f64,
) {
    let [nz, ny, nx] = shape.as_3d().map(|n| n as i64);
    let zero = T::from_f64(0.0);
    let cval = T::from_f64(cval);
    let taps: Vec<([i64; 3], T)> = stencil
        .taps()
        .iter()
        .map(|t| (t.offset.map(i64::from), T::from_f64(t.weight)))
        .collect();
    let reach = |axis: usize| taps.iter().map(|(o, _)| o[axis].abs()).max().unwrap_or(0);
    let (rz, ry, rx) = (reach(0), reach(1), reach(2));
    // the x range whose taps stay inside the row
    let (x0, x1) = (rx.min(nx), (nx - rx).max(rx.min(nx)));
    next.par_chunks_mut(nx as usize)
        .enumerate()
        .for_each(|(row, outs)| {
            let (z, y) = (row as i64 / ny, row as i64 % ny);
            let cell = |x: i64| cell(cur, [nz, ny, nx], &taps, boundary, cval, [z, y, x]);
            let inside = z >= rz && z < nz - rz && y >= ry && y < ny - ry && x1 > x0;
            if !inside {
                for (x, o) in outs.iter_mut().enumerate() {
                    *o = cell(x as i64);
                }
                return;
            }
            for x in (0..x0).chain(x1..nx) {
                outs[x as usize] = cell(x);
            }
            let acc = &mut outs[x0 as usize..x1 as usize];
            acc.fill(zero);
            for &([dz, dy, dx], w) in &taps {
                let from = ((z + dz) * ny + y + dy) * nx + x0 + dx;
                let src = &cur[from as usize..from as usize + acc.len()];
                for (a, &v) in acc.iter_mut().zip(src) {
                    *a = *a + w * v;
                }
            }
        });
}
