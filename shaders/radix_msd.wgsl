// The radix sort's keys-only MSD path (32-bit keys sorted on every bit): composed after
// radix.wgsl in the unstable module only (sort::radix_wgsl). An LSD sort needs every pass after
// its first to be stable, and stable ranking (ballots, rank tables, look-back) makes those passes
// cost 1.7x the unstable sweep. An MSD sort keeps no earlier order in any pass, and keys that tie on every
// bit are the same key, so here every pass is unstable: atomics give the slots, atomics reserve
// the runs, and no workgroup waits on another. Per sort, after count_digits and prepare (which
// count the top digit alone and lay out P_TILES):
//   sweep (unstable)  the top digit, keys -> keys_alt: 256 buckets (radix.wgsl's sweep)
//   msd_count         MSD_COUNT_TILES tiles of keys_alt (in top-digit order): their next digit's
//                     counts added to C_JOINT[top digit][digit]
//   msd_scan          a workgroup a top-digit bucket: where each of the 65,536 16-bit buckets
//                     starts (P_START16), and msd_local's tiles: runs of consecutive 16-bit
//                     buckets of at most TILE keys (P_MSD_TILES); a bucket of more than TILE
//                     keys raises a flag. Its last workgroup (a ticket) decides (msd_decide):
//                     with the flag raised (or prepare's: a top-digit bucket too large already)
//                     the path falls back: msd_sweep's dispatch counts every digit again and
//                     msd_plan_rest's plans the LSD passes afresh; they sort the input, still
//                     untouched in keys (a keys-only sort's result does not depend on the input
//                     order). Else msd_sweep and msd_local get their sizes
//   msd_sweep         a tile of one bucket by the next digit, keys_alt -> keys, its runs reserved
//                     by counting C_JOINT down; where the path fell back, count_keys of every
//                     digit instead (one dispatch for either: they exclude each other)
//   msd_local         a workgroup a listed tile of 16-bit buckets, in place: binned by the top
//                     bits of what differs in it, then ranked by comparisons inside each bin;
//                     a tile with a bin of more than MSD_GROUP_MAX keys that are not all equal
//                     (dense clusters) is left to msd_dense instead, its buckets listed (P_DENSE)
//   msd_plan_rest     msd_dense's size; where the path fell back, prepare's plan of the LSD passes
//                     instead (one dispatch for either)
//   msd_dense         a workgroup a listed 16-bit bucket: a counting sort on the low 16 bits in
//                     workgroup memory, whatever the duplicates
// Where the keys' range leaves leading bits free and the keys would crowd the absolute 16-bit
// buckets (prepare's choose_msd_range), every digit above is of the key's MSD value (radix.wgsl's
// msd_value_of: relative to the lowest key, shifted up), the top digit counted again first (a
// second count_digits dispatch, then msd_range_plan); keys are written back as they are.
// CPU twin: reference::radix::msd_sort. Host-prepended: MSD_BIN_BITS (msd_local's and msd_dense's bins
// are 1 << MSD_BIN_BITS) and MSD_GROUP_MAX (radix.rs).

const MSD_BINS: u32 = 1u << MSD_BIN_BITS;
// msd_local's tiles span at most this many 16-bit buckets, so that a bin a (bucket, third digit)
// pair fits its bins
const MSD_SPAN: u32 = MSD_BINS / RADIX;
// tile sizes and places in msd_local's words are kept in 16 bits
const_assert TILE < 65536u;

var<workgroup> msd_job: vec4<u32>;
// msd_local: the tile has a bin of more than MSD_GROUP_MAX keys; one of those holds unequal keys
var<workgroup> msd_big_bin: u32;
var<workgroup> msd_dense_tile: u32;
// msd_local's and msd_dense's bins, then a tile
var<workgroup> msd_words: array<atomic<u32>, MSD_BINS + TILE>;
// msd_scan: each 16-bit bucket's keys and first key, then the tiles (first bucket | span << 8,
// and keys)
var<workgroup> msd_counts: array<u32, RADIX>;
var<workgroup> msd_firsts: array<u32, RADIX>;
var<workgroup> msd_runs: array<vec2<u32>, RADIX>;
// msd_scan: the run of buckets that would start at each bucket (its end, its keys)
var<workgroup> msd_next: array<vec2<u32>, RADIX>;
// msd_scan: a 16-bit bucket of this top digit holds more than TILE keys
var<workgroup> msd_too_large: u32;
// C_TILE_COUNT: msd_scan's listed tiles (low bits, below 2^17), a ticket a workgroup above them
// (RADIX of them at most), and a flag: a 16-bit bucket is too large. One word, so that the last
// workgroup's ticket returns everything the others added (atomics on one word are ordered; on
// two they need not be).
const TILES_LISTED: u32 = 0x1ffffu;
const TILES_TICKET: u32 = 0x20000u;
const TILES_FLAG: u32 = 0x80000000u;

