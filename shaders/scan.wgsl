// Device-wide scans of u32/i32/f32 in one pass (METHODS.md method 3): each workgroup scans a tile
// of WG x 16 elements (each invocation its 16 consecutive ones, then one workgroup scan of the
// invocation totals with wg_exclusive), publishes its aggregate and looks back for its prefix
// (common/lookback.wgsl).
// CPU twin: crates/gpusort-core/src/cpu/scan.rs.
// Host-prepended constants: WG, OP (operator code, see combine), IDENTITY, INCLUSIVE (0/1).
// Host-composed before this file: common/grid.wgsl, one of common/wgscan_{subgroup,shared}.wgsl,
// common/lookback.wgsl.

const VECS: u32 = 4u; // vec4s per invocation: 16 elements
const TILE_VECS: u32 = WG * VECS;

// The tile passes through workgroup memory: loaded and stored coalesced (vec4 r*WG + li), scanned
// blocked (each invocation its VECS consecutive vec4s). Measured on the H200: blocked global loads
// (each invocation reading 128 consecutive bytes) ran the 2^28 scan at 20% of copy bandwidth.
var<workgroup> stage: array<vec4<u32>, TILE_VECS>;

struct ScanParams { n: u32, _pad0: u32, _pad1: u32, _pad2: u32 }

@group(0) @binding(0) var<uniform> sp: ScanParams;
@group(0) @binding(2) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> dst: array<vec4<u32>>;

fn combine(a: u32, b: u32) -> u32 {
    switch OP {
        case 1u: { return bitcast<u32>(bitcast<f32>(a) + bitcast<f32>(b)); }
        case 2u: { return max(a, b); }
        case 3u: { return min(a, b); }
        case 4u: { return bitcast<u32>(max(bitcast<i32>(a), bitcast<i32>(b))); }
        case 5u: { return bitcast<u32>(min(bitcast<i32>(a), bitcast<i32>(b))); }
        case 6u: { return a & b; }
        case 7u: { return a | b; }
        case 8u: { return a ^ b; }
        default: { return a + b; } // 0: wrapping add of u32 and i32
    }
}

fn load(v: u32) -> vec4<u32> {
    let e = v * 4u;
    let valid = vec4<u32>(e, e + 1u, e + 2u, e + 3u) < vec4<u32>(sp.n);
    var x = vec4<u32>(IDENTITY);
    if (e < sp.n) { x = src[v]; }
    return select(vec4<u32>(IDENTITY), x, valid);
}

fn vec_inclusive(x: vec4<u32>) -> vec4<u32> {
    let a = x.x;
    let b = combine(a, x.y);
    let c = combine(b, x.z);
    return vec4<u32>(a, b, c, combine(c, x.w));
}

// Load tile `t` into `stage`, coalesced.
fn stage_tile(t: u32) {
    for (var r = 0u; r < VECS; r++) {
        stage[r * WG + inv.li] = load(t * TILE_VECS + r * WG + inv.li);
    }
    workgroupBarrier();
}

// Scan this invocation's VECS consecutive vec4s of `stage` in place (inclusive); returns its total.
fn scan_own() -> u32 {
    var acc = IDENTITY;
    for (var r = 0u; r < VECS; r++) {
        let x = vec_inclusive(stage[inv.li * VECS + r]);
        let y = vec4<u32>(combine(acc, x.x), combine(acc, x.y), combine(acc, x.z), combine(acc, x.w));
        stage[inv.li * VECS + r] = y;
        acc = y.w;
    }
    return acc;
}

// The fallback of the look-back: this workgroup reduces tile t from its input.
fn tile_reduce(t: u32) -> u32 {
    var acc = IDENTITY;
    for (var r = 0u; r < VECS; r++) {
        acc = combine(acc, vec_inclusive(load(t * TILE_VECS + inv.li * VECS + r)).w);
    }
    return wg_exclusive(acc).y;
}

@compute @workgroup_size(WG)
fn scan(i: Invocation) {
    set_invocation(i);
    let tile = take_ticket();
    stage_tile(tile);
    let total = scan_own();
    let s = wg_exclusive(total);
    let prefix = combine(look_back(tile, s.y), s.x);
    // add the prefix (and shift by one for an exclusive scan) in place, blocked
    var before = prefix;
    for (var r = 0u; r < VECS; r++) {
        let c = stage[inv.li * VECS + r];
        var out: vec4<u32>;
        if (INCLUSIVE == 1u) {
            out = vec4<u32>(combine(prefix, c.x), combine(prefix, c.y), combine(prefix, c.z), combine(prefix, c.w));
        } else {
            out = vec4<u32>(before, combine(prefix, c.x), combine(prefix, c.y), combine(prefix, c.z));
            before = combine(prefix, c.w);
        }
        stage[inv.li * VECS + r] = out;
    }
    workgroupBarrier();
    for (var r = 0u; r < VECS; r++) {
        let v = tile * TILE_VECS + r * WG + inv.li;
        if (v * 4u < sp.n) { dst[v] = stage[r * WG + inv.li]; }
    }
}
