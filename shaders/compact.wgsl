// Stream compaction in one pass (METHODS.md method 3): keep the elements whose predicate equals
// KEEP, in order, with their u32 payload, and count them. The tile layout is scan.wgsl's: each
// invocation loads ROUNDS vec4s of its scan group's run (4 / W elements each) and tests them into
// bit masks; the kept counts are placed by group_count_exclusive4 where subgroups exist (the
// shuffle ladder by default, one-bit scans with COUNT_LADDER=0: the ladder measured 11-15%
// faster on the H100), and the group totals and the look-back (combine =
// add) place the tile. The kept elements are packed in workgroup memory at their places in the
// tile while the look-back runs, then written out by consecutive invocations: whole lines, not
// scattered words (scattered 4-byte writes measured 2-4x slower once the output leaves L2). The
// stage holds STAGE elements, by default as many as fit in half the device's workgroup storage,
// so two workgroups share an SM (scan::Tuning::compact_stage_size); a tile keeping more is
// written out in phases (repack).
// A stable partition is two of these: keep the matching elements, then the others starting at
// the first pass's count.
// CPU twin: crates/gpusort-core/src/reference/scan.rs.
// Host-prepended constants: WG, W (u32 words per element: 1 or 2), PAYLOAD (0/1), KIND (key
// type code), PRED (PRED_*), KEEP (1: keep where the predicate holds, 0: the others),
// IDENTITY (0), ROUNDS (vec4s per invocation, 2 to 16), STAGE, LATE_LOADS (0/1), PROBE
// (measuring only: bit 0 skips the packing, bit 1 the write-out), SPIN_LIMIT, WINDOW, PERSIST and
// NO_LOOKBACK (as in scan.wgsl; with NO_LOOKBACK a tile writes where a half-kept tile would).
// Host-composed before this file: common/grid.wgsl, common/keyorder.wgsl, one of
// common/wgscan_{subgroup,shared}.wgsl, common/lookback.wgsl and its walk.

const EPV: u32 = 4u / W; // elements per vec4
const TILE_VECS: u32 = WG * ROUNDS;
const TILE: u32 = TILE_VECS * EPV; // elements per tile
const NO_SLOT: u32 = 0xffffffffu;
const PRED_BELOW: u32 = 0u;
const PRED_AT_LEAST: u32 = 1u;
const PRED_NONZERO: u32 = 2u;

struct CompactParams {
    n: u32,
    pivot_hi: u32,  // the pivot, already in sortable encoding (keyorder.wgsl)
    pivot_lo: u32,
    base_slot: u32, // where in `counts` the output offset is read (NO_SLOT: 0)
    count_slot: u32 // where in `counts` the number kept is written
}

@group(0) @binding(0) var<uniform> cp: CompactParams;
@group(0) @binding(2) var<storage, read> src: array<vec4<u32>>; // rounded up to whole vec4s
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;
@group(0) @binding(4) var<storage, read_write> counts: array<u32>;
@group(0) @binding(5) var<storage, read> payload_in: array<u32>;
@group(0) @binding(6) var<storage, read_write> payload_out: array<u32>;

// Kept elements packed in output order: STAGE (a host constant, at most TILE) elements' words,
// then (PAYLOAD) their payload. A tile keeping more than STAGE is written out in several phases.
var<workgroup> stage: array<u32, STAGE * (W + PAYLOAD)>;

fn combine(a: u32, b: u32) -> u32 {
    return a + b;
}

// Whether element words (hi, lo) are kept. KIND and PRED are constants: this folds to a few
// instructions per element.
fn kept(hi: u32, lo: u32) -> bool {
    var p: bool;
    if (PRED == PRED_NONZERO) {
        // numeric zero: for floats both +0.0 and -0.0 (NaN counts as nonzero, as in NumPy)
        var h = hi;
        if (kind_float(KIND)) { h = hi & 0x7fffffffu; }
        p = h != 0u || lo != 0u;
    } else {
        let k = key_encode(KIND, false, hi, lo);
        let below = k.x < cp.pivot_hi || (k.x == cp.pivot_hi && k.y < cp.pivot_lo);
        p = select(!below, below, PRED == PRED_BELOW);
    }
    return p == (KEEP == 1u);
}

fn first_vec(t: u32) -> u32 {
    return t * TILE_VECS + group_index() * group_size() * ROUNDS + group_lane();
}

fn load(v: u32) -> vec4<u32> {
    if (v * 4u < cp.n * W) { return src[v]; }
    return vec4<u32>(0u);
}

