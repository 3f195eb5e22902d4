// Four cells per invocation along x (appended to stencil.wgsl when NX is a multiple of 4, so
// every row starts on a vec4 and the grid is bound as array<vec4<T>>). Two kernels:
//
// - `step4`: one step, each invocation loading the few vec4s its four cells' taps cover (a row
//   of a radius-R star is 1 + 2·ceil(R/4) vec4 loads for four cells, not 4·(2R+1) scalar loads):
//   a single step is bound by instruction issue, not by memory, with one cell per invocation.
// - `steps_streamed`: K steps in one pass, 2.5-D temporal blocking. A workgroup owns a tile of
//   the (y, x) plane with a halo of K reaches per side and walks down its chunk of rows, RB
//   planes per iteration: it loads RB input planes (issued first, stored last, so the loads'
//   latency hides behind the iteration's arithmetic) and advances every level s = 1..K by RB
//   planes. Level s trails level s-1 by LAG = RB + RZ planes, so it reads only planes that level
//   s-1 finished before the last barrier: one barrier per iteration. Level s keeps its last
//   D = 2·RB + 2·RZ planes in a ring in workgroup memory; level K goes to `dst`. Only the (y, x)
//   halo is recomputed, and the chunk's first and last K·RZ planes.
//
// Cells outside the grid are never computed (except under `wrap`, whose periodic extension is
// itself a solution and is computed like the grid): a tap that lands outside reads the cell it
// mirrors, which always lies within the reading cell's own footprint and so is in the tile, or
// CVAL. Every cell sums its taps with the same generated code as `step`, so every kernel here is
// bit-identical to single steps.
//
// The host prepends GR (the x reach in vec4s, ceil(RX / 4)) and, for `steps_streamed`: K, RB, D,
// TY and LW4 (the tile's rows and vec4 columns, halos included), HY = K·RY, HG = K·GR, SWG (its
// workgroup size, a divisor of RB·TY·LW4) and PRE (input vec4s per invocation and iteration),
// and fills the @generated blocks.

const NX4: i32 = NX / 4;

// The vec4 at vec4 column g of the row whose first vec4 is row4; columns outside the row hold
// the cells `fetch` would read there (the x edges of `step4`, without the per-cell path).
fn ld4(row4: i32, g: i32) -> vec4<T> {
    if (g >= 0 && g < NX4) {
        return src[row4 + g];
    }
    var v = vec4<T>(CVAL);
    if (MODE != CONSTANT) {
        for (var j = 0; j < 4; j++) {
            let x = map_axis(g * 4 + j, NX);
            v[j] = src[row4 + x / 4][x % 4];
        }
    }
    return v;
}

// `step4` computes MZ rows of four cells (the same (y, x) in MZ consecutive rows), so a tap column
// loaded once serves every row whose taps reach it: a radius-R star reads MZ + 2R vec4s along the
// streaming axis for MZ rows instead of MZ·(2R + 1), the traffic that otherwise goes to L2 for 3-D
// grids (a plane apart per tap). MZ = 1 is one row; the host chooses it (`KernelChoice::rows`).
// A workgroup covers WG consecutive vec4s of a plane (TH = 1), or (TH > 1, 3-D grids) a patch of
// TH rows by WG / TH vec4 columns, so that the taps in neighbouring rows of the plane are loaded
// by the same workgroup (`KernelChoice::plane_rows`; the host sizes the dispatch to match).
const TW: u32 = WG / TH;

