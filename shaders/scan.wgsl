// Device-wide scans of u32/i32/f32 in one pass (METHODS.md method 3). Each workgroup scans a
// tile of ROUNDS x WG vec4s: every invocation loads ROUNDS vec4s of its scan group's run (a
// subgroup, or the workgroup without subgroups; see group_* in common/wgscan_*.wgsl), scans
// inside each vec4, then one group scan per four rounds places them; a scan of the group totals
// (one barrier) places the groups; the tile publishes its aggregate and looks back for its
// prefix (common/lookback.wgsl). Loads and stores are coalesced and go straight between global
// memory and registers (the rounds are straight-line code written out by the host). With PERSIST
// (the default: fewer workgroups than tiles), a workgroup loops over tiles and loads its next
// tile before it looks back for the current one, so the look-back's wait is hidden behind loads.
// (One workgroup per tile reached 70% of a copy, 98% with the look-back off: the wait, not the
// walk, is what costs; BENCHMARKS.md.)
// CPU twin: crates/gpusort-core/src/reference/scan.rs.
// Host-prepended constants: WG, OP (operator code, see combine), IDENTITY, INCLUSIVE (0/1),
// SPIN_LIMIT, WINDOW, STATE_STRIDE and COUNTERS (look-back), ROUNDS, PERSIST (1: workgroups loop
// over tiles) and GROUP_TILES, NO_LOOKBACK (1: tiles ignore their predecessors, a wrong result for
// measuring the look-back's cost only).
// Host-composed before this file: common/grid.wgsl, common/scanop.wgsl, one of common/wgscan_{subgroup,shared}.wgsl,
// common/lookback.wgsl and its walk.

const TILE_VECS: u32 = WG * ROUNDS; // ROUNDS (host constant, a multiple of 4): vec4s per invocation

const NO_SLOT: u32 = 0xffffffffu;

// carry_in: where in `carry` the value everything before this array combines to is read (a
// streamed scan's earlier chunks; NO_SLOT: none); carry_out: where the last tile writes that
// value with this array included (NO_SLOT: nowhere). Different slots: every tile reads carry_in
// while the last one writes.
struct ScanParams { n: u32, carry_in: u32, carry_out: u32, _pad: u32 }

@group(0) @binding(0) var<uniform> sp: ScanParams;
@group(0) @binding(2) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> dst: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> carry: array<u32>;

fn combine(a: u32, b: u32) -> u32 { return scan_op(OP, a, b); }

fn load(v: u32) -> vec4<u32> {
    let e = v * 4u;
    let valid = vec4<u32>(e, e + 1u, e + 2u, e + 3u) < vec4<u32>(sp.n);
    var x = vec4<u32>(IDENTITY);
    if (e < sp.n) { x = src[v]; }
    return select(vec4<u32>(IDENTITY), x, valid);
}

fn vec_inclusive(x: vec4<u32>) -> vec4<u32> {
    let a = x.x;
    let b = combine(a, x.y);
    let c = combine(b, x.z);
    return vec4<u32>(a, b, c, combine(c, x.w));
}

// The first vec4 of this invocation's run in tile t; round k adds k * group_size().
fn first_vec(t: u32) -> u32 {
    return t * TILE_VECS + group_index() * group_size() * ROUNDS + group_lane();
}

// The fallback of the look-back: this workgroup reduces tile t from its input.
fn tile_reduce(t: u32) -> u32 {
    let v = first_vec(t);
    let g = group_size();
    var acc = IDENTITY;
    for (var k = 0u; k < ROUNDS; k++) {
        acc = combine(acc, vec_inclusive(load(v + k * g)).w);
    }
    return wg_exclusive(acc).y;
}

// Store vec4 v of the output: `p` combines everything before it, `x` its inclusive scan.
fn store(v: u32, p: u32, x: vec4<u32>) {
    if (v * 4u < sp.n) {
        if (INCLUSIVE == 1u) {
            dst[v] = vec4<u32>(combine(p, x.x), combine(p, x.y), combine(p, x.z), combine(p, x.w));
        } else {
            dst[v] = vec4<u32>(p, combine(p, x.x), combine(p, x.y), combine(p, x.z));
        }
    }
}

@compute @workgroup_size(WG)
fn scan(i: Invocation) {
    set_invocation(i);
    var tile = take_ticket();
    let tiles = max((sp.n + 4u * TILE_VECS - 1u) / (4u * TILE_VECS), 1u);
    if (tile >= tiles) {
        return; // a surplus workgroup of a grid split over x and y
    }
    let g = group_size();
    // Lines ending in //@ROUND are written out once per round by the host (@R: the round, @Q its
    // group of four, @C its place in the group), //@QUAD once per group of four rounds (@Q0..@Q3:
    // its rounds): named registers, where loops over private arrays stop unrolling and spill to
    // local memory on the H100 beyond four rounds.
    var v = first_vec(tile);
    var x@R = load(v + @Ru * g); //@ROUND
    // With PERSIST, a workgroup takes its next tile and starts loading it before it looks back
    // for this one, so its loads stay in flight while it waits on its predecessors. Lines
    // ending in //@PERSIST exist only then: without, no registers hold a next tile (more
    // workgroups share an SM).
    var taken = 1u; // tiles this workgroup has taken (next_tile)
    loop {
        let asked = ask_next_tile(taken); // read after this tile's local work
        count_tile_start();
        x@R = vec_inclusive(x@R); //@ROUND
        // s@Q: the group scan of the four rounds' totals (exclusive, total)
        let s@Q = group_exclusive4(vec4<u32>(x@Q0.w, x@Q1.w, x@Q2.w, x@Q3.w)); //@QUAD
        // before@R: everything of the group before this lane's vec4 of round @R
        var run = IDENTITY;
        let before@R = combine(run, s@Q[0][@C]); run = combine(run, s@Q[1][@C]); //@ROUND
        let gt = groups_exclusive(run); // (groups before, tile total)
        publish_aggregate(tile, gt.y);
        let next = next_tile(asked, tiles, &taken);
        let nv = first_vec(next); // past the end when done: loads nothing
        let y@R = load(nv + @Ru * g); //@ROUND//@PERSIST
        var p = IDENTITY;
        if (NO_LOOKBACK == 0u) { p = look_back(tile, gt.y); }
        var through = combine(p, gt.y); // everything up to this tile's end
        p = combine(p, gt.x);
        if (sp.carry_in != NO_SLOT) {
            let before_array = carry[sp.carry_in];
            p = combine(before_array, p);
            through = combine(before_array, through);
        }
        if (inv.li == 0u && tile + 1u == tiles && sp.carry_out != NO_SLOT) {
            carry[sp.carry_out] = through;
        }
        store(v + @Ru * g, combine(p, before@R), x@R); //@ROUND
        count_tile_end();
        if (next >= tiles) {
            break;
        }
        tile = next;
        v = nv;
        x@R = y@R; //@ROUND//@PERSIST
    }
}
