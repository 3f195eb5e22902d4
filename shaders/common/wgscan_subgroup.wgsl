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
// One slot per subgroup (subgroups are at least 4 wide), then the workgroup total: sized for the
// subgroups, not the invocations, so that compaction's stage gets the room (about 5 KB at 256
// invocations).
const SG_SLOTS: u32 = WG / 4u;
var<workgroup> sg_totals: array<u32, SG_SLOTS + 1u>;
var<workgroup> sg_totals4: array<vec4<u32>, SG_SLOTS + 1u>;

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

// Set bits of a ballot, over all four words.
fn popcount4(m: vec4<u32>) -> u32 {
    let c = countOneBits(m);
    return c.x + c.y + c.z + c.w;
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
        sg_totals[SG_SLOTS] = acc; // num_sg <= SG_SLOTS, so this slot is free
    }
    workgroupBarrier();
    let before = sg_totals[inv.sg_id];
    let total = sg_totals[SG_SLOTS];
    let excl = select(subgroupShuffleUp(incl, 1u), IDENTITY, inv.lane == 0u);
    workgroupBarrier(); // sg_totals is reused by the next call
    return vec2<u32>(combine(before, excl), total);
}

// wg_exclusive with every invocation reading the subgroup totals (broadcast loads) instead of one
// invocation scanning them between two barriers: one barrier, no serial pass. The caller puts a
// barrier between this and the next write of sg_totals (another scan). Uniform control flow only.
fn wg_exclusive_fanout(v: u32) -> vec2<u32> {
    let incl = sg_inclusive(v);
    if (inv.lane == inv.sg_size - 1u) { sg_totals[inv.sg_id] = incl; }
    workgroupBarrier();
    var before = IDENTITY;
    var total = IDENTITY;
    for (var s = 0u; s < inv.num_sg; s++) {
        let t = sg_totals[s];
        if (s == inv.sg_id) { before = total; }
        total = combine(total, t);
    }
    let excl = select(subgroupShuffleUp(incl, 1u), IDENTITY, inv.lane == 0u);
    return vec2<u32>(combine(before, excl), total);
}

fn combine4(a: vec4<u32>, b: vec4<u32>) -> vec4<u32> {
    return vec4<u32>(combine(a.x, b.x), combine(a.y, b.y), combine(a.z, b.z), combine(a.w, b.w));
}

// Four independent workgroup scans at once (one per component), with the barriers of one:
// (exclusive prefix of `v` in invocation order, workgroup total), per component.
fn wg_exclusive4(v: vec4<u32>) -> array<vec4<u32>, 2> {
    let s = group_exclusive4(v); // within the subgroup
    if (inv.lane == 0u) { sg_totals4[inv.sg_id] = s[1]; }
    workgroupBarrier();
    if (inv.li == 0u) {
        var acc = vec4<u32>(IDENTITY);
        for (var g = 0u; g < inv.num_sg; g++) {
            let t = sg_totals4[g];
            sg_totals4[g] = acc;
            acc = combine4(acc, t);
        }
        sg_totals4[SG_SLOTS] = acc;
    }
    workgroupBarrier();
    let before = sg_totals4[inv.sg_id];
    let total = sg_totals4[SG_SLOTS];
    workgroupBarrier();
    return array<vec4<u32>, 2>(combine4(before, s[0]), total);
}

// Scan groups: the invocations that scan one run of consecutive vec4s together (scan.wgsl,
// compact.wgsl). Here a subgroup, so a group scan needs no barrier; in wgscan_shared.wgsl the
// whole workgroup. Group g of a tile owns its vec4s [g*G*R, (g+1)*G*R) for G invocations and R
// rounds; in round k, lane l holds vec4 g*G*R + k*G + l (coalesced loads and stores).
var<workgroup> group_totals: array<u32, SG_SLOTS>;

fn group_lane() -> u32 {
    return inv.lane;
}

fn group_size() -> u32 {
    return inv.sg_size;
}

fn group_index() -> u32 {
    return inv.sg_id;
}

// Four independent scans across the group, one per component: (exclusive prefix, group total).
fn group_exclusive4(v: vec4<u32>) -> array<vec4<u32>, 2> {
    var x = v;
    for (var d = 1u; d < inv.sg_size; d = d << 1u) {
        let y = subgroupShuffleUp(x, d);
        if (inv.lane >= d) { x = combine4(y, x); }
    }
    let up = subgroupShuffleUp(x, 1u);
    let excl = select(up, vec4<u32>(IDENTITY), vec4<bool>(inv.lane == 0u));
    return array<vec4<u32>, 2>(excl, subgroupShuffle(x, inv.sg_size - 1u));
}

// PSCAN over the bits of a count of at most `bits` bits: (sum over the lanes below, sum over
// the subgroup). Bit b of every lane's count is balloted once; the ballot masked to the lanes
// below, counted with countOneBits, gives that bit's prefix (METHODS.md's one-bit scan), the
// whole ballot its total; inactive lanes count as 0.
fn pscan_count(c: u32, bits: u32, below: vec4<u32>) -> vec2<u32> {
    var r = vec2<u32>(0u);
    for (var b = 0u; b < bits; b++) {
        let bal = subgroupBallot(((c >> b) & 1u) != 0u);
        let m = bal & below;
        r.x += popcount4(m) << b;
        r.y += popcount4(bal) << b;
    }
    return r;
}

// group_exclusive4 for sums of small counts (at most `bits` bits each), from one-bit scans, or
// (COUNT_LADDER, the default since it measured faster on the H100 at every size) the ladder.
// Scalar calls per component: a loop indexing the vec4 by its counter measured 10% slower.
fn group_count_exclusive4(c: vec4<u32>, bits: u32) -> array<vec4<u32>, 2> {
    if (COUNT_LADDER == 1u) { return group_exclusive4(c); } // the shuffle ladder (default)
    let below = lanes_below();
    let x = pscan_count(c.x, bits, below);
    let y = pscan_count(c.y, bits, below);
    let z = pscan_count(c.z, bits, below);
    let w = pscan_count(c.w, bits, below);
    return array<vec4<u32>, 2>(vec4<u32>(x.x, y.x, z.x, w.x), vec4<u32>(x.y, y.y, z.y, w.y));
}

// (everything in the groups before this one, the workgroup's total) from each group's total
// `t` (the same in every lane of a group). One barrier.
fn groups_exclusive(t: u32) -> vec2<u32> {
    if (inv.lane == 0u) { group_totals[inv.sg_id] = t; }
    workgroupBarrier();
    var before = IDENTITY;
    var total = IDENTITY;
    for (var s = 0u; s < inv.num_sg; s++) {
        let x = group_totals[s];
        if (s == inv.sg_id) { before = total; }
        total = combine(total, x);
    }
    return vec2<u32>(before, total);
}
