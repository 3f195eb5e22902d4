// The 64-bit scan of integer elements (T = vec2<u32>) in one dispatch a chunk: composed after
// shaders/scan64.wgsl (its Params, bindings, load and wg_inclusive) for u64 and i64 only.
// CPU twin: crates/gpusort-core/src/reference/scan.rs (scan64).

// A workgroup takes a tile by ticket (so it waits only on tiles of workgroups already running),
// scans it, publishes its aggregate, and looks back over its predecessors for its prefix
// (METHODS.md method 3 device-wide, as scan.wgsl with common/lookback.wgsl does for 32-bit
// values). WGSL atomics are relaxed, so a status carries its value in the atomics themselves:
// four words, a 16-bit quarter of the value each with the flag in the top half; a reader takes a
// status only when all four flags agree (a status being overwritten, aggregate by inclusive, reads
// as not yet published). The walk reads WINDOW predecessors a round (an invocation each, one
// memory latency for all), and invocation 0 adds them nearest first up to an inclusive one. A
// predecessor silent for SPIN_LIMIT rounds is reduced from its input by the waiting workgroup.
// Each invocation scans CHAINED_PER consecutive elements in registers.
const CHAINED_PER: u32 = 8u;
const CHAINED_TILE: u32 = WG * CHAINED_PER;
const STATUS_HEADER: u32 = 4u; // state: [0] the ticket counter; a tile's status at 4 + 4 * tile
const FLAG_AGGREGATE: u32 = 1u;
const FLAG_INCLUSIVE: u32 = 2u;
// walk states, for the whole workgroup
const WALK_DONE: u32 = 1u;
const WALK_SILENT: u32 = 2u;
const WINDOW: u32 = 32u;

@group(0) @binding(5) var<storage, read_write> state: array<atomic<u32>>;

var<workgroup> chained_ticket: u32;
var<workgroup> walk_prefix: T;  // the tiles [walk_next, tile) combined
var<workgroup> walk_next: u32;
var<workgroup> walk_state: u32;
var<workgroup> window: array<vec3<u32>, WINDOW>;

// (flag, value) of tile t's status: flag 0 where it is not (wholly) published.
fn read_status(t: u32) -> vec3<u32> {
    let at = STATUS_HEADER + 4u * t;
    let w0 = atomicLoad(&state[at]);
    let w1 = atomicLoad(&state[at + 1u]);
    let w2 = atomicLoad(&state[at + 2u]);
    let w3 = atomicLoad(&state[at + 3u]);
    let f = w0 >> 16u;
    if ((w1 >> 16u) != f || (w2 >> 16u) != f || (w3 >> 16u) != f) { return vec3<u32>(0u); }
    return vec3<u32>(f, (w0 & 0xffffu) | (w1 << 16u), (w2 & 0xffffu) | (w3 << 16u));
}

fn publish_status(t: u32, flag: u32, v: T) {
    let at = STATUS_HEADER + 4u * t;
    let f = flag << 16u;
    atomicStore(&state[at], f | (v.x & 0xffffu));
    atomicStore(&state[at + 1u], f | (v.x >> 16u));
    atomicStore(&state[at + 2u], f | (v.y & 0xffffu));
    atomicStore(&state[at + 3u], f | (v.y >> 16u));
}

// Everything tile t's elements combine to (every invocation calls it).
fn chained_reduce(t: u32, lid: u32) -> T {
    var acc = identity();
    for (var j = 0u; j < CHAINED_PER; j++) { acc = combine(acc, load(t * CHAINED_TILE + lid * CHAINED_PER + j)); }
    wg_inclusive(lid, acc);
    let total = sh[WG - 1u];
    workgroupBarrier(); // sh is written again by the next scan
    return total;
}

// The tile's ticket (every invocation calls it): tiles in the order workgroups start.
fn take_tile(lid: u32) -> u32 {
    if (lid == 0u) { chained_ticket = atomicAdd(&state[0], 1u); }
    return workgroupUniformLoad(&chained_ticket);
}

