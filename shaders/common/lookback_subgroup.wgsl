// The look-back's walk on subgroups (see common/lookback.wgsl): subgroup 0 alone walks, so a
// round costs no workgroup barrier. Each round its lanes read the WINDOW nearest unaccounted
// tiles at once (lane j: tile next-1-j); two ballots find the nearest tile that published
// nothing (a gap) and the nearest inclusive value; the values up to whichever comes first are
// combined across the subgroup. With WAIT_NEAREST (a host constant) a round that found the
// nearest tile silent then waits on that tile alone (one address) before reading a window
// again: the scan at 2^28 on the H100 went from 59% to 67% of a copy with it, while compaction
// measured slower, so each family sets its own.

// The walk is on the critical path of every tile (its successors wait on its inclusive value),
// so a round is kept short: the first set lane without branches, and the subgroup's own
// reduction where the operator has one (WALK_OP: scanop.wgsl's code of `combine`; 1, the float
// sum, keeps the butterfly's order of additions).
fn first_lane(b: vec4<u32>) -> u32 {
    let tz = countTrailingZeros(b); // 32 for an empty word: 128 when no lane is set
    return select(select(select(96u + tz.w, 64u + tz.z, b.z != 0u), 32u + tz.y, b.y != 0u), tz.x, b.x != 0u);
}

// `combine` over the whole subgroup (lane 0's result is the one used).
fn sg_reduce(v: u32) -> u32 {
    switch WALK_OP {
        case 0u: { return subgroupAdd(v); }
        case 2u: { return subgroupMax(v); }
        case 3u: { return subgroupMin(v); }
        case 4u: { return bitcast<u32>(subgroupMax(bitcast<i32>(v))); }
        case 5u: { return bitcast<u32>(subgroupMin(bitcast<i32>(v))); }
        case 6u: { return subgroupAnd(v); }
        case 7u: { return subgroupOr(v); }
        case 8u: { return subgroupXor(v); }
        default: {
            var x = v;
            for (var d = 1u; d < inv.sg_size; d = d << 1u) {
                x = combine(x, subgroupShuffleXor(x, d));
            }
            return x;
        }
    }
}

// Walks back from tile `start` (exclusive): (the tiles walked, combined; where the walk stopped;
// 1 if it reached an inclusive value or tile 0, 0 if the nearest unaccounted tile published
// nothing for SPIN_LIMIT rounds). Uniform control flow.
fn look_back_walk(start: u32) -> vec3<u32> {
    if (inv.sg_id == 0u) {
        var acc = IDENTITY;
        var next = start;
        var done = 0u;
        var idle = 0u;
        loop {
            if (SPIN_LIMIT == 0u) { break; }
            let limit = min(min(WINDOW, inv.sg_size), next);
            var sv = vec2<u32>(0u, IDENTITY);
            if (inv.lane < limit) { sv = read_state(next - 1u - inv.lane); }
            let gap = min(first_lane(subgroupBallot(inv.lane < limit && sv.x == 0u)), limit);
            let incl = first_lane(subgroupBallot(inv.lane < limit && sv.x == FLAG_INCLUSIVE));
            let found = incl < gap;
            let taken = select(gap, incl + 1u, found);
            walk_rounds += 1u;
            if (taken == 0u) { walk_idle += 1u; }
            acc = combine(sg_reduce(select(IDENTITY, sv.y, inv.lane < taken)), acc);
            next -= taken;
            if (found || next == 0u) {
                done = 1u;
                break;
            }
            if (taken == 0u) {
                idle += 1u;
                if (idle >= SPIN_LIMIT) { break; }
                if (WAIT_NEAREST == 1u) {
                    // wait on the nearest tile alone (one address) before reading a window again
                    var published = false;
                    for (; idle < SPIN_LIMIT && !published; idle++) {
                        published = subgroupBroadcast(read_state(next - 1u).x, 0u) != 0u;
                        walk_idle += 1u;
                    }
                }
            } else {
                idle = 0u;
            }
        }
        if (inv.lane == 0u) { walk_result = vec3<u32>(acc, next, done); }
    }
    return workgroupUniformLoad(&walk_result);
}
