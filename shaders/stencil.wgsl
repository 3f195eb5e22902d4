// One Jacobi step of a stencil over the resident region of a grid (METHODS.md method 4).
//
// The grid is seen as 3-D (rows, NY, NX), C order; rows run along the streaming axis (a 2-D grid
// has NY = 1). The resident region holds rows [res_lo, res_lo + res_rows) of the grid; for the
// `wrap` boundary those are unwrapped row numbers (they may run past either end), for the other
// boundaries they lie inside the grid. A step computes resident rows [comp_lo, comp_lo +
// comp_rows) from `src` into `dst`.
//
// The host prepends: `alias T = f32|f64;`, `const NX: i32`, `const NY: i32`, `const MODE: u32`,
// `const CVAL: T`, `const RZ/RY/RX: i32` (the stencil's reach per axis), `const NTAPS: u32`,
// `alias WEIGHTS` (vec4<f32> or vec2<f64>), `const NWEIGHTS: u32`, `const WG: u32`, the grid's
// element type `CELLS` (T, or vec4<T> for the four-cell kernels of stencil_vec.wgsl) with the
// scalar accessors `ld` and `st` over it, and fills the @generated blocks below from the taps.
//
// Every cell gathers its tap values into `v` first — directly for cells whose whole neighbourhood
// is resident and inside the grid, through `fetch` (boundary rules) otherwise — and then sums them
// in one shared block, so a cell's arithmetic is the same whichever way its values were gathered.
// That is what makes the out-of-core streamer bit-identical to the in-core run.

const CONSTANT: u32 = 0u;
const NEAREST: u32 = 1u;
const REFLECT: u32 = 2u;
const MIRROR: u32 = 3u;
const WRAP: u32 = 4u;

struct Params {
    // extent of the streaming axis of the whole grid
    rows: i32,
    res_lo: i32,
    res_rows: i32,
    comp_lo: i32,
    comp_rows: i32,
    // output rows per workgroup of steps_streamed (stencil_vec.wgsl), and the box of its
    // workgroups (chunk, tile row, tile column: [lo, hi) each) that steps_interior runs instead
    chunk: i32,
    ic_lo: i32,
    ic_hi: i32,
    ity_lo: i32,
    ity_hi: i32,
    itx_lo: i32,
    itx_hi: i32,
    // rows per strip of steps_lanes, which runs that box's cells where the blocking is in
    // registers (stencil_vec.wgsl)
    lane_chunk: i32,
    // 0, which every sum starts from: a runtime zero no compiler folds, so none can then factor
    // two taps that read the same value into one product (StepParams::zero)
    zero: i32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<CELLS>;
@group(0) @binding(2) var<storage, read_write> dst: array<CELLS>;
// The tap weights, in tap order, four f32 (two f64) to an element (uniform arrays have a 16-byte
// stride); a uniform buffer so they can be operands of the multiply-add directly. See
// StencilKernel::weights for why they are not constants.
@group(0) @binding(3) var<uniform> weights: array<WEIGHTS, NWEIGHTS>;
// (dz, dy, dx, offset in the grid) per tap: the loop form of wide stencils reads its taps here.
@group(0) @binding(4) var<storage, read> tap_offsets: array<vec4<i32>>;

// Where coordinate i (outside [0, n)) reads from, with scipy.ndimage's meanings; periodic forms so
// any reach is handled.
fn map_axis(i: i32, n: i32) -> i32 {
    if (i >= 0 && i < n) {
        return i;
    }
    if (MODE == NEAREST) {
        return clamp(i, 0, n - 1);
    }
    if (MODE == REFLECT) {
        // d c b a | a b c d | d c b a
        let period = 2 * n;
        var m = i % period;
        if (m < 0) {
            m += period;
        }
        return select(m, period - 1 - m, m >= n);
    }
    if (MODE == MIRROR) {
        // d c b | a b c d | c b a
        if (n == 1) {
            return 0;
        }
        let period = 2 * n - 2;
        var m = i % period;
        if (m < 0) {
            m += period;
        }
        return select(m, period - m, m >= n);
    }
    // WRAP
    var m = i % n;
    if (m < 0) {
        m += n;
    }
    return m;
}

// The value at resident row zr and inner coordinates (y, x), any of which may lie outside.
fn fetch(zr: i32, y: i32, x: i32) -> T {
    var yy = y;
    var xx = x;
    if (y < 0 || y >= NY || x < 0 || x >= NX) {
        if (MODE == CONSTANT) {
            return CVAL;
        }
        yy = map_axis(y, NY);
        xx = map_axis(x, NX);
    }
    var rr = zr;
    if (zr < 0 || zr >= p.res_rows) {
        let g = zr + p.res_lo;
        if (MODE == CONSTANT && (g < 0 || g >= p.rows)) {
            return CVAL;
        }
        // Rows a valid cell needs are resident once mapped; the clamp only keeps the redundant
        // outer halo cells (whose results are never used) inside the buffer.
        rr = clamp(map_axis(g, p.rows) - p.res_lo, 0, p.res_rows - 1);
    }
    return ld((rr * NY + yy) * NX + xx);
}

// One cell computed through `fetch`: the path of cells near an edge of the grid or of the
// resident rows, shared by every kernel so that they all sum alike.
fn cell_at(zr: i32, y: i32, x: i32) -> T {
    var v: array<T, NTAPS>;
    // @generated-fetch
    var acc = T(p.zero);
    // @generated-sum
    return acc;
}

@compute @workgroup_size(WG)
fn step(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let idx = linear_workgroup(wid, nwg) * WG + lid;
    let plane = u32(NY * NX);
    if (idx >= u32(p.comp_rows) * plane) {
        return;
    }
    let zr = p.comp_lo + i32(idx / plane);
    let rem = idx % plane;
    let y = i32(rem / u32(NX));
    let x = i32(rem % u32(NX));
    let c = zr * i32(plane) + i32(rem);
    if (zr >= RZ && zr + RZ < p.res_rows && y >= RY && y + RY < NY && x >= RX && x + RX < NX) {
        var v: array<T, NTAPS>;
        // @generated-direct
        var acc = T(p.zero);
        // @generated-sum
        st(c, acc);
    } else {
        st(c, cell_at(zr, y, x));
    }
}

// Two neighbouring cells along x an invocation (`KernelChoice::pairs`; rows of an even number of
// cells, so a pair never straddles two rows): the taps both cells read are loaded once, and each
// cell sums its taps in tap order as `step` does, so the result is the same bit for bit.
@compute @workgroup_size(WG)
fn step2(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let idx = linear_workgroup(wid, nwg) * WG + lid;
    // `max` keeps one-cell rows (where step2 is never chosen) a valid module.
    let pairs = u32(NY * max(NX / 2, 1));
    if (idx >= u32(p.comp_rows) * pairs) {
        return;
    }
    let zr = p.comp_lo + i32(idx / pairs);
    let rem = (idx % pairs) * 2u;
    let y = i32(rem / u32(NX));
    let x = i32(rem % u32(NX));
    let c = zr * NY * NX + i32(rem);
    if (zr >= RZ && zr + RZ < p.res_rows && y >= RY && y + RY < NY && x >= RX
        && x + 1 + RX < NX) {
        // @generated-direct2
    } else {
        st(c, cell_at(zr, y, x));
        st(c + 1, cell_at(zr, y, x + 1));
    }
}
