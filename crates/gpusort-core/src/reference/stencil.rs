//! CPU twin of `shaders/stencil.wgsl`: Jacobi steps of a stencil with scipy.ndimage boundaries,
//! summing the taps in the same order and the same precision as the kernel.

use rayon::prelude::*;

use crate::stencil::{map_axis, Boundary, GridShape, Stencil, StencilValue};

/// One cell of a step: its taps summed in order, `acc + w * value`, the boundary rule applied
/// where a tap leaves the grid (`extents` and `at` outermost first).
pub fn cell<T: StencilValue>(
    cur: &[T],
    [nz, ny, nx]: [i64; 3],
    taps: &[([i64; 3], T)],
    boundary: Boundary,
    cval: T,
    [z, y, x]: [i64; 3],
) -> T {
    let mut acc = T::from_f64(0.0);
    for &([dz, dy, dx], w) in taps {
        let at = (
            map_axis(boundary, z + dz, nz),
            map_axis(boundary, y + dy, ny),
            map_axis(boundary, x + dx, nx),
        );
        let value = match at {
            (Some(z), Some(y), Some(x)) => cur[((z * ny + y) * nx + x) as usize],
            _ => cval,
        };
        acc = acc + w * value;
    }
    acc
}

/// `steps` Jacobi steps of `stencil` over `grid` (C order, `shape`).
pub fn run<T: StencilValue>(
    grid: &[T],
    shape: GridShape,
    stencil: &Stencil,
    boundary: Boundary,
    cval: f64,
    steps: u32,
) -> Vec<T> {
    let [nz, ny, nx] = shape.as_3d().map(|n| n as i64);
    assert_eq!(
        grid.len() as i64,
        nz * ny * nx,
        "grid length matches its shape"
    );
    let cval = T::from_f64(cval);
    let taps: Vec<([i64; 3], T)> = stencil
        .taps()
        .iter()
        .map(|t| (t.offset.map(i64::from), T::from_f64(t.weight)))
        .collect();
    let mut cur = grid.to_vec();
    let mut next = vec![T::from_f64(0.0); grid.len()];
    let plane = (ny * nx) as usize;
    for _ in 0..steps {
        next.par_chunks_mut(plane.max(1))
            .enumerate()
            .for_each(|(z, row)| {
                for (i, out) in row.iter_mut().enumerate() {
                    let (y, x) = ((i / nx as usize) as i64, (i % nx as usize) as i64);
                    *out = cell(&cur, [nz, ny, nx], &taps, boundary, cval, [z as i64, y, x]);
                }
            });
        std::mem::swap(&mut cur, &mut next);
    }
    cur
}
