// Workgroup-wide scans built on subgroups (METHODS.md method 3): a scan inside each subgroup, then
// a scan of the subgroup totals. The subgroup size is a runtime value (4..128). Selected when the
// device has SUBGROUP and --no-subgroups is off; common/wgscan_shared.wgsl is the twin without.
// Needs: WG, combine(a, b), IDENTITY, COUNT_LADDER, from the including family.

struct Invocation {
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(subgroup_id) sg_id: u32,
    @builtin(num_subgroups) num_sg: u32,
}

var<private> inv: Invocation;
var<workgroup> sg_totals: array<u32, WG>;
var<workgroup> sg_totals4: array<vec4<u32>, WG>;

fn set_invocation(i: Invocation) {
    inv = i;
}

// Bits of the ballot for lanes strictly below this one, over all four words (lanes >= 32 too).
fn lanes_below() -> vec4<u32> {
    var m = vec4<u32>(0u);
    for (var w = 0u; w < 4u; w++) {
        let lo = w * 32u;
        if (inv.lane >= lo + 32u) {
            m[w] = 0xffffffffu;
        } else if (inv.lane > lo) {
            m[w] = (1u << (inv.lane - lo)) - 1u;
        }
    }
    return m;
}

// PSCAN: how many lower lanes of the subgroup have `p` set (inactive lanes count as 0).
fn pscan(p: bool) -> u32 {
    let b = subgroupBallot(p) & lanes_below();
    return countOneBits(b.x) + countOneBits(b.y) + countOneBits(b.z) + countOneBits(b.w);
}

// Exclusive subgroup sum of a `bits`-bit value from one-bit scans: sum_b PSCAN(bit b) << b.
fn pscan_bits(v: u32, bits: u32) -> u32 {
    var s = 0u;
    for (var b = 0u; b < bits; b++) {
        s += pscan(((v >> b) & 1u) != 0u) << b;
    }
    return s;
}

// Inclusive scan inside the subgroup with `combine` (shuffle-up ladder; any associative op).
fn sg_inclusive(v: u32) -> u32 {
    var x = v;
    for (var d = 1u; d < inv.sg_size; d = d << 1u) {
        let y = subgroupShuffleUp(x, d);
        if (inv.lane >= d) { x = combine(y, x); }
    }
    return x;
}

// (exclusive prefix of `v` in invocation order, workgroup total). Uniform control flow only.
fn wg_exclusive(v: u32) -> vec2<u32> {
    let incl = sg_inclusive(v);
    if (inv.lane == inv.sg_size - 1u) { sg_totals[inv.sg_id] = incl; }
    workgroupBarrier();
    if (inv.li == 0u) {
        var acc = IDENTITY;
        for (var s = 0u; s < inv.num_sg; s++) {
            let t = sg_totals[s];
            sg_totals[s] = acc;
            acc = combine(acc, t);
        }
        sg_totals[WG - 1u] = acc; // WG >= 2 * num_sg, so this slot is free
    }
    workgroupBarrier();
    let before = sg_totals[inv.sg_id];
    let total = sg_totals[WG - 1u];
    let excl = select(subgroupShuffleUp(incl, 1u), IDENTITY, inv.lane == 0u);
    workgroupBarrier(); // sg_totals is reused by the next call
    return vec2<u32>(combine(before, excl), total);
}

// Exclusive sum of small counts (at most `bits` bits each) across the workgroup, from one-bit
// scans inside each subgroup.
fn wg_count_exclusive(v: u32, bits: u32) -> vec2<u32> {
    if (COUNT_LADDER == 1u) { return wg_exclusive(v); } // the shuffle ladder instead, to measure
    let excl = pscan_bits(v, bits);
    if (inv.lane == inv.sg_size - 1u) { sg_totals[inv.sg_id] = excl + v; }
    workgroupBarrier();
    if (inv.li == 0u) {
        var acc = 0u;
        for (var s = 0u; s < inv.num_sg; s++) {
            let t = sg_totals[s];
            sg_totals[s] = acc;
            acc += t;
        }
        sg_totals[WG - 1u] = acc;
    }
    workgroupBarrier();
    let r = vec2<u32>(sg_totals[inv.sg_id] + excl, sg_totals[WG - 1u]);
    workgroupBarrier();
    return r;
}

fn combine4(a: vec4<u32>, b: vec4<u32>) -> vec4<u32> {
    return vec4<u32>(combine(a.x, b.x), combine(a.y, b.y), combine(a.z, b.z), combine(a.w, b.w));
}

// Four independent workgroup scans at once (one per component), with the barriers of one:
// (exclusive prefix of `v` in invocation order, workgroup total), per component.
fn wg_exclusive4(v: vec4<u32>) -> array<vec4<u32>, 2> {
    var x = v;
    for (var d = 1u; d < inv.sg_size; d = d << 1u) {
        let y = subgroupShuffleUp(x, d);
        if (inv.lane >= d) { x = combine4(y, x); }
    }
    if (inv.lane == inv.sg_size - 1u) { sg_totals4[inv.sg_id] = x; }
    workgroupBarrier();
    if (inv.li == 0u) {
        var acc = vec4<u32>(IDENTITY);
        for (var s = 0u; s < inv.num_sg; s++) {
            let t = sg_totals4[s];
            sg_totals4[s] = acc;
            acc = combine4(acc, t);
        }
        sg_totals4[WG - 1u] = acc;
    }
    workgroupBarrier();
    let before = sg_totals4[inv.sg_id];
    let total = sg_totals4[WG - 1u];
    let up = subgroupShuffleUp(x, 1u);
    let excl = select(up, vec4<u32>(IDENTITY), vec4<bool>(inv.lane == 0u));
    workgroupBarrier();
    return array<vec4<u32>, 2>(combine4(before, excl), total);
}