fn top_pass() -> u32 {
    return rp.passes - 1u;
}

// A (canonical) key's MSD value (radix.wgsl's msd_value_of): the MSD path's digits are its top
// 8 and 16 bits, msd_local and msd_dense sort on its low 16.
fn msd_of(k: vec2<u32>) -> u32 {
    return msd_value_of(sortable(k).x);
}

// Where top-digit bucket `b` starts, and its keys.
fn bucket_of_top(b: u32) -> vec2<u32> {
    let start = plan[P_STARTS + top_pass() * RADIX + b];
    var end = plan[P_N];
    if (b + 1u < RADIX) { end = plan[P_STARTS + top_pass() * RADIX + b + 1u]; }
    return vec2<u32>(start, end - start);
}

// MSD tile `w` into msd_job: (bucket, first key, keys, 1), or zeros past the last tile, or
// (0, 0, 0, 2) where there are no tiles: the path fell back (msd_decide). The bucket's tiles are
// P_TILES[b] .. P_TILES[b + 1] (empty buckets have none), so RADIX invocations find it in one
// round of loads: a binary search by one invocation took eight in a row, each before the tile's
// keys could load. Read msd_job after a barrier.
fn find_msd_tile(w: u32) {
    let total = plan[P_TILES + RADIX];
    if (inv.li == 0u && w >= total) { msd_job = vec4<u32>(0u, 0u, 0u, select(0u, 2u, total == 0u)); }
    if (inv.li < RADIX && w < total) {
        let tiles = vec2<u32>(plan[P_TILES + inv.li], plan[P_TILES + inv.li + 1u]);
        if (tiles.x <= w && w < tiles.y) {
            let bucket = bucket_of_top(inv.li);
            let first = bucket.x + (w - tiles.x) * TILE;
            msd_job = vec4<u32>(inv.li, first, min(TILE, bucket.x + bucket.y - first), 1u);
        }
    }
}

@compute @workgroup_size(WG)
fn msd_count(i: Invocation) {
    set_invocation(i);
    load_msd_range();
    // MSD_COUNT_TILES tiles' worth of keys_alt a workgroup, as count_digits reads: the keys are in
    // top-digit order, so a run of them spans few top digits. Two histograms of the next digit,
    // the run's first top digit's and the one after, take nearly every key; a key past those
    // (a run over short buckets) adds to C_JOINT directly. (A workgroup a tile of one bucket,
    // found in P_TILES, took 1.6 times count_digits' time a key on the H100.)
    for (var c = inv.li; c < 2u * RADIX; c += WG) { atomicStore(&scratch[c], 0u); }
    if (inv.li == 0u) { msd_job.x = plan[P_N]; }
    let n = workgroupUniformLoad(&msd_job).x; // its barrier: the histograms are zero
    let first = linear_workgroup(inv.wid, inv.nwg) * (MSD_COUNT_TILES * TILE);
    if (first >= n) { return; } // surplus workgroups of a 2-D grid
    let top = top_pass();
    let t0 = msd_of(load_key(first, true)) >> 24u;
    for (var c = 0u; c < MSD_COUNT_TILES; c++) {
        let e@J = first + (c * ITEMS + @Ju) * WG + inv.li; //@ITEM
        var k@J = vec2<u32>(0u); //@ITEM
        if (e@J < n) { k@J = load_key(e@J, true); } //@ITEM
        if (e@J < n) { let v = msd_of(k@J); let t = (v >> 24u) - t0; let x = (v >> 16u) & 0xffu; if (t < 2u) { atomicAdd(&scratch[t * RADIX + x], 1u); } else { atomicAdd(&ctl[C_JOINT + (t0 + t) * RADIX + x], 1u); } } //@ITEM
    }
    workgroupBarrier();
    for (var c = inv.li; c < 2u * RADIX; c += WG) {
        let v = atomicLoad(&scratch[c]);
        if (v != 0u) { atomicAdd(&ctl[C_JOINT + t0 * RADIX + c], v); }
    }
}