@compute @workgroup_size(WG)
fn step4(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let plane4 = u32(NY * NX4);
    let blocks = u32((p.comp_rows + MZ - 1) / MZ);
    var block: u32;
    var rem: u32;
    if (TH == 1u) {
        let idx = linear_workgroup(wid, nwg) * WG + lid;
        if (idx >= blocks * plane4) {
            return;
        }
        block = idx / plane4;
        rem = idx % plane4;
    } else {
        let tiles_x = (u32(NX4) + TW - 1u) / TW;
        let tiles = tiles_x * ((u32(NY) + TH - 1u) / TH);
        let w = linear_workgroup(wid, nwg);
        block = w / tiles;
        let t = w % tiles;
        let ty = (t / tiles_x) * TH + lid / TW;
        let tx = (t % tiles_x) * TW + lid % TW;
        if (block >= blocks || ty >= u32(NY) || tx >= u32(NX4)) {
            return;
        }
        rem = ty * u32(NX4) + tx;
    }
    let z0 = p.comp_lo + i32(block) * MZ;
    let y = i32(rem / u32(NX4));
    let xg = i32(rem % u32(NX4));
    let x = xg * 4;
    let c4 = z0 * i32(plane4) + i32(rem);
    let row4 = c4 - xg;
    let z_end = p.comp_lo + p.comp_rows;
    if (z0 >= RZ && z0 + MZ - 1 + RZ < p.res_rows && z0 + MZ <= z_end && y >= RY
        && y + RY < NY) {
        if (x >= 4 * GR && x + 4 + 4 * GR <= NX) {
            // @generated-direct4
        } else {
            // @generated-xedge4
        }
    } else {
        for (var i = 0; i < MZ; i++) {
            let zr = z0 + i;
            if (zr < z_end) {
                var out: vec4<T>;
                for (var j = 0; j < 4; j++) {
                    out[j] = cell_at(zr, y, x + j);
                }
                dst[c4 + i * i32(plane4)] = out;
            }
        }
    }
}

// @streamed: the host appends the rest only for jobs that block steps on chip

const PLANE4: i32 = TY * LW4;
const LAG: i32 = RB + RZ;
// the output tile: rows and vec4 columns
const OY: i32 = TY - 2 * HY;
const OG: i32 = LW4 - 2 * HG;

// levels 0..K-1, D planes each
var<workgroup> ring: array<vec4<T>, K * D * PLANE4>;

fn slot(zr: i32) -> i32 {
    // resident rows start at -K·(RZ + LAG) at the lowest (the first chunk's warm-up)
    return (zr + 64 * D) % D;
}

// Whether grid row g (of the whole grid) lies outside it; never under `wrap`.
fn row_outside(g: i32) -> bool {
    return MODE != WRAP && (g < 0 || g >= p.rows);
}

// Input plane zr at tile vec4 e (tile origin: grid row y0, vec4 column g0), through fetch where
// it is not plain resident grid.
fn load_input(zr: i32, e: i32, y0: i32, g0: i32) -> vec4<T> {
    let y = y0 + e / LW4;
    let g = g0 + e % LW4;
    let x = g * 4;
    if (zr >= 0 && zr < p.res_rows && y >= 0 && y < NY && x >= 0 && x < NX) {
        return src[(zr * NY + y) * NX4 + g];
    }
    return vec4<T>(fetch(zr, y, x), fetch(zr, y, x + 1), fetch(zr, y, x + 2), fetch(zr, y, x + 3));
}

// The value of level `lb` (a ring offset) at resident row zr and grid coordinates (y, x), which
// may lie outside the grid: then the mirrored cell (or CVAL), as `fetch` reads it.
fn tile_fetch(lb: i32, zr: i32, y: i32, x: i32, y0: i32, x0: i32) -> T {
    var r = zr;
    var yy = y;
    var xx = x;
    let g = zr + p.res_lo;
    if (MODE != WRAP && (g < 0 || g >= p.rows || y < 0 || y >= NY || x < 0 || x >= NX)) {
        if (MODE == CONSTANT) {
            return CVAL;
        }
        r = map_axis(g, p.rows) - p.res_lo;
        yy = map_axis(y, NY);
        xx = map_axis(x, NX);
    }
    let lx = xx - x0;
    return ring[lb + slot(r) * PLANE4 + (yy - y0) * LW4 + (lx >> 2u)][lx & 3];
}

// One cell of a level from the previous level's ring, through tile_fetch.
fn tile_cell(lb: i32, zr: i32, y: i32, x: i32, y0: i32, x0: i32) -> T {
    var v: array<T, NTAPS>;
    // @generated-tile-fetch
    var acc = T(p.zero);
    // @generated-sum
    return acc;
}

