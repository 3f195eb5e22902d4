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
// Host-prepended constants: NW (planes, 1..4), WG (invocations per workgroup). The host also
// appends code generated for NW (crates/gpusort-core/src/bitonic_wgsl.rs): the record type `Rec`
// with load/store/compare helpers, and the straight-line register networks `reg_steps_*`,
// `tile_steps_r` and the `global_steps_r` entry points, so that no key ever sits in a
// dynamically indexed array (which drivers put in slow local memory).
//
// Three kernel cases: `local_sort` (start of the sort up to the tile size), `global_steps_r` (r
// steps whose partners lie in another workgroup's tile, fused through registers) and
// `local_merge` (the rest of a stage after its global steps).
// Not here: the method's remapped write-back and bank-conflict swap. Steps of distance <= 8 run
// in registers and the workgroup-memory steps go two per barrier, so the kernel already runs
// 6.8x faster than the plain sort on the H200 at 2^24; neither was measured to pay yet, so
// neither is kept (docs/ARCHITECTURE.md). The CPU twin is
// crates/gpusort-core/src/reference/bitonic.rs.

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

fn nvec() -> u32 {
    return (params.n + 3u) / 4u;
}

// Vec4 index of register m of group `gid`, for r fused steps starting at distance 2^(lo + r - 1)
// vec4s. The group's bits [lo, lo + r) are m; for a mirrored first step the upper half of the
// group belongs to the partner base whose bits below lo are flipped, so mirror pairs meet in
// registers. Each invocation's set is closed under every step of the run.
fn group_vec(gid: u32, lo: u32, r: u32, mirror: bool, m: u32) -> u32 {
    let low_mask = (1u << lo) - 1u;
    let b = ((gid >> lo) << (lo + r)) | (gid & low_mask);
    let base = select(b, b ^ low_mask, mirror && m >= (1u << (r - 1u)));
    return base | (m << lo);
}

// The host inserts the generated code at the next line, before its first use.
// @generated-networks

// Steps from distance j0 (a power of two, 16 <= j0 < tile) down to 16 through workgroup memory,
// two per barrier where possible; the first is mirrored when `mirror0`.
fn tile_run(li: u32, j0: u32, mirror0: bool) {
    var j = j0;
    var mirror = mirror0;
    while (j >= 16u) {
        workgroupBarrier();
        if (j >= 32u) {
            tile_steps_2(li, j, mirror);
            j = j >> 2u;
        } else {
            tile_steps_1(li, j, mirror);
            j = j >> 1u;
        }
        mirror = false;
    }
    workgroupBarrier();
}

// Each invocation's own 16 consecutive records of the tile.
fn load_own(li: u32) -> Quad {
    return Quad(load_tile(li * 4u), load_tile(li * 4u + 1u), load_tile(li * 4u + 2u), load_tile(li * 4u + 3u));
}

fn store_own(li: u32, q: Quad) {
    store_tile(li * 4u, q.q0);
    store_tile(li * 4u + 1u, q.q1);
    store_tile(li * 4u + 2u, q.q2);
    store_tile(li * 4u + 3u, q.q3);
}

fn store_own_global(base: u32, li: u32, q: Quad) {
    let v = base + li * 4u;
    store_global(v, q.q0);
    store_global(v + 1u, q.q1);
    store_global(v + 2u, q.q2);
    store_global(v + 3u, q.q3);
}

// Case 1: sort each tile (or each segment, when k_end is smaller) from scratch.
@compute @workgroup_size(WG)
fn local_sort(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let base = linear_workgroup(wid, nwg) * TILE_VECS;
    if (base >= nvec()) { return; } // the whole workgroup leaves together
    let v = base + li * 4u;
    var q = Quad(load_global(v), load_global(v + 1u), load_global(v + 2u), load_global(v + 3u));
    let k_end = params.k_end;
    q = reg_steps_1_mirror(q);
    if (k_end >= 4u) { q = reg_steps_2_mirror(q); }
    if (k_end >= 8u) { q = reg_steps_4_mirror(q); }
    if (k_end >= 16u) { q = reg_steps_8_mirror(q); }
    let kmax = min(k_end, TILE_VECS * 4u);
    if (kmax <= 16u) {
        store_own_global(base, li, q);
        return;
    }
    store_own(li, q);
    for (var k = 32u; k <= kmax; k = k << 1u) {
        tile_run(li, k / 2u, true);
        q = reg_steps_8(load_own(li));
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
    store_own_global(base, li, reg_steps_8(load_own(li)));
}

// Case 2 (`global_steps_r`: r steps whose partners lie in other tiles, each invocation holding a
// group of 2^r vec4s in registers) is generated.