@compute @workgroup_size(WG)
fn msd_scan(i: Invocation) {
    set_invocation(i);
    let b = linear_workgroup(inv.wid, inv.nwg); // RADIX workgroups
    if (inv.li == 0u) { msd_too_large = 0u; } // behind wg_exclusive's barriers
    let digit = inv.li < RADIX;
    var c = 0u;
    if (digit) { c = atomicLoad(&ctl[C_JOINT + b * RADIX + inv.li]); }
    let s = wg_exclusive(c).x;
    // a top-digit bucket of one value is sorted already: none of it listed, however full
    let single = top_single(b, bucket_of_top(b).y, plan[P_N]);
    if (digit) {
        let start = bucket_of_top(b).x + s;
        plan[P_START16 + b * RADIX + inv.li] = start;
        msd_counts[inv.li] = c;
        msd_firsts[inv.li] = start;
        if (c > TILE && !single) { msd_too_large = 1u; }
    }
    workgroupBarrier();
    // msd_local's tiles: runs of consecutive buckets, each as long as TILE keys and MSD_SPAN
    // buckets allow (greedy); those of two keys or more are listed. Each invocation finds the
    // run that would start at its bucket (at most MSD_SPAN steps), then one follows them from
    // bucket 0: a step a tile, where walking the buckets took 256 steps of a longer chain.
    if (digit) {
        var e = inv.li + 1u;
        var total = c;
        loop {
            if (e >= RADIX || e - inv.li >= MSD_SPAN) { break; }
            let ce = msd_counts[e];
            if (total + ce > TILE) { break; }
            total += ce;
            e++;
        }
        msd_next[inv.li] = vec2<u32>(e, total);
    }
    workgroupBarrier();
    if (inv.li == 0u) {
        var listed = 0u;
        var first = 0u;
        loop {
            if (first >= RADIX) { break; }
            let run = msd_next[first];
            if (run.y >= 2u && !single) {
                msd_runs[listed] = vec2<u32>(first | ((run.x - first) << 8u), run.y);
                listed++;
            }
            first = run.x;
        }
        // one atomic a workgroup reserves their places in the list and takes its ticket (the
        // flag first: the same word, so the last ticket sees it)
        if (msd_too_large != 0u) { atomicOr(&ctl[C_TILE_COUNT], TILES_FLAG); }
        let before = atomicAdd(&ctl[C_TILE_COUNT], TILES_TICKET + listed);
        let last = (before & ~TILES_FLAG) / TILES_TICKET == RADIX - 1u;
        msd_job = vec4<u32>(listed, before & TILES_LISTED, select(0u, 1u, last), before + listed);
    }
    let job = workgroupUniformLoad(&msd_job);
    if (job.z == 1u) { msd_decide(job.w); }
    for (var e = inv.li; e < job.x; e += WG) {
        let run = msd_runs[e];
        let at = P_MSD_TILES + 3u * (job.y + e);
        plan[at] = msd_firsts[run.x & 0xffu];
        plan[at + 1u] = run.y;
        plan[at + 2u] = (b * RADIX + (run.x & 0xffu)) | ((run.x >> 8u) << 16u);
    }
}

// Workgroups for a kernel looping over `listed` jobs: MSD_LOCAL_GROUPS (0: one a job), but
// enough that none takes more than GROUP_TILES (llvmpipe's loop budget: scan::group_tiles).
fn looping_groups(listed: u32) -> u32 {
    if (MSD_LOCAL_GROUPS == 0u || listed == 0u) { return listed; }
    return min(listed, max(MSD_LOCAL_GROUPS, (listed - 1u) / GROUP_TILES + 1u));
}