@compute @workgroup_size(SWG)
fn steps_streamed(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let tiles_x = (NX4 + OG - 1) / OG;
    let tiles_y = (NY + OY - 1) / OY;
    let chunk_rows = p.chunk;
    let chunks = (p.comp_rows + chunk_rows - 1) / chunk_rows;
    var t = i32(linear_workgroup(wid, nwg));
    if (LANES) {
        // steps_lanes runs the interior box (2-D grids: one tile row), so the dispatch covers
        // only the workgroups around it: whole chunks before and after the box's chunks, then
        // the tile columns left and right of the box in its chunks
        let nb = p.ic_hi - p.ic_lo;
        let nbx = p.itx_hi - p.itx_lo;
        let outer = (chunks - nb) * tiles_x;
        if (t < outer) {
            let c = t / tiles_x;
            t = (c + select(0, nb, c >= p.ic_lo)) * tiles_x + t % tiles_x;
        } else {
            let side = tiles_x - nbx;
            let u = t - outer;
            if (side == 0 || u >= nb * side) {
                return;
            }
            let x = u % side;
            t = (p.ic_lo + u / side) * tiles_x + x + select(0, nbx, x >= p.itx_lo);
        }
    }
    if (t >= chunks * tiles_y * tiles_x) {
        return; // the whole workgroup: surplus of the dispatch grid
    }
    let tx = t % tiles_x;
    let ty = (t / tiles_x) % tiles_y;
    let ch = t / (tiles_x * tiles_y);
    if (ch >= p.ic_lo && ch < p.ic_hi && ty >= p.ity_lo && ty < p.ity_hi && tx >= p.itx_lo
        && tx < p.itx_hi) {
        return; // steps_interior's
    }
    // grid row of tile row 0, vec4 column of tile column 0, and x of its first cell
    let y0 = ty * OY - HY;
    let g0 = tx * OG - HG;
    let x0 = g0 * 4;
    // output rows [z_lo, z_hi), resident numbering
    let z_lo = p.comp_lo + ch * chunk_rows;
    let z_hi = min(z_lo + chunk_rows, p.comp_lo + p.comp_rows);
    let first_in = z_lo - K * RZ;
    let last_in = z_hi - 1 + K * RZ;
    let iterations = (z_hi - z_lo + K * (RZ + LAG) + RB - 1) / RB;
    for (var i = 0; i < iterations; i++) {
        let zb = first_in + i * RB;
        // level 0: input planes [zb, zb + RB), loaded now and stored after the levels' work
        var pre: array<vec4<T>, PRE>;
        for (var k = 0; k < PRE; k++) {
            let q = i32(lid) + k * i32(SWG);
            let zi = zb + q / PLANE4;
            if (q < RB * PLANE4 && zi <= last_in) {
                pre[k] = load_input(zi, q % PLANE4, y0, g0);
            }
        }
        // levels 1..K, each LAG planes further behind
        for (var s = 1; s <= K; s++) {
            let za = zb - s * LAG;
            let reach = (K - s) * RZ;
            if (za + RB <= z_lo - reach || za >= z_hi + reach) {
                continue;
            }
            let lb = (s - 1) * D * PLANE4;
            // the tile less a margin of s reaches per side
            let my = s * RY;
            let mg = s * GR;
            for (var q = i32(lid); q < RB * PLANE4; q += i32(SWG)) {
                let z = za + q / PLANE4;
                let e = q % PLANE4;
                let ly = e / LW4;
                let lg = e % LW4;
                let gz = z + p.res_lo;
                if (z < z_lo - reach || z >= z_hi + reach || row_outside(gz) || ly < my
                    || ly >= TY - my || lg < mg || lg >= LW4 - mg) {
                    continue;
                }
                let y = y0 + ly;
                let x = (g0 + lg) * 4;
                if (MODE != WRAP && (y < 0 || y >= NY || x < 0 || x >= NX)) {
                    continue;
                }
                var out: vec4<T>;
                if (MODE == WRAP || (gz >= RZ && gz + RZ < p.rows && y >= RY && y + RY < NY
                    && x >= 4 * GR && x + 4 + 4 * GR <= NX)) {
                    // @generated-tile4
                } else {
                    for (var j = 0; j < 4; j++) {
                        out[j] = tile_cell(lb, z, y, x + j, y0, x0);
                    }
                }
                if (s < K) {
                    ring[s * D * PLANE4 + slot(z) * PLANE4 + e] = out;
                } else if (z >= z_lo && z < z_hi && ly >= HY && ly < HY + OY && lg >= HG
                    && lg < HG + OG && y < NY && x < NX) {
                    dst[(z * NY + y) * NX4 + g0 + lg] = out;
                }
            }
        }
        for (var k = 0; k < PRE; k++) {
            let q = i32(lid) + k * i32(SWG);
            let zi = zb + q / PLANE4;
            if (q < RB * PLANE4 && zi <= last_in) {
                ring[slot(zi) * PLANE4 + q % PLANE4] = pre[k];
            }
        }
        workgroupBarrier();
    }
}