// Everything before `tile` combined, from its predecessors' statuses (every invocation calls
// it, in uniform control flow): publishes `aggregate` first, this tile's inclusive value last,
// and leaves the chunk's running value in carry[carry_out] from the last tile. Returns (what
// the tiles before combine to, what the chunks before combine to): the second comes first in
// every result.
fn chained_prefix(tile: u32, aggregate: T, lid: u32) -> array<T, 2> {
    if (lid == 0u) {
        publish_status(tile, select(FLAG_AGGREGATE, FLAG_INCLUSIVE, tile == 0u), aggregate);
        walk_prefix = identity();
        walk_next = tile;
        // (NO_LOOKBACK, measuring only: tiles ignore their predecessors, results wrong)
        walk_state = select(0u, WALK_DONE, tile == 0u || NO_LOOKBACK == 1u);
    }
    // WINDOW predecessors read a round, invocation 0 adds them; a predecessor silent for
    // SPIN_LIMIT rounds is reduced by the whole workgroup
    var spins = 0u; // (invocation 0's)
    loop {
        let st = workgroupUniformLoad(&walk_state);
        if (st == WALK_DONE) { break; }
        let k = workgroupUniformLoad(&walk_next); // tiles below k are still to add (k > 0)
        if (st == WALK_SILENT) {
            let r = chained_reduce(k - 1u, lid);
            if (lid == 0u) {
                walk_prefix = combine(r, walk_prefix);
                walk_next = k - 1u;
                walk_state = select(0u, WALK_DONE, k == 1u);
                spins = 0u;
            }
            continue;
        }
        if (lid < WINDOW && lid < k) { window[lid] = read_status(k - 1u - lid); }
        workgroupBarrier();
        if (lid == 0u) {
            var added = 0u;
            for (var i = 0u; i < min(WINDOW, k); i++) {
                let s = window[i];
                if (s.x == 0u) { break; }
                walk_prefix = combine(vec2<u32>(s.y, s.z), walk_prefix);
                added += 1u;
                if (s.x == FLAG_INCLUSIVE) { walk_state = WALK_DONE; break; }
            }
            walk_next = k - added;
            if (walk_next == 0u) { walk_state = WALK_DONE; }
            spins = select(spins + 1u, 0u, added > 0u);
            if (walk_state == 0u && spins > SPIN_LIMIT) { walk_state = WALK_SILENT; }
        }
    }
    let prefix = workgroupUniformLoad(&walk_prefix);
    let carried = carry[params.carry_in];
    if (lid == 0u) {
        if (tile > 0u) { publish_status(tile, FLAG_INCLUSIVE, combine(prefix, aggregate)); }
        if (tile + 1u == params.tiles) {
            carry[params.carry_out] = combine(carried, combine(prefix, aggregate));
        }
    }
    return array<T, 2>(prefix, carried);
}

// Element i's result, `run` everything before it combines to; returns everything up to it.
fn put(i: u32, run: T, x: T) -> T {
    let next = combine(run, x);
    if (i < params.n) { dst[i] = select(run, next, INCLUSIVE == 1u); }
    return next;
}

@compute @workgroup_size(256)
fn scan_chained(@builtin(local_invocation_index) lid: u32) {
    let tile = take_tile(lid);
    if (tile >= params.tiles) { return; }
    let base = tile * CHAINED_TILE + lid * CHAINED_PER;
    var v: array<T, CHAINED_PER>;
    var mine = identity();
    for (var j = 0u; j < CHAINED_PER; j++) {
        v[j] = load(base + j);
        mine = combine(mine, v[j]);
    }
    let incl = wg_inclusive(lid, mine);
    let aggregate = sh[WG - 1u];
    var before = identity();
    if (lid > 0u) { before = sh[lid - 1u]; }
    let p = chained_prefix(tile, aggregate, lid);
    var run = combine(p[1], combine(p[0], before));
    for (var j = 0u; j < CHAINED_PER; j++) { run = put(base + j, run, v[j]); }
}
