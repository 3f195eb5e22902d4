// Single-pass chained scan across workgroups: decoupled look-back with a fallback (METHODS.md
// method 3, device-wide). WebGPU promises no forward progress between workgroups, so:
// - tiles are handed out by an atomic ticket taken when a workgroup starts (or, looping over
//   tiles, before it looks back for its current one), so a workgroup only ever waits on tiles
//   held by workgroups already running, whose own waits are on still earlier tiles (a
//   workgroup that loops, PERSIST, takes at most GROUP_TILES: 8 on CPU devices, where long runs
//   of one workgroup measured unreliable, see scan::group_tiles);
// - every wait is bounded (SPIN_LIMIT rounds without progress, a host-prepended constant); when
//   a predecessor has published nothing by then, the waiting workgroup reduces that tile's input
//   itself (0 takes the fallback at once: for tests).
// WGSL atomics are relaxed, so each published value travels inside the atomics with its flag:
// 16 bits of value and the flag in each of two words; a reader accepts the pair only when both
// flags agree (or, with ONE_WORD, value and flag in one word).
// The walk itself (look_back_walk) is in common/lookback_subgroup.wgsl (one subgroup reads
// WINDOW predecessors per round, no workgroup barriers) or common/lookback_shared.wgsl (one
// invocation, tile by tile).
// Needs from the family: combine (and WALK_OP, its scanop.wgsl code), IDENTITY, tile_reduce(t)
// (cooperative), WINDOW, ONE_WORD, PERSIST, GROUP_TILES, COUNTERS, STATE_STRIDE (words from one tile's status to the next: 2, or more to
// spread the polled words over cache lines), STATE_HEADER (words before tile 0's status: at
// least 8, and a stride's room, scan::state_header), and `state` at binding 1 (cleared to zero
// before the dispatch).

const FLAG_AGGREGATE: u32 = 1u;
const FLAG_INCLUSIVE: u32 = 2u;
// [0] ticket counter; with COUNTERS (measuring only): [1] walk rounds, [2] reads that found the
// nearest unaccounted tile silent, [3] fallbacks, summed over the tiles; [4] tiles in progress
// now, [5] the most in progress at once, [6] the number in progress as each tile started, summed

@group(0) @binding(1) var<storage, read_write> state: array<atomic<u32>>;

var<workgroup> wg_tile: u32;
// COUNTERS: this tile's walk rounds and silent rounds, counted by the walking invocations (li 0
// among them), added to the header once per tile
var<private> walk_rounds: u32;
var<private> walk_idle: u32;
var<workgroup> walk_result: vec3<u32>; // look_back_walk's answer, for the whole workgroup

// COUNTERS: a tile's work starts (after its ticket) / ends (its output written). Uniform control
// flow not needed.
fn count_tile_start() {
    if (COUNTERS == 1u && inv.li == 0u) {
        let now = atomicAdd(&state[4], 1u) + 1u;
        atomicMax(&state[5], now);
        atomicAdd(&state[6], now);
    }
}

fn count_tile_end() {
    if (COUNTERS == 1u && inv.li == 0u) { atomicSub(&state[4], 1u); }
}

// The tile this workgroup works on, in start order.
fn take_ticket() -> u32 {
    if (inv.li == 0u) { wg_tile = atomicAdd(&state[0], 1u); }
    return workgroupUniformLoad(&wg_tile);
}

// A workgroup that loops over tiles (PERSIST), having taken `taken` so far, asks for its next
// tile at the start of the current one (invocation 0; anything else gets no ticket): the
// atomic's round trip then runs beside the tile's own work instead of between its look-back and
// the next tile's loads. Whoever holds a ticket is running, so waiting on it stays safe.
fn ask_next_tile(taken: u32) -> u32 {
    var ticket = 0u;
    if (PERSIST == 1u && taken < GROUP_TILES && inv.li == 0u) { ticket = atomicAdd(&state[0], 1u); }
    return ticket;
}

// The next tile, from ask_next_tile's `asked` of this tile: `tiles` when the workgroup is done
// (no looping, GROUP_TILES taken, or the tickets are past the last tile). Call from uniform
// control flow.
fn next_tile(asked: u32, tiles: u32, taken: ptr<function, u32>) -> u32 {
    if (PERSIST == 0u || *taken >= GROUP_TILES) { return tiles; }
    *taken += 1u;
    if (inv.li == 0u) { wg_tile = asked; }
    return min(workgroupUniformLoad(&wg_tile), tiles);
}

// With ONE_WORD (a host constant, for families whose inclusive values stay below 2^31:
// compaction's counts) a status is one word, ((value << 1) | inclusive) + 1, 0 while unpublished:
// one load a predecessor instead of two, and one store to publish.
fn read_state(t: u32) -> vec2<u32> {
    let at = STATE_HEADER + STATE_STRIDE * t;
    let lo = atomicLoad(&state[at]);
    if (ONE_WORD == 1u) {
        if (lo == 0u) { return vec2<u32>(0u, 0u); }
        return vec2<u32>(((lo - 1u) & 1u) + FLAG_AGGREGATE, (lo - 1u) >> 1u);
    }
    let hi = atomicLoad(&state[at + 1u]);
    if ((lo >> 16u) != 0u && (lo >> 16u) == (hi >> 16u)) {
        return vec2<u32>(lo >> 16u, (lo & 0xffffu) | (hi << 16u));
    }
    return vec2<u32>(0u, 0u);
}

fn publish(tile: u32, flag: u32, v: u32) {
    let at = STATE_HEADER + STATE_STRIDE * tile;
    if (ONE_WORD == 1u) {
        atomicStore(&state[at], ((v << 1u) | (flag - FLAG_AGGREGATE)) + 1u);
    } else {
        atomicStore(&state[at], (v & 0xffffu) | (flag << 16u));
        atomicStore(&state[at + 1u], (v >> 16u) | (flag << 16u));
    }
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
    walk_rounds = 0u;
    walk_idle = 0u;
    var fallbacks = 0u;
    var prefix = IDENTITY;
    var next = tile; // tiles [next, tile) are accounted for
    loop {
        let w = look_back_walk(next);
        prefix = combine(w.x, prefix);
        next = w.y;
        if (w.z == 1u) { break; }
        // the fallback: the nearest tile published nothing within the bound; do its work here
        prefix = combine(tile_reduce(next - 1u), prefix);
        fallbacks += 1u;
        next -= 1u;
        if (next == 0u) { break; }
    }
    if (inv.li == 0u) {
        publish(tile, FLAG_INCLUSIVE, combine(prefix, aggregate));
        if (COUNTERS == 1u) {
            atomicAdd(&state[1], walk_rounds);
            atomicAdd(&state[2], walk_idle);
            atomicAdd(&state[3], fallbacks);
        }
    }
    return prefix;
}