// msd_scan's last workgroup, once every other has added its tiles (`tiles`: C_TILE_COUNT after
// them): the MSD path goes on, or (a 16-bit bucket too large, or prepare's flag) falls back.
// Here rather than a dispatch of its own: one launch and barrier fewer.
fn msd_decide(tiles: u32) {
    var flag = atomicLoad(&ctl[C_MSD_FLAG]); // prepare's, a dispatch before
    if (flag == 0u && (tiles & TILES_FLAG) != 0u) {
        flag = 1u;
        if (inv.li == 0u) { atomicStore(&ctl[C_MSD_FLAG], 1u); }
    }
    if (flag != 0u) {
        // the fall back: msd_sweep's dispatch counts every digit from zero again (no tiles
        // listed tells it) and msd_plan_rest's plans the LSD passes afresh; they sort the input,
        // still untouched in keys, on its own digits (MSD values as the keys are). msd_local's
        // and msd_dense's dispatches stay empty.
        for (var w = inv.li; w < C_HIST + MAX_PASSES * RADIX; w += WG) { atomicStore(&ctl[w], 0u); }
        if (inv.li == 0u) {
            plan[P_MSD_LO] = 0u;
            plan[P_MSD_SHIFT] = 0u;
            plan[P_TILES + RADIX] = 0u;
            write_args(3u * (MSD_ARGS + 2u), plan[P_RECOUNT]);
        }
    } else if (inv.li == 0u) {
        write_args(3u * (MSD_ARGS + 2u), plan[P_TILES + RADIX]);
        write_args(3u * (MSD_ARGS + 3u), looping_groups(tiles & TILES_LISTED));
    }
}

// msd_range_plan: C_MSD_RANGE, read once for the workgroup
var<workgroup> range_chosen: u32;

// After the top digit's count relative to the keys' range (prepare chose it: choose_msd_range),
// the MSD path's plan from those counts, as prepare plans it from the keys' own; otherwise
// nothing (prepare planned).
@compute @workgroup_size(WG)
fn msd_range_plan(i: Invocation) {
    set_invocation(i);
    if (inv.li == 0u) { range_chosen = atomicLoad(&ctl[C_MSD_RANGE]); }
    if (workgroupUniformLoad(&range_chosen) != 1u) { return; }
    plan_passes(true);
}

// msd_plan_rest: C_MSD_FLAG, read once for the workgroup
var<workgroup> fell_back: u32;

// After msd_local: msd_dense's size, from the buckets msd_local left; where the path fell back
// (msd_local empty), the LSD passes' plan from the digits counted again in msd_sweep's dispatch
// (prepare's work). One dispatch for the two, as an empty dispatch costs about 3 µs on the H100.
@compute @workgroup_size(WG)
fn msd_plan_rest(i: Invocation) {
    set_invocation(i);
    if (inv.li == 0u) { fell_back = atomicLoad(&ctl[C_MSD_FLAG]); }
    if (workgroupUniformLoad(&fell_back) != 0u) {
        plan_passes(false);
    } else if (inv.li == 0u) {
        write_args(3u * (MSD_ARGS + 4u), looping_groups(atomicLoad(&ctl[C_DENSE_COUNT])));
    }
}

