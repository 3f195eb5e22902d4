// Device-wide scans of u32/i32/f32 in one pass (METHODS.md method 3): each workgroup scans a tile
// of ROUNDS x WG vec4s (per round: within each vec4, then across the workgroup with
// wg_exclusive), publishes its aggregate and looks back for its prefix (common/lookback.wgsl).
// Loads and stores are coalesced (vec4 r * WG + li of the tile) and go straight between global
// memory and registers. Measured on the H200 at 2^28 u32: this layout 1.6 ms; each invocation
// scanning its own consecutive elements (one workgroup scan per tile) 2.5 ms read straight from
// global memory and 2.6 ms staged through workgroup memory.
// CPU twin: crates/gpusort-core/src/cpu/scan.rs.
// Host-prepended constants: WG, OP (operator code, see combine), IDENTITY, INCLUSIVE (0/1),
// ROUND_GROUPS (tile = WG x 16 x ROUND_GROUPS elements), SPIN_LIMIT and WINDOW (look-back).
// Host-composed before this file: common/grid.wgsl, one of common/wgscan_{subgroup,shared}.wgsl,
// common/lookback.wgsl.

const ROUNDS: u32 = 4u * ROUND_GROUPS; // vec4s per invocation; scanned four at a time (wg_exclusive4)
const TILE_VECS: u32 = WG * ROUNDS;

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

// The fallback of the look-back: this workgroup reduces tile t from its input.
fn tile_reduce(t: u32) -> u32 {
    var acc = IDENTITY;
    for (var r = 0u; r < ROUNDS; r++) {
        acc = combine(acc, vec_inclusive(load(t * TILE_VECS + r * WG + inv.li)).w);
    }
    return wg_exclusive(acc).y;
}

@compute @workgroup_size(WG)
fn scan(i: Invocation) {
    set_invocation(i);
    let tile = take_ticket();
    // all loads first, then one workgroup scan per four rounds (a vec4 of round totals)
    var incl: array<vec4<u32>, ROUNDS>;
    for (var r = 0u; r < ROUNDS; r++) {
        incl[r] = vec_inclusive(load(tile * TILE_VECS + r * WG + inv.li));
    }
    // before[r]: everything in the tile before this invocation's vec4 of round r
    var before: array<u32, ROUNDS>;
    var carry = IDENTITY;
    for (var q = 0u; q < ROUND_GROUPS; q++) {
        let r0 = 4u * q;
        let s = wg_exclusive4(vec4<u32>(incl[r0].w, incl[r0 + 1u].w, incl[r0 + 2u].w, incl[r0 + 3u].w));
        for (var c = 0u; c < 4u; c++) {
            before[r0 + c] = combine(carry, s[0][c]);
            carry = combine(carry, s[1][c]);
        }
    }
    publish_aggregate(tile, carry);
    let prefix = look_back(tile, carry);
    for (var r = 0u; r < ROUNDS; r++) {
        let v = tile * TILE_VECS + r * WG + inv.li;
        if (v * 4u < sp.n) {
            let p = combine(prefix, before[r]);
            var out: vec4<u32>;
            if (INCLUSIVE == 1u) {
                out = vec4<u32>(combine(p, incl[r].x), combine(p, incl[r].y), combine(p, incl[r].z), combine(p, incl[r].w));
            } else {
                out = vec4<u32>(p, combine(p, incl[r].x), combine(p, incl[r].y), combine(p, incl[r].z));
            }
            dst[v] = out;
        }
    }
}
