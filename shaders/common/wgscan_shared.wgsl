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

fn wg_count_exclusive(v: u32, bits: u32) -> vec2<u32> {
    return wg_exclusive(v);
}
