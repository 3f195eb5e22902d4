// Workgroup-wide scans from workgroup memory alone (no subgroups): the same interface and results
// as common/wgscan_subgroup.wgsl, for devices without SUBGROUP and for --no-subgroups.
// Needs: WG, combine(a, b), IDENTITY, from the including family.

struct Invocation {
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
}

var<private> inv: Invocation;
var<workgroup> scan_buf: array<u32, WG>;
var<workgroup> scan_buf4: array<vec4<u32>, WG>;

fn set_invocation(i: Invocation) {
    inv = i;
}

// (exclusive prefix of `v` in invocation order, workgroup total): Hillis-Steele in workgroup memory.
fn wg_exclusive(v: u32) -> vec2<u32> {
    scan_buf[inv.li] = v;
    for (var d = 1u; d < WG; d = d << 1u) {
        workgroupBarrier();
        var y = IDENTITY;
        if (inv.li >= d) { y = scan_buf[inv.li - d]; }
        workgroupBarrier();
        if (inv.li >= d) { scan_buf[inv.li] = combine(y, scan_buf[inv.li]); }
    }
    workgroupBarrier();
    let incl = scan_buf[inv.li];
    let total = scan_buf[WG - 1u];
    var excl = IDENTITY;
    if (inv.li > 0u) { excl = scan_buf[inv.li - 1u]; }
    workgroupBarrier();
    return vec2<u32>(excl, total);
}

// wgscan_subgroup.wgsl's cheaper scan for callers that keep the barrier rule there; here the same
// as wg_exclusive.
fn wg_exclusive_fanout(v: u32) -> vec2<u32> {
    return wg_exclusive(v);
}

fn combine4(a: vec4<u32>, b: vec4<u32>) -> vec4<u32> {
    return vec4<u32>(combine(a.x, b.x), combine(a.y, b.y), combine(a.z, b.z), combine(a.w, b.w));
}

// Four independent workgroup scans at once, one per component (see wgscan_subgroup.wgsl).
fn wg_exclusive4(v: vec4<u32>) -> array<vec4<u32>, 2> {
    scan_buf4[inv.li] = v;
    for (var d = 1u; d < WG; d = d << 1u) {
        workgroupBarrier();
        var y = vec4<u32>(IDENTITY);
        if (inv.li >= d) { y = scan_buf4[inv.li - d]; }
        workgroupBarrier();
        if (inv.li >= d) { scan_buf4[inv.li] = combine4(y, scan_buf4[inv.li]); }
    }
    workgroupBarrier();
    let total = scan_buf4[WG - 1u];
    var excl = vec4<u32>(IDENTITY);
    if (inv.li > 0u) { excl = scan_buf4[inv.li - 1u]; }
    workgroupBarrier();
    return array<vec4<u32>, 2>(excl, total);
}

// Scan groups (see wgscan_subgroup.wgsl): without subgroups a group is the whole workgroup.
fn group_lane() -> u32 {
    return inv.li;
}

fn group_size() -> u32 {
    return WG;
}

fn group_index() -> u32 {
    return 0u;
}

fn group_exclusive4(v: vec4<u32>) -> array<vec4<u32>, 2> {
    return wg_exclusive4(v);
}

fn group_count_exclusive4(c: vec4<u32>, bits: u32) -> array<vec4<u32>, 2> {
    return wg_exclusive4(c);
}

fn groups_exclusive(t: u32) -> vec2<u32> {
    return vec2<u32>(IDENTITY, t);
}