@compute @workgroup_size(WG)
fn msd_sweep(i: Invocation) {
    set_invocation(i);
    load_msd_range();
    let d = inv.li;
    if (d < RADIX) { atomicStore(&scratch[d], 0u); }
    let w = linear_workgroup(inv.wid, inv.nwg);
    find_msd_tile(w);
    let jb = workgroupUniformLoad(&msd_job);
    if (jb.w == 2u) {
        // the fall back (msd_decide sized this dispatch for it)
        count_keys(w, inv.nwg.x * inv.nwg.y, inv.li, true);
        return;
    }
    if (jb.w == 0u) { return; }
    let b = jb.x;
    let base = jb.y;
    let in_tile = jb.z;
    let p = top_pass() - 1u;
    let l@J = local_index(@Ju); //@ITEM
    var k@J = vec2<u32>(0u); //@ITEM
    if (l@J < in_tile) { k@J = load_key(base + l@J, true); } //@ITEM
    var d@J = 0u; //@ITEM
    if (l@J < in_tile) { d@J = (msd_of(k@J) >> 16u) & 0xffu; } //@ITEM
    // as the unstable sweep: the histogram's atomic gives each key its slot among its digit's
    var p@J = 0u; //@ITEM
    if (l@J < in_tile) { p@J = atomicAdd(&scratch[d@J], 1u); } //@ITEM
    workgroupBarrier();
    if (d < RADIX) { digit_total[d] = atomicLoad(&scratch[d]); }
    workgroupBarrier();
    set_digit_starts();
    workgroupBarrier();
    if (l@J < in_tile) { atomicStore(&scratch[p@J + digit_start[d@J]], k@J.x); } //@ITEM
    if (d < RADIX) {
        // the run's place among this (bucket, digit)'s keys: one atomic, counted down
        let mine = digit_total[d];
        var before = 0u;
        if (mine != 0u) { before = atomicSub(&ctl[C_JOINT + b * RADIX + d], mine) - mine; }
        dst_base[d] = plan[P_START16 + b * RADIX + d] + before - digit_start[d];
    }
    workgroupBarrier();
    // out in runs, in tile order
    let q@J = inv.li + @Ju * WG; //@ITEM
    if (q@J < in_tile) { let v = atomicLoad(&scratch[q@J]); set_key_word(dst_base[(msd_of(vec2<u32>(v, 0u)) >> 16u) & 0xffu] + q@J, false, v); } //@ITEM
}

// The low 16 bits of a (canonical) key's MSD value: all that differs within a 16-bit bucket.
fn low16(k: u32) -> u32 {
    return msd_of(vec2<u32>(k, 0u)) & 0xffffu;
}

// Where bin `c` lives in msd_local's words: runs of 8 bins rotated by (c >> 5) & 7, so that the
// scan below (invocation t reads bins 8t..8t+7, one a step) reads 32 banks at once instead of 8-way
// conflicts on 8 of them. The random-key atomics and clears do not mind the order.
fn bin_at(c: u32) -> u32 {
    return (c & ~7u) | (((c & 7u) + (c >> 5u)) & 7u);
}

// msd_local's bins: each word's high half, a count of keys, to the bin's first place (an
// exclusive scan; each invocation takes a run of consecutive bins). The low halves stay.
fn msd_bin_starts() {
    let per = (MSD_BINS + WG - 1u) / WG;
    let first = inv.li * per;
    var sum = 0u;
    for (var j = 0u; j < per; j++) {
        if (first + j < MSD_BINS) { sum += atomicLoad(&msd_words[bin_at(first + j)]) >> 16u; }
    }
    var acc = wg_exclusive(sum).x;
    for (var j = 0u; j < per; j++) {
        if (first + j < MSD_BINS) {
            let w = atomicLoad(&msd_words[bin_at(first + j)]);
            atomicStore(&msd_words[bin_at(first + j)], (w & 0xffffu) | (acc << 16u));
            acc += w >> 16u;
        }
    }
    workgroupBarrier();
}

// msd_local's bins: each word's count (low half) to (first place << 16) | count, an exclusive scan
// (each invocation takes a run of consecutive bins; sg_totals is written again only past the
// barriers of a round); a bin of more than MSD_GROUP_MAX keys is noted (msd_big_bin).
fn msd_group_starts() {
    let per = (MSD_BINS + WG - 1u) / WG;
    let first = inv.li * per;
    var sum = 0u;
    var most = 0u;
    for (var j = 0u; j < per; j++) {
        if (first + j < MSD_BINS) {
            let c = atomicLoad(&msd_words[bin_at(first + j)]);
            sum += c;
            most = max(most, c);
        }
    }
    if (most > MSD_GROUP_MAX) { msd_big_bin = 1u; }
    var acc = wg_exclusive_fanout(sum).x;
    for (var j = 0u; j < per; j++) {
        if (first + j < MSD_BINS) {
            let c = atomicLoad(&msd_words[bin_at(first + j)]);
            atomicStore(&msd_words[bin_at(first + j)], (acc << 16u) | c);
            acc += c;
        }
    }
    workgroupBarrier();
}

// Rounds of this workgroup of msd_local or msd_dense, which take jobs w, w + groups, ... of
// `listed`: a count known to the whole workgroup, so its barriers are met.
fn looping_rounds(listed: u32) -> u32 {
    let w = linear_workgroup(inv.wid, inv.nwg);
    if (w >= listed) { return 0u; }
    return (listed - w - 1u) / (inv.nwg.x * inv.nwg.y) + 1u;
}

