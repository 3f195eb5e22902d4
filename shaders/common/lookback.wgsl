// Single-pass chained scan across workgroups: decoupled look-back with a fallback (METHODS.md
// method 3, device-wide). WebGPU promises no forward progress between workgroups, so:
// - tiles are handed out by an atomic ticket taken when a workgroup starts, so a workgroup only
//   ever waits on tiles whose workgroups already started;
// - every wait is bounded (SPIN_LIMIT reads, a host-prepended constant); when a predecessor has
//   published nothing by then, the waiting workgroup reduces that tile's input itself.
// WGSL atomics are relaxed, so each published value travels inside the atomics with its flag:
// 16 bits of value and the flag in each of two words; a reader accepts the pair only when both
// flags agree.
// Each round, invocation 0 first spins on the nearest unaccounted tile until it has published
// something (tight loop, bounded by SPIN_LIMIT reads); then WINDOW invocations (a host constant,
// <= WG) read the WINDOW nearest predecessors at once; the nearest gap or inclusive value is
// found with a workgroup atomicMin and the values before it combined with one workgroup scan, so
// a walk over tiles that have only published their aggregates costs one round per WINDOW tiles.
// Needs from the family: combine, IDENTITY, tile_reduce(t) (cooperative), WINDOW, and
// `state` at binding 1 (cleared to zero before the dispatch).

const FLAG_AGGREGATE: u32 = 1u;
const FLAG_INCLUSIVE: u32 = 2u;
const STATE_HEADER: u32 = 4u; // [0] ticket counter, [1..3] reserved

@group(0) @binding(1) var<storage, read_write> state: array<atomic<u32>>;

var<workgroup> wg_tile: u32;
var<workgroup> wg_stop: atomic<u32>;
var<workgroup> wg_stop_flag: u32;
var<workgroup> wg_step: vec4<u32>; // (stuck, stop, stop flag, -)

// The tile this workgroup works on, in start order.
fn take_ticket() -> u32 {
    if (inv.li == 0u) { wg_tile = atomicAdd(&state[0], 1u); }
    return workgroupUniformLoad(&wg_tile);
}

fn read_state(t: u32) -> vec2<u32> {
    let lo = atomicLoad(&state[STATE_HEADER + 2u * t]);
    let hi = atomicLoad(&state[STATE_HEADER + 2u * t + 1u]);
    if ((lo >> 16u) != 0u && (lo >> 16u) == (hi >> 16u)) {
        return vec2<u32>(lo >> 16u, (lo & 0xffffu) | (hi << 16u));
    }
    return vec2<u32>(0u, 0u);
}

fn publish(tile: u32, flag: u32, v: u32) {
    atomicStore(&state[STATE_HEADER + 2u * tile], (v & 0xffffu) | (flag << 16u));
    atomicStore(&state[STATE_HEADER + 2u * tile + 1u], (v >> 16u) | (flag << 16u));
}

// Make this tile's aggregate visible to its successors: as early as possible, since they wait
// on it (tile 0's aggregate is already its inclusive value). Uniform control flow.
fn publish_aggregate(tile: u32, aggregate: u32) {
    if (inv.li == 0u) { publish(tile, select(FLAG_AGGREGATE, FLAG_INCLUSIVE, tile == 0u), aggregate); }
}

// Everything before `tile`, combined; publishes this tile's inclusive value on the way out.
// Call from uniform control flow, after publish_aggregate, with the same aggregate.
fn look_back(tile: u32, aggregate: u32) -> u32 {
    if (tile == 0u) { return IDENTITY; }
    var prefix = IDENTITY;
    var next = tile; // tiles [next, tile) are accounted for
    loop {
        let limit = min(WINDOW, next);
        if (inv.li == 0u) {
            // wait (bounded) for the nearest unaccounted tile to publish anything
            var ready = false;
            for (var spin = 0u; spin < SPIN_LIMIT && !ready; spin++) {
                ready = read_state(next - 1u).x != 0u;
            }
            wg_step.x = u32(!ready);
            atomicStore(&wg_stop, select(0u, limit, ready)); // stuck: stop at once, fall back
            wg_stop_flag = FLAG_AGGREGATE;
        }
        workgroupBarrier();
        // invocation j reads tile next-1-j; the walk stops at the nearest gap or inclusive value
        var sv = vec2<u32>(0u, IDENTITY);
        if (inv.li < limit && wg_step.x == 0u) {
            sv = read_state(next - 1u - inv.li);
            if (sv.x != FLAG_AGGREGATE) { atomicMin(&wg_stop, inv.li); }
        }
        workgroupBarrier();
        if (inv.li == 0u) { wg_step.y = atomicLoad(&wg_stop); }
        let stop = workgroupUniformLoad(&wg_step).y;
        if (inv.li == stop && stop < limit) { wg_stop_flag = sv.x; }
        // combine the aggregates before the stop, and the inclusive value at it
        let take = inv.li < stop || (inv.li == stop && stop < limit && sv.x == FLAG_INCLUSIVE);
        let run = wg_exclusive(select(IDENTITY, sv.y, take)).y; // its barriers publish wg_stop_flag
        let stop_flag = workgroupUniformLoad(&wg_stop_flag);
        prefix = combine(run, prefix);
        if (stop < limit && stop_flag == FLAG_INCLUSIVE) { break; }
        next -= stop;
        if (next == 0u) { break; }
        if (stop == 0u) {
            // the fallback: the nearest tile published nothing within the bound; do its work here
            prefix = combine(tile_reduce(next - 1u), prefix);
            next -= 1u;
            if (next == 0u) { break; }
        }
    }
    if (inv.li == 0u) { publish(tile, FLAG_INCLUSIVE, combine(prefix, aggregate)); }
    return prefix;
}
