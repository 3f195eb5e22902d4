// The look-back's walk without subgroups (see common/lookback.wgsl): invocation 0 walks tile by
// tile; the others wait at the barrier of workgroupUniformLoad.

// Same contract as in common/lookback_subgroup.wgsl.
fn look_back_walk(start: u32) -> vec3<u32> {
    if (inv.li == 0u) {
        var acc = IDENTITY;
        var next = start;
        var done = 0u;
        var idle = 0u;
        loop {
            if (SPIN_LIMIT == 0u) { break; }
            let sv = read_state(next - 1u);
            walk_rounds += 1u;
            if (sv.x == 0u) {
                walk_idle += 1u;
                idle += 1u;
                if (idle >= SPIN_LIMIT) { break; }
                continue;
            }
            idle = 0u;
            acc = combine(sv.y, acc);
            next -= 1u;
            if (sv.x == FLAG_INCLUSIVE || next == 0u) {
                done = 1u;
                break;
            }
        }
        walk_result = vec3<u32>(acc, next, done);
    }
    return workgroupUniformLoad(&walk_result);
}