// Workgroups whose tile and rows lie wholly inside the grid (the host dispatches them apart, the
// box [ic, ity, itx)_lo..hi of the params): no boundary code at all, which keeps the kernel's
// registers few, and each invocation owns the same ITEMS (plane, vec4) pairs of every iteration,
// so their offsets are worked out once.
const ITEMS: i32 = RB * PLANE4 / i32(SWG);

@compute @workgroup_size(SWG)
fn steps_interior(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let nx_t = p.itx_hi - p.itx_lo;
    let ny_t = p.ity_hi - p.ity_lo;
    let t = i32(linear_workgroup(wid, nwg));
    if (t >= (p.ic_hi - p.ic_lo) * ny_t * nx_t) {
        return;
    }
    let tx = p.itx_lo + t % nx_t;
    let ty = p.ity_lo + (t / nx_t) % ny_t;
    let ch = p.ic_lo + t / (nx_t * ny_t);
    let y0 = ty * OY - HY;
    let g0 = tx * OG - HG;
    let z_lo = p.comp_lo + ch * p.chunk;
    let z_hi = min(z_lo + p.chunk, p.comp_lo + p.comp_rows);
    let first_in = z_lo - K * RZ;
    let last_in = z_hi - 1 + K * RZ;
    let iterations = (z_hi - z_lo + K * (RZ + LAG) + RB - 1) / RB;
    let plane = NY * NX4;
    for (var i = 0; i < iterations; i++) {
        let zb = first_in + i * RB;
        // input planes [zb, zb + RB): loaded now, stored after the levels' work (planes past
        // the last one needed load the last one again, into slots nothing reads)
        var pre: array<vec4<T>, ITEMS>;
        for (var k = 0; k < ITEMS; k++) {
            let q = i32(lid) + k * i32(SWG);
            let e = q % PLANE4;
            let zl = min(zb + q / PLANE4, last_in);
            pre[k] = src[zl * plane + (y0 + e / LW4) * NX4 + g0 + e % LW4];
        }
        for (var s = 1; s <= K; s++) {
            let za = zb - s * LAG;
            let reach = (K - s) * RZ;
            let lb = (s - 1) * D * PLANE4;
            let my = s * RY;
            let mg = s * GR;
            for (var k = 0; k < ITEMS; k++) {
                let q = i32(lid) + k * i32(SWG);
                let z = za + q / PLANE4;
                let e = q % PLANE4;
                let ly = e / LW4;
                let lg = e % LW4;
                if (z < z_lo - reach || z >= z_hi + reach || ly < my || ly >= TY - my || lg < mg
                    || lg >= LW4 - mg) {
                    continue;
                }
                // @generated-interior-rows
                var out: vec4<T>;
                // @generated-interior4
                if (s < K) {
                    ring[s * D * PLANE4 + slot(z) * PLANE4 + e] = out;
                } else if (z >= z_lo && z < z_hi && ly >= HY && ly < HY + OY && lg >= HG
                    && lg < HG + OG) {
                    dst[z * plane + (y0 + ly) * NX4 + g0 + lg] = out;
                }
            }
        }
        for (var k = 0; k < ITEMS; k++) {
            let q = i32(lid) + k * i32(SWG);
            ring[slot(zb + q / PLANE4) * PLANE4 + q % PLANE4] = pre[k];
        }
        workgroupBarrier();
    }
}

