// Scans of 64-bit elements (u64, i64 as vec2<u32> words, low word first; f64 where the device
// has SHADER_F64). Integers: one dispatch a chunk, `scan_chained` (shaders/scan64_chained.wgsl,
// composed after this file: tiles chained by a decoupled look-back). f64, whose bits WGSL cannot move into u32 words for the look-back's
// status words: three dispatches a chunk, every tile's total, the tiles' exclusive prefixes (one
// workgroup, carried from chunk to chunk), then each tile scanned from its prefix. Workgroup
// memory only (no subgroups): correct on every device.
//
// The host prepends `alias T = vec2<u32>|f64;`, `fn combine(a: T, b: T) -> T`,
// `fn identity() -> T`, `const INCLUSIVE: u32`, `const SPIN_LIMIT: u32`, `const NO_LOOKBACK: u32`
// (scan64_chained.wgsl's, measuring only), and the input: binding 1
// (`src`) with `fn element(i: u32) -> T` reading it (64-bit elements, or 32-bit integers widened
// as read).

const WG: u32 = 256u;
const PER: u32 = 4u;
const TILE: u32 = 1024u; // WG * PER

struct Params {
    n: u32,
    tiles: u32,      // the dispatch's tiles (CHAINED_TILE or TILE elements each)
    carry_in: u32,   // scan_chained: the carry slot everything before this chunk combines to
    carry_out: u32,  // scan_chained: the slot its last tile leaves the running value in
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<T>;
// one total a tile, replaced by the tile's exclusive prefix
@group(0) @binding(3) var<storage, read_write> totals: array<T>;
// what everything before this chunk combines to; updated for the next chunk
@group(0) @binding(4) var<storage, read_write> carry: array<T>;

var<workgroup> sh: array<T, WG>;

// Inclusive scan of one value per invocation (Hillis-Steele in workgroup memory); every
// invocation must call it. Leaves the inclusive scan in `sh`.
fn wg_inclusive(lid: u32, v: T) -> T {
    var x = v;
    sh[lid] = x;
    workgroupBarrier();
    for (var off = 1u; off < WG; off = off << 1u) {
        var y = identity();
        if (lid >= off) {
            y = sh[lid - off];
        }
        workgroupBarrier();
        if (lid >= off) {
            x = combine(y, x);
            sh[lid] = x;
        }
        workgroupBarrier();
    }
    return x;
}

fn load(i: u32) -> T {
    if (i < params.n) {
        return element(i);
    }
    return identity();
}

@compute @workgroup_size(256)
fn tile_totals(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let tile = linear_workgroup(wid, nwg);
    let base = tile * TILE + lid * PER;
    var t = identity();
    for (var k = 0u; k < PER; k = k + 1u) {
        t = combine(t, load(base + k));
    }
    let s = wg_inclusive(lid, t);
    if (lid == WG - 1u && tile < params.tiles) {
        totals[tile] = s;
    }
}

@compute @workgroup_size(256)
fn tile_prefixes(@builtin(local_invocation_index) lid: u32) {
    var run = carry[0];
    let rounds = (params.tiles + WG - 1u) / WG;
    for (var r = 0u; r < rounds; r = r + 1u) {
        let i = r * WG + lid;
        var v = identity();
        if (i < params.tiles) {
            v = totals[i];
        }
        let s = wg_inclusive(lid, v);
        var before = identity();
        if (lid > 0u) {
            before = sh[lid - 1u];
        }
        let all = sh[WG - 1u];
        if (i < params.tiles) {
            totals[i] = combine(run, before);
        }
        run = combine(run, all);
        workgroupBarrier();
    }
    if (lid == 0u) {
        carry[0] = run;
    }
}

@compute @workgroup_size(256)
fn tile_scans(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let tile = linear_workgroup(wid, nwg);
    let base = tile * TILE + lid * PER;
    var v: array<T, 4>;
    var t = identity();
    for (var k = 0u; k < PER; k = k + 1u) {
        v[k] = load(base + k);
        t = combine(t, v[k]);
    }
    let s = wg_inclusive(lid, t);
    if (tile >= params.tiles) {
        return;
    }
    var before = identity();
    if (lid > 0u) {
        before = sh[lid - 1u];
    }
    var run = combine(totals[tile], before);
    for (var k = 0u; k < PER; k = k + 1u) {
        let i = base + k;
        let next = combine(run, v[k]);
        if (i < params.n) {
            if (INCLUSIVE == 1u) {
                dst[i] = next;
            } else {
                dst[i] = run;
            }
        }
        run = next;
    }
}

