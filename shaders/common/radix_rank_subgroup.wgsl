// Stable in-tile ranking of radix digits from subgroup ballots (a multisplit; used by
// shaders/radix.wgsl). Each subgroup owns a run of consecutive keys of the tile; for each of its
// ITEMS rounds, eight ballots on the digit's bits give every lane the mask of lanes with the same
// digit, so its rank among them is a popcount, and the lowest such lane adds the group's size to
// the subgroup's counter for that digit. The counters (one row per subgroup, PACK digits a word:
// one 32-bit counter, or two 16-bit ones where workgroup memory is short) are then scanned over
// the subgroups and over the digits. Any subgroup size works; the ballot is a vec4<u32>, cut to
// its first word where the device's subgroups never exceed 32 lanes. The ballots are most of the
// ranking's cost (H100: one ballot instead of eight, PROBE 32, takes 0.14 ms off each pass at
// 2^26; docs/BENCHMARKS.md). Twin without subgroups: common/radix_rank_shared.wgsl.
// With COUNT_FIRST (CUB's onesweep order) the counters are filled before the ballots instead:
// rank_count adds each key to its subgroup's counter, rank_offsets turns the rows into each
// subgroup's first place of each digit in the tile, and rank_item then returns a key's place in
// the tile (no rank_middle, no rank_end); the tile's counts are known before the ballots.
// Needs: WG, ITEMS, TILE, RADIX, MIN_SG, PACK (1|2), PROBE, SPARE (0|1) and SPARE_AT (a word a
// lane, past the sweep's early counts), scratch, digit_total, digit_start,
// wg_exclusive, lanes_below, popcount4 (common/wgscan_subgroup.wgsl).

// Tile-local index of this invocation's key of round j: subgroup-major, so a subgroup's keys are
// consecutive and round j of it reads sg_size consecutive keys.
fn local_index(j: u32) -> u32 {
    return (inv.sg_id * ITEMS + j) * inv.sg_size + inv.lane;
}

// A ballot as this device needs it: lines marked //@WIDE are kept where a subgroup may have more
// than 32 lanes (the whole vec4<u32>), lines marked //@NARROW where every subgroup has at most 32
// (its first word alone: a quarter of the mask work per key). shaders.rs keeps one set.
alias Mask = vec4<u32>; //@WIDE
alias Mask = u32; //@NARROW
fn ballot(p: bool) -> Mask { return subgroupBallot(p); } //@WIDE
fn ballot(p: bool) -> Mask { return subgroupBallot(p).x; } //@NARROW
fn popc(m: Mask) -> u32 { return popcount4(m); } //@WIDE
fn popc(m: Mask) -> u32 { return countOneBits(m); } //@NARROW
fn mask_below() -> Mask { return lanes_below(); } //@WIDE
fn mask_below() -> Mask { return lanes_below().x; } //@NARROW

// Branch-free: a loop with an early return would let lanes leave at different times, and the
// shuffle that follows needs them together.
fn lowest_lane(m: Mask) -> u32 {
    let tz = countTrailingZeros(m);
    return select(select(select(96u + tz.w, 64u + tz.z, m.z != 0u), 32u + tz.y, m.y != 0u), tz.x, m.x != 0u); //@WIDE
    return tz; //@NARROW
}

var<private> below_mask: Mask;

const ROW: u32 = RADIX / PACK;                        // counter words a subgroup
const FIELD: u32 = 32u / PACK;                        // bits a counter
const FIELD_MASK: u32 = 0xffffffffu >> (32u - FIELD);

// The word holding this subgroup's counter of digit d, and where in it the counter sits.
fn counter_word(d: u32) -> u32 {
    return inv.sg_id * ROW + d / PACK;
}

fn counter_shift(d: u32) -> u32 {
    return (d % PACK) * FIELD;
}

// The rank interface (shaders/radix.wgsl): rank_begin(); per key rank_item; rank_middle(); per key
// rank_end. A key's position in the tile sorted stably by digit is rank_item + rank_end.
// Uniform control flow throughout.
fn rank_begin() {
    let words = (WG / MIN_SG) * ROW;
    for (var w = inv.li; w < words; w += WG) { atomicStore(&scratch[w], 0u); }
    below_mask = mask_below();
    workgroupBarrier();
}

