// Single-pass chained scan across workgroups: decoupled look-back with a fallback (METHODS.md
// method 3, device-wide). WebGPU promises no forward progress between workgroups, so:
// - tiles are handed out by an atomic ticket taken when a workgroup starts, so a workgroup only
//   ever waits on tiles whose workgroups already started;
// - every wait is bounded (SPIN_LIMIT rounds, a host-prepended constant); when a predecessor has
//   published nothing by then, the waiting workgroup reduces that tile's input itself.
// WGSL atomics are relaxed, so each published value travels inside the atomics with its flag:
// 16 bits of value and the flag in each of two words; a reader accepts the pair only when both
// flags agree.
// The look-back reads WINDOW predecessors at once (one per invocation), so a walk over tiles
// that have only published their aggregates costs one round trip per WINDOW tiles.
// Needs from the family: combine, IDENTITY, tile_reduce(t) (cooperative), and
// `state` at binding 1 (cleared to zero before the dispatch).

const FLAG_AGGREGATE: u32 = 1u;
const FLAG_INCLUSIVE: u32 = 2u;
const STATE_HEADER: u32 = 4u; // [0] ticket counter, [1..3] reserved
const WINDOW: u32 = 32u;      // predecessors read per round (<= WG)

@group(0) @binding(1) var<storage, read_write> state: array<atomic<u32>>;

var<workgroup> wg_tile: u32;
var<workgroup> wg_flags: array<u32, WINDOW>;
var<workgroup> wg_values: array<u32, WINDOW>;
var<workgroup> wg_step: vec4<u32>; // (tiles consumed, done, value, stuck)

// The tile this workgroup works on, in start order.
fn take_ticket() -> u32 {
    if (inv.li == 0u) { wg_tile = atomicAdd(&state[0], 1u); }
    return workgroupUniformLoad(&wg_tile);
}

fn publish(tile: u32, flag: u32, v: u32) {
    atomicStore(&state[STATE_HEADER + 2u * tile], (v & 0xffffu) | (flag << 16u));
    atomicStore(&state[STATE_HEADER + 2u * tile + 1u], (v >> 16u) | (flag << 16u));
}

// Everything before `tile`, combined; publishes this tile's inclusive value on the way out.
// Call from uniform control flow with the tile's aggregate.
fn look_back(tile: u32, aggregate: u32) -> u32 {
    if (tile == 0u) {
        if (inv.li == 0u) { publish(0u, FLAG_INCLUSIVE, aggregate); }
        return IDENTITY;
    }
    if (inv.li == 0u) { publish(tile, FLAG_AGGREGATE, aggregate); }
    var prefix = IDENTITY;
    var next = tile;  // tiles [next, tile) are accounted for
    var spins = 0u;
    loop {
        // one round: invocation j reads tile next-1-j
        if (inv.li < WINDOW) {
            var flag = 0u;
            var value = 0u;
            if (inv.li < next && SPIN_LIMIT > 0u) { // SPIN_LIMIT 0: never wait (tests the fallback)
                let t = next - 1u - inv.li;
                let lo = atomicLoad(&state[STATE_HEADER + 2u * t]);
                let hi = atomicLoad(&state[STATE_HEADER + 2u * t + 1u]);
                if ((lo >> 16u) != 0u && (lo >> 16u) == (hi >> 16u)) {
                    flag = lo >> 16u;
                    value = (lo & 0xffffu) | (hi << 16u);
                }
            }
            wg_flags[inv.li] = flag;
            wg_values[inv.li] = value;
        }
        workgroupBarrier();
        if (inv.li == 0u) {
            // combine the ready run nearest to us, up to the first inclusive value or gap
            var acc = IDENTITY;
            var used = 0u;
            var done = 0u;
            for (var j = 0u; j < min(WINDOW, next); j++) {
                let f = wg_flags[j];
                if (f == 0u) { break; }
                acc = combine(wg_values[j], acc);
                used = j + 1u;
                if (f == FLAG_INCLUSIVE) { done = 1u; break; }
            }
            if (used == next) { done = 1u; } // reached tile 0
            wg_step = vec4<u32>(used, done, acc, 0u);
        }
        let step = workgroupUniformLoad(&wg_step);
        prefix = combine(step.z, prefix);
        next -= step.x;
        if (step.y != 0u) { break; }
        if (step.x == 0u) {
            spins += 1u;
            if (spins >= SPIN_LIMIT) {
                // the fallback: tile next-1 has published nothing for a long time; do its work here
                prefix = combine(tile_reduce(next - 1u), prefix);
                next -= 1u;
                spins = 0u;
                if (next == 0u) { break; }
            }
        } else {
            spins = 0u;
        }
    }
    if (inv.li == 0u) { publish(tile, FLAG_INCLUSIVE, combine(prefix, aggregate)); }
    return prefix;
}