// @lanes: the host appends the rest only for blockings in registers (`Blocking::lanes`)

// K steps a pass in registers, for the box of steps_interior's workgroups on 2-D grids (NY = 1):
// rows [zr0, zr1) of the box's chunks and its output vec4 columns [c0, c1). Each subgroup owns a
// strip of one vec4 column per lane and streams it down a chunk of rows: level s keeps the last
// 2·RZ + 1 rows of level s - 1 in registers (the windows `w{s}_{m}`, oldest first), and takes the
// cells a tap reaches in the neighbouring columns from the neighbouring lanes (subgroup
// shuffles, only the components a tap reads). Lane 0's left and the last lane's right neighbours
// do not exist, so each level loses RX cells at each side of the strip: the output is lanes
// [HL, size - HL). No workgroup memory, no barrier: subgroups loop over (chunk, strip) items by
// themselves, sized by the subgroup size the device runs (the host sizes the dispatch for its
// narrowest).
//
// Each iteration computes every level from the windows as the previous iteration left them
// (levels last first, each pushing into the window the next one up has already read), so the K
// levels of an iteration do not wait on one another: level s at iteration i computes row
// first_in + i - s·(RZ + 1), and level K's rows are output from iteration WARM = K·(2·RZ + 1) on;
// the last K iterations load nothing new. Every cell sums its taps with the same generated code
// as `step`: bit-identical.

const KR: i32 = K * RZ;
const HL: i32 = (K * RX + 3) / 4;
const WARM: i32 = K * (2 * RZ + 1);

@compute @workgroup_size(LANES_WG)
fn steps_lanes(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_invocation_id) lane_id: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_id) sg_id: u32,
) {
    let lane = i32(lane_id);
    let sg = i32(sg_size);
    let zr0 = p.comp_lo + p.ic_lo * p.chunk;
    let zr1 = min(p.comp_lo + p.ic_hi * p.chunk, p.comp_lo + p.comp_rows);
    let c0 = p.itx_lo * OG;
    let c1 = p.itx_hi * OG;
    let out_w = sg - 2 * HL;
    let strips = (c1 - c0 + out_w - 1) / out_w;
    let chunks = (zr1 - zr0 + p.lane_chunk - 1) / p.lane_chunk;
    let per_wg = i32(LANES_WG) / sg;
    let stride = i32(nwg.x * nwg.y) * per_wg;
    for (var item = i32(linear_workgroup(wid, nwg)) * per_wg + i32(sg_id); item < strips * chunks;
        item += stride) {
        // first input column of the strip; lanes past the grid read its last column (their
        // cells, and the K·RX cells next to them, are never output)
        let a = c0 - HL + (item % strips) * out_w;
        let col = min(a + lane, NX4 - 1);
        let z_lo = zr0 + (item / strips) * p.lane_chunk;
        let z_hi = min(z_lo + p.lane_chunk, zr1);
        let first_in = z_lo - KR;
        let last_in = z_hi - 1 + KR;
        let out_ok = lane >= HL && lane < sg - HL && a + lane < c1;
        // @generated-lanes-windows
        // loads are issued two rows ahead, so their latency hides behind two rows' levels
        var next = src[first_in * NX4 + col];
        var after = src[min(first_in + 1, last_in) * NX4 + col];
        for (var i = 0; i <= last_in - first_in + K; i++) {
            let cur = next;
            next = after;
            after = src[min(first_in + i + 2, last_in) * NX4 + col];
            // @generated-lanes-levels
        }
    }
}

// @planes: the host appends the rest only for 3-D blockings in registers (`Blocking::lanes` on a
// 3-D grid), instead of everything from @streamed on

