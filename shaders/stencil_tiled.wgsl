// Temporal blocking on chip for 2-D grids (appended to stencil.wgsl where it pays): one pass
// advances K steps. A workgroup loads its TH x TW output tile plus a halo of HALO = R·K cells per
// side into workgroup memory (through `fetch`, so boundary rules hold), then takes K steps there,
// the valid region shrinking by R per step, and stores only the tile. The halo cells are computed
// redundantly instead of being exchanged between workgroups.
//
// Cells outside the grid (only near its edges) are not computed: after each step they are refilled
// from the cell they mirror (`nearest`, `reflect`, `mirror`) or set to CVAL (`constant`); under
// `wrap` the periodic extension is itself a solution, so they are computed like any other cell.
// The mirrored cell is always inside the tile's valid region (its distance from the edge is at most
// the halo still needed). Every cell sums its taps with the same code as `step`, so a tiled pass
// gives bit-identical results to K single steps.
//
// The host prepends TH, TW, K, HALO (i32) as well.

const LH: i32 = TH + 2 * HALO;
// The host makes the tile 64 cells wide with its halo: each invocation owns one column and walks
// its rows, WG / 64 rows at a time, so no cell index is ever divided out.
const LW: i32 = TW + 2 * HALO;
const ROWS_AT_ONCE: i32 = i32(WG) / LW;
const TILE: i32 = LH * LW;

var<workgroup> tile: array<T, 2 * TILE>;

// Whether the cell at global row g and column x lies outside the grid (never under `wrap`,
// whose unwrapped rows and columns are all real cells of the periodic extension).
fn outside(g: i32, x: i32) -> bool {
    return MODE != WRAP && (g < 0 || g >= p.rows || x < 0 || x >= NX);
}

@compute @workgroup_size(WG)
fn steps_tiled(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let tiles_x = (NX + TW - 1) / TW;
    let t = i32(linear_workgroup(wid, nwg));
    let ty = t / tiles_x;
    let tx = t % tiles_x;
    if (ty * TH >= p.comp_rows) {
        return; // the whole workgroup: surplus of the dispatch grid
    }
    // resident row and column of tile cell (0, 0)
    let z_base = p.comp_lo + ty * TH - HALO;
    let x_base = tx * TW - HALO;
    let g_base = z_base + p.res_lo;
    // whether any cell of this tile lies outside the grid (uniform across the workgroup)
    let edge = MODE != WRAP
        && (g_base < 0 || g_base + LH > p.rows || x_base < 0 || x_base + LW > NX);

    // tiles wholly inside the resident rows and the columns load directly, the rest through fetch
    let inside = z_base >= 0 && z_base + LH <= p.res_rows && x_base >= 0 && x_base + LW <= NX;
    let lc = i32(lid) % LW;
    let r0 = i32(lid) / LW;
    for (var lr = r0; lr < LH; lr += ROWS_AT_ONCE) {
        let i = lr * LW + lc;
        if (inside) {
            tile[i] = src[(z_base + lr) * NX + x_base + lc];
        } else {
            tile[i] = fetch(z_base + lr, 0, x_base + lc);
        }
    }
    workgroupBarrier();

    // Step s computes the tile less a margin of R·s; columns in the margin sit the step out.
    for (var s = 1; s <= K; s++) {
        let cur = ((s - 1) % 2) * TILE;
        let nxt = (s % 2) * TILE;
        let m = (HALO / K) * s;
        let live = lc >= m && lc < LW - m;
        if (live) {
            for (var lr = m + r0; lr < LH - m; lr += ROWS_AT_ONCE) {
                if (edge && outside(g_base + lr, x_base + lc)) {
                    continue;
                }
                let i = lr * LW + lc;
                let c = cur + i;
                var v: array<T, NTAPS>;
                // @generated-tile
                var acc = T(0);
                // @generated-sum
                tile[nxt + i] = acc;
            }
        }
        workgroupBarrier();
        if (edge) {
            for (var lr = m + r0; lr < LH - m; lr += ROWS_AT_ONCE) {
                let g = g_base + lr;
                let x = x_base + lc;
                if (!live || !outside(g, x)) {
                    continue;
                }
                var value = CVAL;
                if (MODE != CONSTANT) {
                    let mr = clamp(map_axis(g, p.rows) - g_base, 0, LH - 1);
                    let mc = clamp(map_axis(x, NX) - x_base, 0, LW - 1);
                    value = tile[nxt + mr * LW + mc];
                }
                tile[nxt + lr * LW + lc] = value;
            }
            workgroupBarrier();
        }
    }

    let fin = (K % 2) * TILE;
    if (lc >= HALO && lc < HALO + TW) {
        for (var lr = HALO + r0; lr < HALO + TH; lr += ROWS_AT_ONCE) {
            let zr = z_base + lr;
            let x = x_base + lc;
            if (zr < p.comp_lo + p.comp_rows && x < NX) {
                dst[zr * NX + x] = tile[fin + lr * LW + lc];
            }
        }
    }
}
