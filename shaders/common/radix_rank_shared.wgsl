// Stable in-tile ranking of radix digits from workgroup memory alone: the twin of
// common/radix_rank_subgroup.wgsl for devices without subgroups and --no-subgroups. The tile's
// (index, digit) pairs are sorted by three stable multi-way splits of the digit (3 + 3 + 2 bits):
// each invocation counts its ITEMS consecutive entries per category (eight 16-bit counters in a
// vec4) and one workgroup scan of that vec4 places every entry; then each key's position is read
// back through the inverse permutation.
// Needs: WG, ITEMS, TILE, RADIX, scratch, digit_total, digit_start, wg_exclusive, wg_exclusive4.

var<workgroup> bins: array<atomic<u32>, RADIX>;

// Tile-local index of this invocation's key of round j: round-major, so loads are coalesced.
fn local_index(j: u32) -> u32 {
    return j * WG + inv.li;
}

// The rank interface (see common/radix_rank_subgroup.wgsl): here rank_item only records the key
// and rank_end reads its whole position.
fn rank_begin() {
    if (inv.li < RADIX) { atomicStore(&bins[inv.li], 0u); } // WG may exceed RADIX (radix.wgsl)
    workgroupBarrier();
}

fn rank_item(j: u32, d: u32) -> u32 {
    atomicAdd(&bins[d], 1u);
    atomicStore(&scratch[local_index(j)], (local_index(j) << 8u) | d);
    return 0u;
}

// COUNT_FIRST's steps exist only in the subgroup ranking (the host sets COUNT_FIRST 0 here).
fn rank_count(d: u32) {}
fn rank_offsets() {}

fn rank_middle() {
    workgroupBarrier();
    if (inv.li < RADIX) { digit_total[inv.li] = atomicLoad(&bins[inv.li]); }
    workgroupBarrier();
    set_digit_starts();
    for (var b = 0u; b < 8u; b += 3u) {
        workgroupBarrier();
        let mask = (1u << min(3u, 8u - b)) - 1u;
        var mine: array<u32, ITEMS>;
        var counts = vec4<u32>(0u);
        for (var j = 0u; j < ITEMS; j++) {
            mine[j] = atomicLoad(&scratch[inv.li * ITEMS + j]);
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
            atomicStore(&scratch[next[c]], mine[j]);
            next[c] += 1u;
        }
    }
    // invert: scratch[p] holds the index at sorted position p; make it scratch[index] = p
    workgroupBarrier();
    var at: array<u32, ITEMS>;
    for (var j = 0u; j < ITEMS; j++) { at[j] = atomicLoad(&scratch[local_index(j)]) >> 8u; }
    workgroupBarrier();
    for (var j = 0u; j < ITEMS; j++) { atomicStore(&scratch[at[j]], local_index(j)); }
    workgroupBarrier();
}

fn rank_end(j: u32, d: u32) -> u32 {
    return atomicLoad(&scratch[local_index(j)]);
}