// Which elements of vec4 v (words `a`) are kept: bit j for element j.
fn kept_mask(v: u32, a: vec4<u32>) -> u32 {
    let e = v * EPV;
    var m = 0u;
    if (W == 2u) {
        if (e < cp.n && kept(a.y, a.x)) { m |= 1u; }
        if (e + 1u < cp.n && kept(a.w, a.z)) { m |= 2u; }
    } else {
        if (e < cp.n && kept(a.x, 0u)) { m |= 1u; }
        if (e + 1u < cp.n && kept(a.y, 0u)) { m |= 2u; }
        if (e + 2u < cp.n && kept(a.z, 0u)) { m |= 4u; }
        if (e + 3u < cp.n && kept(a.w, 0u)) { m |= 8u; }
    }
    return m;
}

// The fallback of the look-back: this workgroup counts tile t's kept elements itself.
fn tile_reduce(t: u32) -> u32 {
    let v = first_vec(t);
    let g = group_size();
    var count = 0u;
    for (var k = 0u; k < ROUNDS; k++) {
        count += countOneBits(kept_mask(v + k * g, load(v + k * g)));
    }
    return wg_exclusive(count).y;
}

// Pack element j of vec4 v (words `a`) at tile position `at` of the stage.
fn pack(v: u32, a: vec4<u32>, j: u32, at: u32) {
    if (W == 2u) {
        stage[2u * at] = select(a.x, a.z, j == 1u);
        stage[2u * at + 1u] = select(a.y, a.w, j == 1u);
    } else {
        stage[at] = select(select(a.x, a.y, j == 1u), select(a.z, a.w, j == 3u), j >= 2u);
    }
    if (PAYLOAD == 1u) { stage[W * STAGE + at] = payload_in[v * EPV + j]; }
}

// Pack the kept elements of vec4 v (mask m), the first at tile position `at`, that fall in the
// phase starting at tile position `lo`. Predicated stores, one per element: on the H100 10% faster
// than a loop over the set bits (the lanes of a subgroup ran it as often as the busiest needed).
fn pack_kept(v: u32, a: vec4<u32>, m: u32, at: u32, lo: u32) {
    if ((PROBE & 1u) != 0u) { return; }
    for (var j = 0u; j < EPV; j++) {
        let p = at + countOneBits(m & ((1u << j) - 1u));
        if ((m & (1u << j)) != 0u && p >= lo && p - lo < STAGE) { pack(v, a, j, p - lo); }
    }
}

// Round k's vec4 v of a group's run and its kept mask in repack: nothing past ROUNDS (the last
// four rounds may be partial; what lies beyond is the next group's run, not loaded).
fn load_round(k: u32, v: u32) -> vec4<u32> {
    if (k < ROUNDS) { return load(v); }
    return vec4<u32>(0u);
}

fn round_mask(k: u32, v: u32, a: vec4<u32>) -> u32 {
    return select(0u, kept_mask(v, a), k < ROUNDS);
}

// Pack the next phase (tile positions from `lo` on) of the tile whose first vec4 for this
// invocation is v, its group's kept elements starting at tile position `base`: from the input
// again (mostly still in L2), so that the loaded vec4s need not stay in registers through the
// look-back for a tile that keeps more than STAGE elements. Four rounds at a time, their loads
// first: the main loop's straight-line form here (all eight rounds' loads at once) measured 5%
// slower for every compaction on the H100 (more registers live), round by round 12% slower for
// tiles that need it. Uniform control flow.
fn repack(v: u32, base: u32, lo: u32) {
    let g = group_size();
    var run = base;
    for (var q = 0u; q < ROUNDS; q += 4u) {
        let w = v + q * g;
        let r = array<vec4<u32>, 4>(load_round(q, w), load_round(q + 1u, w + g), load_round(q + 2u, w + 2u * g), load_round(q + 3u, w + 3u * g));
        let m = vec4<u32>(round_mask(q, w, r[0]), round_mask(q + 1u, w + g, r[1]), round_mask(q + 2u, w + 2u * g, r[2]), round_mask(q + 3u, w + 3u * g, r[3]));
        let s = group_count_exclusive4(countOneBits(m), 3u);
        pack_kept(w, r[0], m.x, run + s[0].x, lo);
        pack_kept(w + g, r[1], m.y, run + s[1].x + s[0].y, lo);
        pack_kept(w + 2u * g, r[2], m.z, run + s[1].x + s[1].y + s[0].z, lo);
        pack_kept(w + 3u * g, r[3], m.w, run + s[1].x + s[1].y + s[1].z + s[0].w, lo);
        run += s[1].x + s[1].y + s[1].z + s[1].w;
    }
}

