// The chained 64-bit scan's tiles scanned by subgroups (ScanTuning::scan64_subgroup_tiles, where
// the device's subgroups are in use): composed after shaders/scan64_chained.wgsl. The tile is the
// same 2,048 elements, but as scan.wgsl lays out its tiles: each subgroup owns a run of
// consecutive elements, and in each of four rounds a lane loads the next two elements after its
// left neighbour's, so every load and store of a round is one contiguous span; the rounds' pair
// totals are scanned across the lanes by a shuffle ladder, the subgroups' totals in workgroup
// memory (one barrier), and the tile's prefix comes from the same look-back (chained_prefix).

const SG_ROUNDS: u32 = CHAINED_PER / 2u;
var<workgroup> run_totals: array<T, WG / 4u>; // a subgroup's run total (subgroups of 4 or more)

// Inclusive scan across the subgroup's lanes (every lane calls it).
fn lanes_inclusive(v: T, lane: u32, size: u32) -> T {
    var x = v;
    for (var d = 1u; d < size; d = d << 1u) {
        let y = subgroupShuffleUp(x, d);
        if (lane >= d) { x = combine(y, x); }
    }
    return x;
}

@compute @workgroup_size(256)
fn scan_chained_sg(@builtin(local_invocation_index) lid: u32,
                   @builtin(subgroup_invocation_id) lane: u32,
                   @builtin(subgroup_size) size: u32,
                   @builtin(subgroup_id) group: u32,
                   @builtin(num_subgroups) groups: u32) {
    let tile = take_tile(lid);
    if (tile >= params.tiles) { return; }
    // round r's pair: elements first + 2 * (r * size + lane) and the one after
    let first = tile * CHAINED_TILE + group * size * CHAINED_PER + 2u * lane;
    var a: array<T, SG_ROUNDS>;
    var b: array<T, SG_ROUNDS>;
    for (var r = 0u; r < SG_ROUNDS; r++) {
        a[r] = load(first + 2u * r * size);
        b[r] = load(first + 2u * r * size + 1u);
    }
    // per round: the pairs before this lane's in the round, and the round's total
    var before: array<T, SG_ROUNDS>;
    var run = identity(); // the subgroup's rounds before round r
    for (var r = 0u; r < SG_ROUNDS; r++) {
        let incl = lanes_inclusive(combine(a[r], b[r]), lane, size);
        let excl = select(subgroupShuffleUp(incl, 1u), identity(), vec2<bool>(lane == 0u));
        before[r] = combine(run, excl);
        run = combine(run, subgroupShuffle(incl, size - 1u));
    }
    if (lane == 0u) { run_totals[group] = run; }
    workgroupBarrier();
    var groups_before = identity();
    var aggregate = identity();
    for (var g = 0u; g < groups; g++) {
        if (g == group) { groups_before = aggregate; }
        aggregate = combine(aggregate, run_totals[g]);
    }
    let p = chained_prefix(tile, aggregate, lid);
    let start = combine(p[1], combine(p[0], groups_before));
    for (var r = 0u; r < SG_ROUNDS; r++) {
        let x = put(first + 2u * r * size, combine(start, before[r]), a[r]);
        put(first + 2u * r * size + 1u, x, b[r]);
    }
}
