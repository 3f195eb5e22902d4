//! The uniform block of `shaders/stencil.wgsl`: the resident and computed rows of a pass, and the
//! work partitions `Blocking` fills in.

/// The uniform block of `shaders/stencil.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct StepParams {
    pub(super) rows: i32,
    pub(super) res_lo: i32,
    pub(super) res_rows: i32,
    pub(super) comp_lo: i32,
    pub(super) comp_rows: i32,
    pub(super) chunk: i32,
    /// The workgroups `steps_interior` runs: chunks, tile rows, tile columns, [lo, hi) each.
    pub(super) interior: [i32; 6],
    /// Rows per strip of `steps_lanes`, which runs those workgroups' cells instead where the
    /// blocking is in registers.
    pub(super) lane_chunk: i32,
    /// Always 0: every sum starts from this runtime zero rather than a constant one, so that no
    /// driver can fold it away and then factor two taps reading the same value, `w0·v + w1·v`,
    /// into `(w0 + w1)·v` (WGSL leaves float ops inexact; Mesa's compiler did, at mirrored x
    /// edges) — each kernel keeps the sum as written, and so the same bits as every other.
    pub(super) zero: i32,
}

impl StepParams {
    /// Grid rows `[lo, hi)` resident (of `rows`), rows `[c0, c1)` to compute.
    pub(super) fn region(rows: i64, lo: i64, hi: i64, c0: i64, c1: i64) -> StepParams {
        StepParams {
            rows: rows as i32,
            res_lo: lo as i32,
            res_rows: (hi - lo) as i32,
            comp_lo: (c0 - lo) as i32,
            comp_rows: (c1 - c0) as i32,
            chunk: 0,
            interior: [0; 6],
            lane_chunk: 0,
            zero: 0,
        }
    }

    /// `rows` rows, all resident and all computed.
    pub(super) fn whole(rows: u64) -> StepParams {
        let rows = rows as i64;
        StepParams::region(rows, 0, rows, 0, rows)
    }
}
