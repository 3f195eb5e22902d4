// Stream compaction in one pass (METHODS.md method 3): keep the elements whose predicate equals
// `keep`, in order, with their u32 payload, and count them. Each invocation tests 32 consecutive
// elements into a bit mask; the counts are scanned with one-bit scans (pscan_bits) where
// subgroups exist; tiles chain through the look-back (combine = add). A stable partition is two of these:
// keep the matching elements, then the others starting at the first pass's count.
// CPU twin: crates/gpusort-core/src/cpu/scan.rs.
// Host-prepended constants: WG, W (u32 words per element: 1 or 2), PAYLOAD (0/1), IDENTITY (0),
// SPIN_LIMIT.
// Host-composed before this file: common/grid.wgsl, common/keyorder.wgsl, one of
// common/wgscan_{subgroup,shared}.wgsl, common/lookback.wgsl.

const ITEMS: u32 = 16u; // consecutive elements per invocation: one bit each in a mask
const TILE: u32 = WG * ITEMS;
const STAGE_WORDS: u32 = TILE * (W + PAYLOAD);

// The tile passes through workgroup memory twice: loaded coalesced, tested blocked (each
// invocation its ITEMS consecutive elements), and the kept elements packed at their local
// offsets, then written out coalesced. The host picks WG so STAGE_WORDS is 4096 (16 KiB).
var<workgroup> stage: array<u32, STAGE_WORDS>;
const NO_SLOT: u32 = 0xffffffffu;
const PRED_BELOW: u32 = 0u;
const PRED_AT_LEAST: u32 = 1u;
const PRED_NONZERO: u32 = 2u;

struct CompactParams {
    n: u32,
    kind: u32,      // key type code of the elements
    pred: u32,      // PRED_*
    keep: u32,      // 1: keep elements where the predicate holds; 0: keep the others
    pivot_hi: u32,  // the pivot, already in sortable encoding (keyorder.wgsl)
    pivot_lo: u32,
    base_slot: u32, // where in `counts` the output offset is read (NO_SLOT: 0)
    count_slot: u32 // where in `counts` the number kept is written
}

@group(0) @binding(0) var<uniform> cp: CompactParams;
@group(0) @binding(2) var<storage, read> src: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;
@group(0) @binding(4) var<storage, read_write> counts: array<u32>;
@group(0) @binding(5) var<storage, read> payload_in: array<u32>;
@group(0) @binding(6) var<storage, read_write> payload_out: array<u32>;

fn combine(a: u32, b: u32) -> u32 {
    return a + b;
}

// The predicate of element words (hi, lo).
fn holds(w: vec2<u32>) -> bool {
    var p: bool;
    if (cp.pred == PRED_NONZERO) {
        // numeric zero: for floats both +0.0 and -0.0 (NaN counts as nonzero, as in NumPy)
        let mag = select(w, vec2<u32>(w.x & 0x7fffffffu, w.y), kind_float(cp.kind));
        p = mag.x != 0u || mag.y != 0u;
    } else {
        let k = key_encode(cp.kind, false, w.x, w.y);
        let below = k.x < cp.pivot_hi || (k.x == cp.pivot_hi && k.y < cp.pivot_lo);
        p = select(!below, below, cp.pred == PRED_BELOW);
    }
    return p == (cp.keep != 0u);
}

fn global_words(e: u32) -> vec2<u32> {
    if (W == 2u) { return vec2<u32>(src[2u * e + 1u], src[2u * e]); }
    return vec2<u32>(src[e], 0u);
}

fn staged_words(local: u32) -> vec2<u32> {
    if (W == 2u) { return vec2<u32>(stage[2u * local + 1u], stage[2u * local]); }
    return vec2<u32>(stage[local], 0u);
}

fn first(tile: u32) -> u32 {
    return tile * TILE + inv.li * ITEMS;
}

// Which of this invocation's ITEMS elements of tile `t` are kept, reading global memory.
fn global_mask(t: u32) -> u32 {
    var m = 0u;
    for (var c = 0u; c < ITEMS; c++) {
        let e = t * TILE + inv.li * ITEMS + c;
        if (e < cp.n && holds(global_words(e))) { m |= 1u << c; }
    }
    return m;
}

fn tile_reduce(t: u32) -> u32 {
    return wg_exclusive(countOneBits(global_mask(t))).y;
}

@compute @workgroup_size(WG)
fn compact(i: Invocation) {
    set_invocation(i);
    let tile = take_ticket();
    let tile_first = tile * TILE;
    let in_tile = min(TILE, cp.n - min(cp.n, tile_first));
    // load the tile's words coalesced, then test this invocation's elements blocked
    for (var k = inv.li; k < in_tile * W; k += WG) { stage[k] = src[W * tile_first + k]; }
    workgroupBarrier();
    var mask = 0u;
    for (var c = 0u; c < ITEMS; c++) {
        let local = inv.li * ITEMS + c;
        if (local < in_tile && holds(staged_words(local))) { mask |= 1u << c; }
    }
    // after this call's barriers every invocation has read its elements: `stage` is free
    let s = wg_count_exclusive(countOneBits(mask), 5u);
    publish_aggregate(tile, s.y);
    // pack the kept elements (and payload) at their offsets inside the tile; the words come again
    // from global memory (just read, so from cache) rather than from a private array, which
    // drivers put in slow local memory when it is indexed by a computed bit position
    var at = s.x;
    var m = mask;
    while (m != 0u) {
        let e = tile_first + inv.li * ITEMS + firstTrailingBit(m);
        m &= m - 1u;
        for (var w = 0u; w < W; w++) { stage[W * at + w] = src[W * e + w]; }
        if (PAYLOAD == 1u) { stage[W * TILE + at] = payload_in[e]; }
        at += 1u;
    }
    let prefix = look_back(tile, s.y);
    var base = 0u;
    if (cp.base_slot != NO_SLOT) { base = counts[cp.base_slot]; }
    let out = base + prefix;
    workgroupBarrier();
    for (var k = inv.li; k < s.y * W; k += WG) { dst[W * out + k] = stage[k]; }
    if (PAYLOAD == 1u) {
        for (var k = inv.li; k < s.y; k += WG) { payload_out[out + k] = stage[W * TILE + k]; }
    }
    let tiles = (cp.n + TILE - 1u) / TILE;
    if (inv.li == 0u && tile + 1u >= tiles) { counts[cp.count_slot] = prefix + s.y; }
}