// Round j: this key's place among the keys of its digit in this subgroup's rounds so far.
fn rank_item(j: u32, d: u32) -> u32 {
    // The driver's register count is sensitive to this loop (two more branches in it cost a
    // third of the sweep's speed): check bench/kernel_stats.sh after touching it.
    var peers = ballot(true);
    // (PROBE 32, measuring only: one ballot instead of eight)
    for (var b = 0u; b < select(8u, 1u, (PROBE & 32u) != 0u); b++) {
        let one = ((d >> b) & 1u) != 0u;
        let m = ballot(one);
        peers &= select(~m, m, one);
    }
    let rank = popc(peers & below_mask);
    let shift = counter_shift(d);
    // every lane adds (the lowest of each group its group's size, the others 0) so no branch
    // separates the lanes before the shuffle: without maximal reconvergence a shuffle after a
    // divergent branch may run with lanes missing (seen as unsorted output on the H100). With
    // SPARE the others add to a spare word of their own, not to their digit's counter: lanes
    // adding to one word queue on it, which slows keys with few distinct digits (floats'
    // exponents, small ranges). The host sets it where the sweep's registers allow (radix_wgsl).
    let add = select(0u, popc(peers) << shift, rank == 0u);
    let at = select(counter_word(d), SPARE_AT + inv.lane, SPARE == 1u && rank != 0u);
    let start = atomicAdd(&scratch[at], add) >> shift;
    return (subgroupShuffle(start, lowest_lane(peers)) & FIELD_MASK) + rank;
}

// COUNT_FIRST: one key of digit d in this subgroup (lanes of one digit queue on its word: a
// subgroup's own row, as CUB's warp histograms).
fn rank_count(d: u32) {
    atomicAdd(&scratch[counter_word(d)], 1u << counter_shift(d));
}

// COUNT_FIRST: after every rank_count, each subgroup's counter of each digit becomes where its
// keys of that digit start in the tile; digit_total and digit_start are set.
fn rank_offsets() {
    rank_columns();
    if (inv.li < ROW) {
        var add = 0u;
        for (var h = 0u; h < PACK; h++) { add |= digit_start[PACK * inv.li + h] << (h * FIELD); }
        for (var s = 0u; s < inv.num_sg; s++) {
            let at = s * ROW + inv.li;
            atomicStore(&scratch[at], atomicLoad(&scratch[at]) + add);
        }
    }
    workgroupBarrier();
}

fn rank_middle() {
    rank_columns();
}

// Per counter word: exclusive over the subgroups' rows (packed counters at once: sums <= TILE),
// the totals into digit_total, then digit_start.
fn rank_columns() {
    workgroupBarrier();
    if (inv.li < ROW) {
        var run = 0u;
        if ((PROBE & 64u) != 0u) {
            run = atomicLoad(&scratch[inv.li]) * inv.num_sg; // measuring only: no column scan
        } else {
            for (var s = 0u; s < inv.num_sg; s++) {
                let at = s * ROW + inv.li;
                let c = atomicLoad(&scratch[at]);
                atomicStore(&scratch[at], run);
                run += c;
            }
        }
        for (var h = 0u; h < PACK; h++) {
            digit_total[PACK * inv.li + h] = (run >> (h * FIELD)) & FIELD_MASK;
        }
    }
    workgroupBarrier();
    if ((PROBE & 128u) != 0u) {
        if (inv.li < RADIX) { digit_start[inv.li] = inv.li * (TILE / RADIX); } // measuring only
    } else {
        set_digit_starts();
    }
    workgroupBarrier();
}

// Where this subgroup's keys of digit d start in the tile.
fn rank_end(j: u32, d: u32) -> u32 {
    let before = (atomicLoad(&scratch[counter_word(d)]) >> counter_shift(d)) & FIELD_MASK;
    return digit_start[d] + before;
}