// Listed tile `w` of msd_local: (first key, keys, first 16-bit bucket | span << 16).
fn msd_tile_job(w: u32) -> vec3<u32> {
    let at = P_MSD_TILES + 3u * w;
    return vec3<u32>(plan[at], plan[at + 1u], plan[at + 2u]);
}

// Key `k`'s MSD value in a tile that starts at 16-bit bucket `first16`: its bucket's place in the
// tile (below MSD_SPAN) above its low 16 bits. msd_local keeps these in workgroup memory and
// decodes them on the way out.
fn tile_value(k: u32, first16: u32) -> u32 {
    let e = msd_of(vec2<u32>(k, 0u));
    return (((e >> 16u) - first16) << 16u) | (e & 0xffffu);
}

// msd_local: the tile value at place l of the tile's words (which are in bin order) goes out to
// where it belongs among the tile's keys at `s`: its bin's first place, and the keys of its bin
// below it (equal keys by place). A key alone in its bin, or in a bin of equal keys, is in place
// already.
fn msd_place(l: u32, s: u32, first16: u32, shift: u32) {
    let v = atomicLoad(&msd_words[MSD_BINS + l]);
    var at = s + l;
    if ((PROBE & 512u) == 0u) {
        let bw = atomicLoad(&msd_words[bin_at(v >> shift)]);
        let g = bw & 0xffffu;
        // (a bin of more than MSD_GROUP_MAX keys here holds equal keys: in place)
        if (g > 1u && g <= MSD_GROUP_MAX) {
            let g0 = (bw >> 16u) - g;
            at = s + g0;
            for (var q = g0; q < g0 + g; q++) {
                let x = atomicLoad(&msd_words[MSD_BINS + q]);
                at += select(0u, 1u, x < v || (x == v && q < l));
            }
        }
    }
    let e = (((v >> 16u) + first16) << 16u) | (v & 0xffffu);
    set_key_word(at, false, key_decode(KIND, DESCENDING == 1u, msd_sortable_of(e), 0u).x);
}

