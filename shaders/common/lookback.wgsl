// Single-pass chained scan across workgroups: decoupled look-back with a fallback (METHODS.md
// method 3, device-wide). WebGPU promises no forward progress between workgroups, so:
// - tiles are handed out by an atomic ticket taken when a workgroup starts, so a workgroup only
//   ever waits on tiles whose workgroups already started;
// - every wait is bounded (SPIN_LIMIT reads, a host-prepended constant); when a predecessor has published nothing by then,
//   the waiting workgroup reduces that tile's input itself and goes on.
// WGSL atomics are relaxed, so each published value travels inside the atomics with its flag:
// 16 bits of value and the flag in each of two words; a reader accepts the pair only when both
// flags agree.
// Needs from the family: combine, IDENTITY, tile_reduce(t) (cooperative), and
// `state` at binding 1 (cleared to zero before the dispatch).

const FLAG_AGGREGATE: u32 = 1u;
const FLAG_INCLUSIVE: u32 = 2u;
const STATE_HEADER: u32 = 4u; // [0] ticket counter, [1..3] reserved

@group(0) @binding(1) var<storage, read_write> state: array<atomic<u32>>;

var<workgroup> wg_tile: u32;
var<workgroup> wg_flag: u32;
var<workgroup> wg_value: u32;

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
    var t = tile - 1u;
    loop {
        if (inv.li == 0u) {
            var flag = 0u;
            var value = 0u;
            for (var spin = 0u; spin < SPIN_LIMIT; spin++) {
                let lo = atomicLoad(&state[STATE_HEADER + 2u * t]);
                let hi = atomicLoad(&state[STATE_HEADER + 2u * t + 1u]);
                if ((lo >> 16u) != 0u && (lo >> 16u) == (hi >> 16u)) {
                    flag = lo >> 16u;
                    value = (lo & 0xffffu) | (hi << 16u);
                    break;
                }
            }
            wg_value = value;
            wg_flag = flag;
        }
        let flag = workgroupUniformLoad(&wg_flag);
        var value = wg_value;
        if (flag == 0u) {
            value = tile_reduce(t); // the fallback: nobody published; do that tile's work here
        }
        prefix = combine(value, prefix);
        workgroupBarrier(); // everyone has read wg_value before invocation 0 overwrites it
        if (flag == FLAG_INCLUSIVE || t == 0u) { break; }
        t -= 1u;
    }
    if (inv.li == 0u) { publish(tile, FLAG_INCLUSIVE, combine(prefix, aggregate)); }
    return prefix;
}