// Where tile `tile` goes: everything before it (the look-back, which publishes its inclusive
// count; its barriers publish the stage), behind a barrier. Uniform control flow.
fn place_tile(tile: u32, aggregate: u32) -> u32 {
    var prefix = 0u;
    if (NO_LOOKBACK == 0u) {
        prefix = look_back(tile, aggregate);
    } else {
        // measuring only: about where half-kept tiles would write, without the look-back
        prefix = tile * (TILE / 2u);
    }
    workgroupBarrier();
    return prefix;
}

// Write out the stage: `count` kept elements at tile positions from `lo`, the tile's first at
// output index `prefix` (after the base slot's offset), by consecutive invocations.
fn write_phase(prefix: u32, lo: u32, count: u32) {
    var out = prefix + lo;
    if (cp.base_slot != NO_SLOT) { out += counts[cp.base_slot]; }
    if ((PROBE & 2u) == 0u) {
        for (var k = inv.li; k < count * W; k += WG) { dst[W * out + k] = stage[k]; }
    }
    if (PAYLOAD == 1u) {
        for (var k = inv.li; k < count; k += WG) { payload_out[out + k] = stage[W * STAGE + k]; }
    }
}

@compute @workgroup_size(WG)
fn compact(i: Invocation) {
    set_invocation(i);
    var tile = take_ticket();
    let tiles = max((cp.n + TILE - 1u) / TILE, 1u);
    if (tile >= tiles) { return; } // a surplus workgroup of a grid split over x and y
    let g = group_size();
    // Lines ending in //@ROUND are written out once per round by the host, //@QUAD once per four
    // rounds (as in scan.wgsl: named registers, not a private array).
    var v = first_vec(tile);
    var a@R = load(v + @Ru * g); //@ROUND
    // With PERSIST, a workgroup takes its next tile and starts loading it before it looks back
    // for and writes out this one, so its loads stay in flight meanwhile.
    var taken = 1u; // tiles this workgroup has taken (next_tile)
    loop {
        let asked = ask_next_tile(taken); // read after this tile's local work
        count_tile_start();
        let m@R = kept_mask(v + @Ru * g, a@R); //@ROUND
        let m@R = 0u; //@PAD
        // s@Q[0][c]: kept by the group's lanes before this one in round 4Q+c; s@Q[1][c]: its total
        let s@Q = group_count_exclusive4(vec4<u32>(countOneBits(m@Q0), countOneBits(m@Q1), countOneBits(m@Q2), countOneBits(m@Q3)), 3u); //@QUAD
        // at@R: where round @R's kept elements of this lane start among the group's
        var run = 0u;
        let at@R = run + s@Q[0][@C]; run += s@Q[1][@C]; //@ROUND
        // (kept by the groups before, kept in the tile); the barriers of these group scans also
        // keep this tile's packing behind the last tile's write-out of the stage
        let gt = groups_exclusive(run);
        publish_aggregate(tile, gt.y);
        // With LATE_LOADS the next tile's ticket (asked for as this tile started) is read, and
        // its loads issued, once this tile is packed (behind the ticket's barrier, which the
        // compiler does not move loads across), so the two tiles' vec4s are never live at once
        // (Tuning::compact_late_loads); without it, before the packing.
        if (LATE_LOADS == 1u) { pack_kept(v + @Ru * g, a@R, m@R, gt.x + at@R, 0u); } //@ROUND
        let next = next_tile(asked, tiles, &taken);
        let nv = first_vec(next); // past the end when done: loads nothing
        let b@R = load(nv + @Ru * g); //@ROUND
        if (LATE_LOADS == 0u) { pack_kept(v + @Ru * g, a@R, m@R, gt.x + at@R, 0u); } //@ROUND
        let prefix = place_tile(tile, gt.y);
        // the stage holds tile positions [lo, lo + STAGE); a uniform loop, one pass unless the
        // tile keeps more than STAGE
        var lo = 0u;
        loop {
            write_phase(prefix, lo, min(gt.y - lo, STAGE));
            lo += STAGE;
            if (lo >= gt.y) { break; }
            workgroupBarrier(); // the stage is read out
            repack(v, gt.x, lo);
            workgroupBarrier();
        }
        if (inv.li == 0u && tile + 1u == tiles) { counts[cp.count_slot] = prefix + gt.y; }
        count_tile_end();
        if (next >= tiles) { break; }
        tile = next;
        v = nv;
        a@R = b@R; //@ROUND
    }
}