// Listed tiles (msd_scan: runs of consecutive 16-bit buckets, at most TILE keys and MSD_SPAN
// buckets), each sorted in place: a tile's keys are what its buckets hold, so sorting the tile
// sorts each. A workgroup loops over tiles; the next tile's keys are loaded while this one's are
// ranked. For a tile of span buckets:
// - bin v >> shift of MSD_BINS (v: tile_value; shift: the least that leaves span << (16 - shift)
//   bins at most, so a random key's bin holds about TILE / MSD_BINS keys) counts its keys;
// - a scan gives each bin its first place, and the keys go to their bins' next places;
// - each place's key is ranked among its bin's keys by comparisons (equal keys by place): at most
//   MSD_GROUP_MAX of them (a fuller bin of equal keys is in place already, found by one more
//   pass where the tile has such a bin), and the workgroup's lanes at one bin read the same
//   words; it goes straight out (no trip back through workgroup memory, so no key is held
//   across a barrier: that took the kernel to 77 registers, one workgroup an SM on the H100).
// A tile with a bin of more than MSD_GROUP_MAX keys that are not all equal (keys clustered within
// 2^shift) is left as it is and its buckets listed for msd_dense, whose work is bounded whatever
// the keys.
@compute @workgroup_size(WG)
fn msd_local(i: Invocation) {
    set_invocation(i);
    load_msd_range();
    if (inv.li == 0u) {
        msd_job.x = atomicLoad(&ctl[C_TILE_COUNT]) & TILES_LISTED;
        msd_big_bin = 0u;
        msd_dense_tile = 0u;
    }
    for (var c = inv.li; c < MSD_BINS; c += WG) { atomicStore(&msd_words[c], 0u); }
    let rounds = looping_rounds(workgroupUniformLoad(&msd_job).x);
    let groups = inv.nwg.x * inv.nwg.y;
    let w = linear_workgroup(inv.wid, inv.nwg);
    var jb = vec3<u32>(0u);
    if (rounds != 0u) { jb = msd_tile_job(w); }
    let l@J = inv.li + @Ju * WG; //@ITEM
    var k@J = 0u; //@ITEM
    // (lines ending in //@PREFETCH: the default; //@NOPREFETCH, a measuring variant: no key held
    // across the ranking, each tile's keys loaded as its round starts, for fewer registers)
    if (l@J < jb.y) { k@J = key_word_at(jb.x + l@J, false); } //@ITEM//@PREFETCH
    for (var round = 1u; round <= rounds; round++) {
        let s = jb.x;
        let m = jb.y;
        if (l@J < m) { k@J = key_word_at(s + l@J, false); } //@ITEM//@NOPREFETCH
        let first16 = jb.z & 0xffffu;
        let span = jb.z >> 16u;
        let shift = 16u - MSD_BIN_BITS + (32u - countLeadingZeros(span - 1u));
        // the next tile's place, in flight meanwhile
        if (round < rounds) { jb = msd_tile_job(w + round * groups); } else { jb = vec3<u32>(0u); }
        if (l@J < m) { atomicAdd(&msd_words[bin_at(tile_value(k@J, first16) >> shift)], 1u); } //@ITEM
        workgroupBarrier();
        if ((PROBE & 2048u) == 0u) { msd_group_starts(); }
        let big = workgroupUniformLoad(&msd_big_bin) != 0u;
        // into the tile's words by bin: each key's atomic takes its bin's next place (the word's
        // high half counts from the bin's first place up to its end)
        if (l@J < m && (PROBE & 1024u) == 0u) { let v = tile_value(k@J, first16); let bw = atomicAdd(&msd_words[bin_at(v >> shift)], 0x10000u); atomicStore(&msd_words[MSD_BINS + (bw >> 16u)], v); } //@ITEM
        var dense = false;
        if (big) {
            // a bin of more than MSD_GROUP_MAX keys that are all equal (duplicates) is in order
            // already; one with unequal keys makes the tile dense
            workgroupBarrier();
            for (var l = inv.li; l < m; l += WG) {
                let v = atomicLoad(&msd_words[MSD_BINS + l]);
                let bw = atomicLoad(&msd_words[bin_at(v >> shift)]);
                let g = bw & 0xffffu;
                if (g > MSD_GROUP_MAX && atomicLoad(&msd_words[MSD_BINS + (bw >> 16u) - g]) != v) {
                    msd_dense_tile = 1u;
                }
            }
            dense = workgroupUniformLoad(&msd_dense_tile) != 0u;
        }
        if (dense && inv.li < span) {
            // left for msd_dense: this tile's buckets of two keys or more
            let p = first16 + inv.li;
            let start = plan[P_START16 + p];
            var end = plan[P_N];
            if (p + 1u < RADIX * RADIX) { end = plan[P_START16 + p + 1u]; }
            if (end - start >= 2u) {
                let at = atomicAdd(&ctl[C_DENSE_COUNT], 1u);
                plan[P_DENSE + 2u * at] = start;
                plan[P_DENSE + 2u * at + 1u] = end - start;
            }
        }
        workgroupBarrier();
        // the next tile's keys, in flight while this one's are ranked
        if (l@J < jb.y) { k@J = key_word_at(jb.x + l@J, false); } //@ITEM//@PREFETCH
        if (!dense && (PROBE & 1024u) == 0u) {
            // place l's key: its bin's first place and the keys of its bin below it (equal keys
            // by place). Bin order is nearly the sorted order, so a subgroup's writes stay close.
            // A loop, not a copy a key: nothing is held from one key to the next.
            // The words hold tile values, compared as they are; a key alone in its bin is in place.
            for (var l = inv.li; l < m; l += WG) { msd_place(l, s, first16, shift); }
        }
        workgroupBarrier();
        // bins free for the next tile
        for (var c = inv.li; c < MSD_BINS; c += WG) { atomicStore(&msd_words[c], 0u); }
        if (inv.li == 0u) {
            msd_big_bin = 0u;
            msd_dense_tile = 0u;
        }
        workgroupBarrier();
    }
}

// The listed 16-bit bucket `w` of msd_dense: (first key, keys).
fn msd_dense_job(w: u32) -> vec2<u32> {
    return vec2<u32>(plan[P_DENSE + 2u * w], plan[P_DENSE + 2u * w + 1u]);
}

