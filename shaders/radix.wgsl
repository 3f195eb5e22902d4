// LSD radix sort passes over 8-bit digits (METHODS.md method 3: LSD radix sort as stable
// splits), on the u32 planes the key transforms produce ([key hi][key lo][index]).
// One pass = `upsweep` (each tile's digit histogram, digit-major: hist[d * tiles + t]), an
// exclusive scan of those histograms (scan.wgsl), then `downsweep`: each tile sorts its digits
// stably in workgroup memory with three multi-way splits (3, 3 and 2 bits), and writes each record to scanned_hist[d * tiles + t] + its rank among
// the tile's keys of digit d. Stable, so LSD order over the digits sorts the keys.
// CPU twin: crates/gpusort-core/src/cpu/radix.rs.
// Host-prepended constants: WG (256: one histogram bin per invocation), NW (planes), IDENTITY (0).
// Host-composed before this file: common/grid.wgsl, one of
// common/wgscan_{subgroup,shared}.wgsl.

const ITEMS: u32 = 16u;
const TILE: u32 = WG * ITEMS;
const RADIX: u32 = 256u;

struct RadixParams {
    n: u32,
    plane_stride: u32, // u32 words per plane
    plane: u32,        // the key plane this pass reads its digit from
    shift: u32,        // the digit's lowest bit in that word
    tiles: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> rp: RadixParams;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
@group(0) @binding(3) var<storage, read_write> hist: array<u32>;
@group(0) @binding(4) var<storage, read> offsets: array<u32>;

var<workgroup> bins: array<atomic<u32>, RADIX>;
var<workgroup> bin_start: array<u32, RADIX>;
var<workgroup> packed: array<u32, TILE>; // (local index << 8) | digit, in local sort order

fn combine(a: u32, b: u32) -> u32 {
    return a + b;
}

fn digit_of(e: u32) -> u32 {
    return (src[rp.plane * rp.plane_stride + e] >> rp.shift) & 0xffu;
}

fn count_tile(tile: u32) {
    atomicStore(&bins[inv.li], 0u);
    workgroupBarrier();
    for (var i = 0u; i < ITEMS; i++) {
        let e = tile * TILE + i * WG + inv.li; // coalesced
        if (e < rp.n) { atomicAdd(&bins[digit_of(e)], 1u); }
    }
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn upsweep(i: Invocation) {
    set_invocation(i);
    let tile = linear_workgroup(inv.wid, inv.nwg);
    if (tile >= rp.tiles) { return; }
    count_tile(tile);
    hist[inv.li * rp.tiles + tile] = atomicLoad(&bins[inv.li]);
}

@compute @workgroup_size(WG)
fn downsweep(i: Invocation) {
    set_invocation(i);
    let tile = linear_workgroup(inv.wid, inv.nwg);
    if (tile >= rp.tiles) { return; }
    let first = tile * TILE;
    let in_tile = min(TILE, rp.n - first);
    // where each digit's run starts inside the tile once it is sorted
    count_tile(tile);
    bin_start[inv.li] = wg_exclusive(atomicLoad(&bins[inv.li])).x;
    // the tile's digits with their local indices; positions past the end get digit 255 and stay
    // last (the splits are stable and they come last to begin with)
    for (var k = inv.li; k < TILE; k += WG) {
        var d = 0xffu;
        if (k < in_tile) { d = digit_of(first + k); }
        packed[k] = (k << 8u) | d;
    }
    // three stable splits on the digit, 3 + 3 + 2 bits: each invocation counts its ITEMS
    // consecutive entries per category (eight 16-bit counters packed in a vec4), one workgroup
    // scan of that vec4 places every entry. (Eight one-bit splits measured 4.8 ms for 2^24 keys
    // on the H200, dominated by their sixteen workgroup scans per pass.)
    for (var b = 0u; b < 8u; b += 3u) {
        workgroupBarrier();
        let mask = (1u << min(3u, 8u - b)) - 1u;
        var mine: array<u32, ITEMS>;
        var counts = vec4<u32>(0u);
        for (var j = 0u; j < ITEMS; j++) {
            mine[j] = packed[inv.li * ITEMS + j];
            let c = (mine[j] >> b) & mask;
            counts[c >> 1u] += 1u << ((c & 1u) * 16u);
        }
        let s = wg_exclusive4(counts); // (packed counts before this invocation, packed totals)
        var next: array<u32, 8>;
        var base = 0u;
        for (var c = 0u; c < 8u; c++) {
            let half = (c & 1u) * 16u;
            next[c] = base + ((s[0][c >> 1u] >> half) & 0xffffu);
            base += (s[1][c >> 1u] >> half) & 0xffffu;
        }
        for (var j = 0u; j < ITEMS; j++) {
            let c = (mine[j] >> b) & mask;
            packed[next[c]] = mine[j];
            next[c] += 1u;
        }
    }
    workgroupBarrier();
    // scatter: position p holds the p-th record of the tile in digit order
    for (var p = inv.li; p < in_tile; p += WG) {
        let v = packed[p];
        let d = v & 0xffu;
        let e = first + (v >> 8u);
        let out = offsets[d * rp.tiles + tile] + p - bin_start[d];
        for (var q = 0u; q < NW; q++) {
            dst[q * rp.plane_stride + out] = src[q * rp.plane_stride + e];
        }
    }
}
