// Vectorised bitonic sort (METHODS.md, method 1), in the "all ascending" form of the network:
// the first step of stage k compares element i with its mirror i ^ (k - 1), later steps compare
// i with i ^ j. Every comparator puts the smaller record at the lower index, so positions past
// the end behave as +inf and never move: they are never stored and never allocated (method 2's
// padding habit avoided).
//
// A record is NW u32 planes compared lexicographically (e.g. [key hi, key lo, index]); each
// invocation holds vec4s of records and performs 4 compare-exchanges per vec4 pair with
// component-wise min/max (NW == 1) or select (NW > 1).
//
// Host-prepended constants: NW (planes, 1..4), WG (invocations per workgroup).
//
// Three kernel cases: `local_sort` (start of the sort up to the tile size), `global_steps_r` (r
// steps whose partners lie in another workgroup's tile, fused through registers) and
// `local_merge` (the rest of a stage after its global steps). The CPU twin is
// crates/gpusort-core/src/cpu/bitonic.rs.

const TILE_VECS: u32 = WG * 4u; // each invocation of the local kernels holds 4 vec4 = 16 keys

struct Params {
    n: u32,          // records
    plane_vecs: u32, // vec4s per plane: the stride between planes in `data`
    k: u32,          // stage: merged block size in records
    j: u32,          // distance of the first step of this dispatch, in records
    mirror: u32,     // 1 when the first step is the stage's mirrored step
    k_end: u32,      // the last stage: next power of two of n, or the segment size
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> data: array<vec4<u32>>;

var<workgroup> tile: array<vec4<u32>, TILE_VECS * NW>;

struct Rec { w: array<vec4<u32>, NW> }
struct Pair { lo: Rec, hi: Rec }

fn nvec() -> u32 {
    return (params.n + 3u) / 4u;
}

fn inf_rec() -> Rec {
    var r: Rec;
    for (var p = 0u; p < NW; p++) { r.w[p] = vec4<u32>(INF); }
    return r;
}

// Load vec4 `v` of every plane; components at or past n read as +inf.
fn load_global(v: u32) -> Rec {
    var r = inf_rec();
    if (v < nvec()) {
        let e = v * 4u;
        let valid = vec4<u32>(e, e + 1u, e + 2u, e + 3u) < vec4<u32>(params.n);
        for (var p = 0u; p < NW; p++) {
            r.w[p] = select(vec4<u32>(INF), data[p * params.plane_vecs + v], valid);
        }
    }
    return r;
}

// Store vec4 `v`; vec4s wholly past the end do not exist and are skipped. The tail of the last
// vec4 gets +inf, which is what those padding slots of our own buffer hold anyway.
fn store_global(v: u32, r: Rec) {
    if (v < nvec()) {
        for (var p = 0u; p < NW; p++) { data[p * params.plane_vecs + v] = r.w[p]; }
    }
}

fn load_tile(v: u32) -> Rec {
    var r: Rec;
    for (var p = 0u; p < NW; p++) { r.w[p] = tile[p * TILE_VECS + v]; }
    return r;
}

fn store_tile(v: u32, r: Rec) {
    for (var p = 0u; p < NW; p++) { tile[p * TILE_VECS + v] = r.w[p]; }
}

// a < b, lexicographically over the planes, per component.
fn less(a: Rec, b: Rec) -> vec4<bool> {
    var lt = a.w[0] < b.w[0];
    var eq = a.w[0] == b.w[0];
    for (var p = 1u; p < NW; p++) {
        lt = lt | (eq & (a.w[p] < b.w[p]));
        eq = eq & (a.w[p] == b.w[p]);
    }
    return lt;
}

// Four compare-exchanges at once: lo gets the smaller record of each component pair.
fn cx(a: Rec, b: Rec) -> Pair {
    var out: Pair;
    if (NW == 1u) {
        out.lo.w[0] = min(a.w[0], b.w[0]);
        out.hi.w[0] = max(a.w[0], b.w[0]);
        return out;
    }
    let swap = less(b, a);
    for (var p = 0u; p < NW; p++) {
        out.lo.w[p] = select(a.w[p], b.w[p], swap);
        out.hi.w[p] = select(b.w[p], a.w[p], swap);
    }
    return out;
}

fn rev(r: Rec) -> Rec {
    var o: Rec;
    for (var p = 0u; p < NW; p++) { o.w[p] = r.w[p].wzyx; }
    return o;
}

// ---- register level: 16 consecutive records (4 vec4) of one invocation, no synchronisation ----

fn transpose4(q: array<Rec, 4>) -> array<Rec, 4> {
    var t: array<Rec, 4>;
    for (var p = 0u; p < NW; p++) {
        t[0].w[p] = vec4<u32>(q[0].w[p].x, q[1].w[p].x, q[2].w[p].x, q[3].w[p].x);
        t[1].w[p] = vec4<u32>(q[0].w[p].y, q[1].w[p].y, q[2].w[p].y, q[3].w[p].y);
        t[2].w[p] = vec4<u32>(q[0].w[p].z, q[1].w[p].z, q[2].w[p].z, q[3].w[p].z);
        t[3].w[p] = vec4<u32>(q[0].w[p].w, q[1].w[p].w, q[2].w[p].w, q[3].w[p].w);
    }
    return t;
}

fn q_cx(q: array<Rec, 4>, a: u32, b: u32) -> array<Rec, 4> {
    var o = q;
    let pr = cx(q[a], q[b]);
    o[a] = pr.lo;
    o[b] = pr.hi;
    return o;
}

fn q_cx_mirror(q: array<Rec, 4>, a: u32, b: u32) -> array<Rec, 4> {
    var o = q;
    let pr = cx(q[a], rev(q[b]));
    o[a] = pr.lo;
    o[b] = rev(pr.hi);
    return o;
}

// Steps j = jmax .. 1 (jmax in 1, 2, 4, 8) on 16 consecutive records; the first is the stage's
// mirrored step when `mirror`. Distances 8 and 4 pair whole vec4s; distances 2 and 1 pair
// components, so the 4x4 block is transposed around them and they pair whole vec4s too.
fn reg_steps(q0: array<Rec, 4>, jmax: u32, mirror: bool) -> array<Rec, 4> {
    var q = q0;
    if (jmax == 8u) {
        if (mirror) { q = q_cx_mirror(q, 0u, 3u); q = q_cx_mirror(q, 1u, 2u); }
        else { q = q_cx(q, 0u, 2u); q = q_cx(q, 1u, 3u); }
    }
    if (jmax >= 4u) {
        if (mirror && jmax == 4u) { q = q_cx_mirror(q, 0u, 1u); q = q_cx_mirror(q, 2u, 3u); }
        else { q = q_cx(q, 0u, 1u); q = q_cx(q, 2u, 3u); }
    }
    q = transpose4(q);
    if (jmax >= 2u) {
        // transposed, the mirror of k = 4 pairs components c and 3 - c of one vec4
        if (mirror && jmax == 2u) { q = q_cx(q, 0u, 3u); q = q_cx(q, 1u, 2u); }
        else { q = q_cx(q, 0u, 2u); q = q_cx(q, 1u, 3u); }
    }
    q = q_cx(q, 0u, 1u); // j = 1, which is also the mirror of k = 2
    q = q_cx(q, 2u, 3u);
    return transpose4(q);
}

// ---- groups of 2^r vec4s: fused steps with distance >= 4 records, in workgroup or global memory ----

// Vec4 index of register m of group `gid`, for steps starting at distance 2^(lo + r - 1) vec4s.
// The group's bits [lo, lo + r) are m; for a mirrored first step the upper half of the group
// belongs to the partner base whose bits below lo are flipped, so mirror pairs stay in registers.
fn group_vec(gid: u32, lo: u32, r: u32, mirror: bool, m: u32) -> u32 {
    let low_mask = (1u << lo) - 1u;
    let b = ((gid >> lo) << (lo + r)) | (gid & low_mask);
    let base = select(b, b ^ low_mask, mirror && m >= (1u << (r - 1u)));
    return base | (m << lo);
}

fn group_steps(g0: array<Rec, 8>, r: u32, mirror: bool) -> array<Rec, 8> {
    var g = g0;
    let size = 1u << r;
    let half = size >> 1u;
    for (var m = 0u; m < half; m++) {
        if (mirror) {
            let pr = cx(g[m], rev(g[size - 1u - m]));
            g[m] = pr.lo;
            g[size - 1u - m] = rev(pr.hi);
        } else {
            let pr = cx(g[m], g[m + half]);
            g[m] = pr.lo;
            g[m + half] = pr.hi;
        }
    }
    for (var d = half >> 1u; d > 0u; d = d >> 1u) {
        for (var m = 0u; m < size; m++) {
            if ((m & d) == 0u) {
                let pr = cx(g[m], g[m | d]);
                g[m] = pr.lo;
                g[m | d] = pr.hi;
            }
        }
    }
    return g;
}

// r steps in workgroup memory starting at distance j records (j >= 16).
fn tile_steps(li: u32, j: u32, r: u32, mirror: bool) {
    let lo = firstTrailingBit(j / 4u) + 1u - r;
    let groups = TILE_VECS >> r;
    for (var gid = li; gid < groups; gid += WG) {
        var g: array<Rec, 8>;
        for (var m = 0u; m < (1u << r); m++) { g[m] = load_tile(group_vec(gid, lo, r, mirror, m)); }
        g = group_steps(g, r, mirror);
        for (var m = 0u; m < (1u << r); m++) { store_tile(group_vec(gid, lo, r, mirror, m), g[m]); }
    }
}

// Steps from distance j0 (a power of two, 16 <= j0 < TILE) down to 16 through workgroup memory,
// two per barrier where possible; the first is mirrored when `mirror`.
fn tile_run(li: u32, j0: u32, mirror0: bool) {
    var j = j0;
    var mirror = mirror0;
    while (j >= 16u) {
        workgroupBarrier();
        let r = select(1u, 2u, j >= 32u);
        tile_steps(li, j, r, mirror);
        j = j >> r;
        mirror = false;
    }
    workgroupBarrier();
}

fn load_own(li: u32) -> array<Rec, 4> {
    var q: array<Rec, 4>;
    for (var i = 0u; i < 4u; i++) { q[i] = load_tile(li * 4u + i); }
    return q;
}

fn store_own(li: u32, q: array<Rec, 4>) {
    for (var i = 0u; i < 4u; i++) { store_tile(li * 4u + i, q[i]); }
}

fn store_own_global(base: u32, li: u32, q: array<Rec, 4>) {
    for (var i = 0u; i < 4u; i++) { store_global(base + li * 4u + i, q[i]); }
}

// Case 1: sort each tile (or each segment, when k_end is smaller) from scratch.
@compute @workgroup_size(WG)
fn local_sort(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let base = linear_workgroup(wid, nwg) * TILE_VECS;
    if (base >= nvec()) { return; } // the whole workgroup leaves together
    var q: array<Rec, 4>;
    for (var i = 0u; i < 4u; i++) { q[i] = load_global(base + li * 4u + i); }
    let k_end = params.k_end;
    q = reg_steps(q, 1u, true);
    if (k_end >= 4u) { q = reg_steps(q, 2u, true); }
    if (k_end >= 8u) { q = reg_steps(q, 4u, true); }
    if (k_end >= 16u) { q = reg_steps(q, 8u, true); }
    let kmax = min(k_end, TILE_VECS * 4u);
    if (kmax <= 16u) {
        store_own_global(base, li, q);
        return;
    }
    store_own(li, q);
    for (var k = 32u; k <= kmax; k = k << 1u) {
        tile_run(li, k / 2u, true);
        q = reg_steps(load_own(li), 8u, false);
        if (k < kmax) { store_own(li, q); } else { store_own_global(base, li, q); }
    }
}

// Case 3: the steps of stage k below the tile size, after its global steps.
@compute @workgroup_size(WG)
fn local_merge(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let base = linear_workgroup(wid, nwg) * TILE_VECS;
    if (base >= nvec()) { return; }
    for (var i = 0u; i < 4u; i++) {
        let v = li + i * WG; // coalesced loads
        store_tile(v, load_global(base + v));
    }
    tile_run(li, TILE_VECS * 2u, false);
    store_own_global(base, li, reg_steps(load_own(li), 8u, false));
}

// Case 2: r steps whose partners lie in other tiles, each invocation holding a group of 2^r vec4s
// in registers; r is a literal in each entry point so the register loops unroll.
fn global_run(wid: vec3<u32>, nwg: vec3<u32>, li: u32, r: u32) {
    let gid = linear_workgroup(wid, nwg) * WG + li;
    let lo = firstTrailingBit(params.j / 4u) + 1u - r;
    let mirror = params.mirror != 0u;
    if (group_vec(gid, lo, r, false, 0u) >= nvec()) { return; }
    var g: array<Rec, 8>;
    for (var m = 0u; m < (1u << r); m++) { g[m] = load_global(group_vec(gid, lo, r, mirror, m)); }
    g = group_steps(g, r, mirror);
    for (var m = 0u; m < (1u << r); m++) { store_global(group_vec(gid, lo, r, mirror, m), g[m]); }
}

@compute @workgroup_size(WG)
fn global_steps_1(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) li: u32) {
    global_run(wid, nwg, li, 1u);
}

@compute @workgroup_size(WG)
fn global_steps_2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) li: u32) {
    global_run(wid, nwg, li, 2u);
}

@compute @workgroup_size(WG)
fn global_steps_3(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) li: u32) {
    global_run(wid, nwg, li, 3u);
}