// The 16-bit buckets msd_local left (two keys or more, at most TILE), each sorted in place by its
// low 16 sortable bits u, which are all that differ in it. A workgroup loops over buckets; the
// next bucket's keys are loaded while this one's go out. For a bucket:
// - bin u >> 4 of 4,096 counts its keys (high half of its word) and records which of the 16 low
//   values u & 15 occur in it (low half);
// - a scan of the counts gives each bin's first place;
// - the distinct (bin, value) pairs of a bin are numbered from that place (a bin has at least as
//   many keys as pairs, so the numbers of different bins never meet), and each key counts its
//   pair: the atomic's return is its slot among equal keys, whose order cannot show;
// - a key's place is its bin's first place, the counts of the pairs of its bin below its own (at
//   most 15), and its slot.
// The work a key does is bounded whatever the duplicates, and there are no comparisons.
@compute @workgroup_size(WG)
fn msd_dense(i: Invocation) {
    set_invocation(i);
    load_msd_range();
    if (inv.li == 0u) { msd_job.x = atomicLoad(&ctl[C_DENSE_COUNT]); }
    for (var b = inv.li; b < MSD_BINS; b += WG) { atomicStore(&msd_words[b], 0u); }
    let rounds = looping_rounds(workgroupUniformLoad(&msd_job).x);
    let groups = inv.nwg.x * inv.nwg.y;
    let w = linear_workgroup(inv.wid, inv.nwg);
    var jb = vec2<u32>(0u);
    if (rounds != 0u) { jb = msd_dense_job(w); }
    let l@J = inv.li + @Ju * WG; //@ITEM
    var k@J = 0u; //@ITEM
    if (l@J < jb.y) { k@J = key_word_at(jb.x + l@J, false); } //@ITEM
    for (var round = 1u; round <= rounds; round++) {
        let s = jb.x;
        let m = jb.y;
        // the next bucket's place, in flight meanwhile
        if (round < rounds) { jb = msd_dense_job(w + round * groups); } else { jb = vec2<u32>(0u); }
        // pair counters, cleared for this bucket; the bins were cleared after the last one's use
        for (var c = inv.li; c < m; c += WG) { atomicStore(&msd_words[MSD_BINS + c], 0u); }
        // (u and the pair number are worked out again where needed: kept in registers through
        // the barriers they took the kernel to 76 registers, one workgroup an SM on the H100)
        if (l@J < m) { let u = low16(k@J); atomicAdd(&msd_words[bin_at(u >> 4u)], 0x10000u); atomicOr(&msd_words[bin_at(u >> 4u)], 1u << (u & 15u)); } //@ITEM
        workgroupBarrier();
        msd_bin_starts();
        var r@J = 0u; //@ITEM
        if (l@J < m) { let u = low16(k@J); let bw = atomicLoad(&msd_words[bin_at(u >> 4u)]); r@J = atomicAdd(&msd_words[MSD_BINS + (bw >> 16u) + countOneBits(bw & ((1u << (u & 15u)) - 1u))], 1u); } //@ITEM
        workgroupBarrier();
        if (l@J < m) { let u = low16(k@J); let bw = atomicLoad(&msd_words[bin_at(u >> 4u)]); let first = bw >> 16u; let pair = first + countOneBits(bw & ((1u << (u & 15u)) - 1u)); r@J += first; for (var p = first; p < pair; p++) { r@J += atomicLoad(&msd_words[MSD_BINS + p]); } } //@ITEM
        workgroupBarrier();
        // bins free for the next bucket; through the tile's words in sorted order
        for (var b = inv.li; b < MSD_BINS; b += WG) { atomicStore(&msd_words[b], 0u); }
        if (l@J < m) { atomicStore(&msd_words[MSD_BINS + r@J], k@J); } //@ITEM
        workgroupBarrier();
        // the next bucket's keys, loaded while this one's go out in order
        if (l@J < jb.y) { k@J = key_word_at(jb.x + l@J, false); } //@ITEM
        if (l@J < m) { set_key_word(s + l@J, false, atomicLoad(&msd_words[MSD_BINS + l@J])); } //@ITEM
        workgroupBarrier(); // the tile's words are read before the next bucket's pair counts
    }
}