// K steps a pass on 3-D grids, 2.5-D blocking with each level's planes in registers: a workgroup
// is a tile of (PWG / sg)·MR rows of the (y, x) plane (one subgroup a band of MR rows, one vec4
// column a lane) and streams it along z. Level s keeps the last 2·RZ + 1 planes of level s - 1 at
// its own (y, x) cells in registers (the windows `w{s}_{m}_{t}`, row t of the invocation, oldest
// plane first), as `steps_lanes` does along a 2-D grid's rows; neighbours along x come from the
// neighbouring lanes (subgroup shuffles), along y through workgroup memory: each iteration every
// level stores the window planes that taps off their row read (SHP of them), one barrier, every
// level computes (last level first, from the windows as the previous iteration left them), and,
// with one buffer, a barrier before the next iteration's stores. A tile loses K·RY rows at each
// side and each strip ceil(K·RX / 4) lanes.
//
// The grid's edges are handled here, not by another kernel: a value a tap needs outside the grid
// is, at every level, the cell it mirrors (or CVAL), as `fetch` reads it: along z the window
// slots past the grid's first or last plane are overwritten with the planes they mirror before
// the level reading them needs them (they all lie within the window), along y a tap row outside
// the grid reads the row it mirrors (always in the tile), along x the lane at the grid's first or
// last vec4 column takes the mirrored cells from itself or its neighbour. Invocations whose cells
// lie outside the grid compute nothing anyone reads. Never under `wrap` (the host keeps its other
// kernels there).

const KR: i32 = K * RZ;
const KY: i32 = K * RY;
const HL: i32 = (K * RX + 3) / 4;
const WARM: i32 = K * (2 * RZ + 1);
// vec4s of one plane of a tile
const TP: i32 = i32(PWG) * MR;

// NB buffers (2 where they fit: iterations alternate, and one barrier suffices) of levels
// 0..K-1, SHP planes each, one vec4 a cell column of the tile
var<workgroup> sh: array<vec4<T>, NB * K * SHP * TP>;

// The tile row holding the cell a tap of grid row yy reads: yy itself inside the grid, else the
// row it mirrors (under `constant` any row: the caller uses CVAL there); clamped to the tile's
// rows for invocations whose own cells lie outside the grid.
fn tile_row(yy: i32, yb: i32, rows: i32) -> i32 {
    var g = clamp(yy, 0, NY - 1);
    if (MODE != CONSTANT) {
        g = map_axis(yy, NY);
    }
    return clamp(g - yb, 0, rows - 1);
}

@compute @workgroup_size(PWG)
fn steps_planes(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_invocation_id) lane_id: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_id) sg_id: u32,
) {
    let lane = i32(lane_id);
    let sg = i32(sg_size);
    let rows = i32(PWG) / sg * MR;
    let out_h = rows - 2 * KY;
    let out_w = sg - 2 * HL;
    let strips = (NX4 + out_w - 1) / out_w;
    let tys = (NY + out_h - 1) / out_h;
    let chunks = (p.comp_rows + p.lane_chunk - 1) / p.lane_chunk;
    let z_end = p.comp_lo + p.comp_rows;
    let plane = NY * NX4;
    for (var item = i32(linear_workgroup(wid, nwg)); item < strips * tys * chunks;
        item += i32(nwg.x * nwg.y)) {
        // the strip's vec4 column of this lane, the tile's first row, the band's first row
        let col = (item % strips) * out_w - HL + lane;
        let colc = clamp(col, 0, NX4 - 1);
        let yb = ((item / strips) % tys) * out_h - KY;
        let r0 = i32(sg_id) * MR;
        let y0 = yb + r0;
        let z_lo = p.comp_lo + (item / (strips * tys)) * p.lane_chunk;
        let z_hi = min(z_lo + p.lane_chunk, z_end);
        let first_in = z_lo - KR;
        let last_in = z_hi - 1 + KR;
        let col_ok = lane >= HL && lane < sg - HL && col < NX4;
        let at_l = col == 0;
        let at_r = col == NX4 - 1;
        // @generated-planes-rows
        // @generated-planes-windows
        // loads are issued W = 2·RZ + 1 planes ahead into a ring of W registers; planes outside
        // the resident rows (the grid's ends: their slots are overwritten before use) read the
        // nearest resident one
        // @generated-planes-preload
        let iterations = last_in - first_in + K + 1;
        // The loop is unrolled W times: iteration i's windows and loads sit in the registers
        // rotated by i % W (`w{s}_{m}` is slot (m + i) % W), so nothing moves between them.
        for (var i0 = 0; i0 < iterations; i0 += 2 * RZ + 1) {
            // @generated-planes-loop
        }
    }
}
