// The merged launch (METHODS.md method 5): one dispatch runs the blocks of many tasks. Each
// workgroup takes a ticket from an atomic counter when it starts and looks its work up in the
// mapping table by ticket (the table lists producers first), so it only ever waits on blocks that
// already started. A block of a task with dependencies first waits, on one invocation, for each
// producer task's mark: one atomic u32 per task packing the count of finished blocks with a
// DEFERRED bit. Waits are bounded (SPIN_LIMIT reads); a block whose wait runs out, or whose
// producer was deferred, does no work: it sets its own task's DEFERRED bit (so its dependants
// give up at once) and raises the launch's resume flag, which is the workgroup count (0 or 1)
// of the indirect "resume" dispatch the host records after the merged one. Every finished block
// also sets its bit in the launch's per-block completion bits. The resume dispatch is a single
// workgroup that walks the mapping table in order and runs every block whose bit is clear:
// producers come first in the table, so it never waits, and one workgroup needs no forward
// progress from any other. Where nothing was deferred (NVIDIA, in every measurement) it has no
// workgroups at all. Safe mode runs the same blocks with one plain dispatch per dependency
// level and no waits.
//
// The method's "last block waits for all its blocks' flags, then sets the task mark" became one
// atomicAdd per block on the task's mark: the same information with no waiting on the producer
// side; the per-block flags serve the resume walk.
//
// Memory ordering: WGSL atomics are relaxed, so data crosses workgroups through atomic loads and
// stores (which do not stop in a non-coherent cache), and a storageBarrier (device-scope
// acquire/release in naga's SPIR-V) separates a block's data writes from its mark and a waiting
// block's mark read from its data reads.
//
// Kernel families, per task `kind` (the CPU twins: sort = reference::bitonic / slice sort with the key
// order of reference::keys, scan = reference::scan):
//   0 sort_local   sort each CAP-word block ascending (the "all ascending" bitonic form of
//                  bitonic.wgsl), keys encoded to their sortable words on load
//   1 sort_global  up to three global steps of a stage (partners CAP or more apart), fused in
//                  registers over groups of 2^r elements, CAP elements a block
//   2 sort_merge   the steps of a stage below CAP inside one block
//   3 scan_reduce  a block's aggregate into the task's partials
//   4 scan_apply   a block's scan, after the aggregates of the blocks before it
//   5 split_count  a block's count of elements passing the test, into the task's partials
//   6 split_apply  a block's stable split into the task's destination: passing elements after
//                  those of the blocks before it, the rest (partition) after every passing one;
//                  block 0 stores the passing count
// A sort's last phase decodes the keys on store. Positions past a task's end behave as +inf.
//
// Host-prepended constants: CAP (words of workgroup memory per block, a power of two), WG,
// SPIN_LIMIT. Composed before this file:
// common/grid.wgsl, common/keyorder.wgsl, common/scanop.wgsl.

const MODE_MERGED: u32 = 0u;
const MODE_LEVEL: u32 = 1u;
const MODE_RESUME: u32 = 2u;

const KIND_SORT_LOCAL: u32 = 0u;
const KIND_SORT_GLOBAL: u32 = 1u;
const KIND_SORT_MERGE: u32 = 2u;
const KIND_SCAN_REDUCE: u32 = 3u;

const FLAG_MIRROR: u32 = 1u;      // sort_global: the stage's mirrored first step
const FLAG_ENCODE: u32 = 2u;      // sort: the first phase encodes keys on load
const FLAG_DECODE: u32 = 4u;      // sort: the last phase decodes keys on store
const FLAG_DESCENDING: u32 = 8u;
const FLAG_INCLUSIVE: u32 = 1u;   // scan_apply
const FLAG_KEEP_REST: u32 = 1u;   // split_apply: a partition (the rest follow), not a compaction
const FLAG_FAIL: u32 = 0x10000u;
const FLAG_STEPS_SHIFT: u32 = 4u; // sort_global: bits 4..5, fused steps (1 to 3)  // tests: the block defers in the merged launch, as if it failed

const DEFERRED: u32 = 0x80000000u;
const TASK_WORDS: u32 = 12u;
const PER_INVOCATION: u32 = CAP / WG;

struct Params {
    mode: u32,
    begin: u32,        // level mode: first slot
    end: u32,          // one past the last slot (of the level, or of the launch)
    deferred_at: u32,  // state word counting deferred blocks (for reports)
    tasks_at: u32,     // plan words: task descriptors, dependency lists, mapping table
    deps_at: u32,
    table_at: u32,
    ticket_at: u32,    // state words: ticket, task marks, per-block completion bits, partials
    marks_at: u32,
    done_at: u32,
    partials_at: u32,
    args_at: u32,      // args words: this launch's resume dispatch (x, 1, 1)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
}

struct Task {
    kind: u32,
    offset: u32,       // first data word
    n: u32,            // words
    blocks: u32,
    a: u32,            // sort_local: last stage; scan: operator code; split: test (0 below,
                       // 1 at least, 2 nonzero)
    b: u32,            // sort_global: step distance; scan: identity; split: pivot bits
    flags: u32,        // FLAG_*; bits 8..11: key kind (keyorder.wgsl)
    dep_begin: u32,
    dep_count: u32,
    partial: u32,      // scan: first of the task's `blocks` partials
    dst: u32,          // split: first destination word
    count_at: u32,     // split: the data word that receives the passing count
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> plan: array<u32>;
@group(0) @binding(2) var<storage, read_write> state: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> args: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> data: array<atomic<u32>>;

// One padding word per 32 (`pad`): an invocation's own PER_INVOCATION consecutive words then
// fall in distinct banks across a subgroup of 32.
var<workgroup> tile: array<u32, CAP + CAP / 32u>;
var<workgroup> sums: array<u32, WG>;
var<workgroup> ticket_wg: u32;
var<workgroup> go_wg: u32;

fn pad(i: u32) -> u32 { return i + (i >> 5u); }

fn task(t: u32) -> Task {
    let w = p.tasks_at + t * TASK_WORDS;
    return Task(plan[w], plan[w + 1u], plan[w + 2u], plan[w + 3u], plan[w + 4u], plan[w + 5u],
                plan[w + 6u], plan[w + 7u], plan[w + 8u], plan[w + 9u], plan[w + 10u],
                plan[w + 11u]);
}

// One invocation: 1 when every producer of `d` has finished, 0 when one was deferred or the
// bounded wait ran out.
fn producers_done(d: Task) -> u32 {
    for (var i = 0u; i < d.dep_count; i++) {
        let dep = plan[p.deps_at + d.dep_begin + i];
        let need = plan[p.tasks_at + dep * TASK_WORDS + 3u];
        var reads = 0u;
        loop {
            let mark = atomicLoad(&state[p.marks_at + dep]);
            if ((mark & DEFERRED) != 0u) { return 0u; }
            if (mark >= need) { break; }
            reads++;
            if (reads >= SPIN_LIMIT) { return 0u; }
        }
    }
    return 1u;
}

// One invocation: leave task `t`'s block to the resume dispatch.
fn defer_slot(t: u32) {
    atomicOr(&state[p.marks_at + t], DEFERRED);
    atomicAdd(&state[p.deferred_at], 1u);
    atomicStore(&args[p.args_at], 1u);
}

// Inclusive scan of one word per invocation over the workgroup; sums[WG - 1] is the total.
fn wg_inclusive(op: u32, li: u32, v: u32) -> u32 {
    workgroupBarrier();
    sums[li] = v;
    for (var o = 1u; o < WG; o = o << 1u) {
        workgroupBarrier();
        var x = sums[li];
        if (li >= o) { x = scan_op(op, sums[li - o], x); }
        workgroupBarrier();
        sums[li] = x;
    }
    workgroupBarrier();
    return sums[li];
}

fn key_kind(d: Task) -> u32 { return (d.flags >> 8u) & 15u; }

// Words [0, span) of the tile from block words [base, base + count), the rest +inf.
fn load_keys(d: Task, base: u32, count: u32, span: u32, li: u32) {
    let encode = (d.flags & FLAG_ENCODE) != 0u;
    let descending = (d.flags & FLAG_DESCENDING) != 0u;
    for (var i = li; i < span; i += WG) {
        var w = INF;
        if (i < count) {
            w = atomicLoad(&data[base + i]);
            if (encode) { w = key_encode(key_kind(d), descending, w, 0u).x; }
        }
        tile[pad(i)] = w;
    }
}

fn store_keys(d: Task, base: u32, count: u32, li: u32) {
    let decode = (d.flags & FLAG_DECODE) != 0u;
    let descending = (d.flags & FLAG_DESCENDING) != 0u;
    for (var i = li; i < count; i += WG) {
        var w = tile[pad(i)];
        if (decode) { w = key_decode(key_kind(d), descending, w, 0u).x; }
        atomicStore(&data[base + i], w);
    }
}

// Pair q of a step at distance j: the lower index, and its partner (the mirror for a stage's
// first step, else i + j). The smaller word goes to the lower index.
fn pair(q: u32, j: u32, mirror: bool) -> vec2<u32> {
    let lj = firstTrailingBit(j);
    let i = ((q >> lj) << (lj + 1u)) | (q & (j - 1u));
    return vec2<u32>(i, select(i | j, i ^ (2u * j - 1u), mirror));
}

fn tile_step(span: u32, j: u32, mirror: bool, li: u32) {
    workgroupBarrier();
    for (var q = li; q < span / 2u; q += WG) {
        let ij = pair(q, j, mirror);
        let x = tile[pad(ij.x)];
        let y = tile[pad(ij.y)];
        if (x > y) { tile[pad(ij.x)] = y; tile[pad(ij.y)] = x; }
    }
}

fn block_count(d: Task, b: u32) -> u32 { return min(CAP, d.n - min(d.n, b * CAP)); }

// Stages up to PER_INVOCATION, and every step below it, run in registers on each invocation's
// own consecutive words (own_sort, own_merge: generated straight-line code, see
// schedule::own_networks); longer steps go through workgroup memory, one barrier each.
fn sort_local(d: Task, b: u32, li: u32) {
    let base = d.offset + b * CAP;
    let count = block_count(d, b);
    let span = d.a; // the last stage: the block, or the next power of two of a short task
    load_keys(d, base, count, span, li);
    workgroupBarrier();
    own_sort(li, span);
    for (var k = 2u * PER_INVOCATION; k <= span; k = k << 1u) {
        for (var j = k >> 1u; j >= PER_INVOCATION; j = j >> 1u) { tile_step(span, j, j == (k >> 1u), li); }
        workgroupBarrier();
        own_merge(li);
    }
    workgroupBarrier();
    store_keys(d, base, count, li);
}

fn sort_merge(d: Task, b: u32, li: u32) {
    let base = d.offset + b * CAP;
    let count = block_count(d, b);
    load_keys(d, base, count, CAP, li);
    for (var j = CAP >> 1u; j >= PER_INVOCATION; j = j >> 1u) { tile_step(CAP, j, false, li); }
    workgroupBarrier();
    own_merge(li);
    workgroupBarrier();
    store_keys(d, base, count, li);
}

// Element `m` of group `g` for `r` fused steps whose last distance is 2^lo: bits [lo, lo + r)
// of the index are m, g fills the others; for a mirrored first step the upper half of the group
// takes the partner base, whose bits below lo are flipped (bitonic.wgsl's group_vec), so every
// pair of every step meets inside one group.
fn group_index(g: u32, lo: u32, r: u32, mirror: bool, m: u32) -> u32 {
    let low_mask = (1u << lo) - 1u;
    let b = ((g >> lo) << (lo + r)) | (g & low_mask);
    let base = select(b, b ^ low_mask, mirror && m >= (1u << (r - 1u)));
    return base | (m << lo);
}

fn load_elem(d: Task, i: u32) -> u32 {
    if (i < d.n) { return atomicLoad(&data[d.offset + i]); }
    return INF; // past the end: +inf, never stored
}

fn store_elem(d: Task, i: u32, w: u32) {
    if (i < d.n) { atomicStore(&data[d.offset + i], w); }
}

// 1 to 3 global steps (distances d.b, d.b / 2, ...) fused: each invocation holds groups of
// 2^r elements in registers (global_group_r, generated: schedule::global_networks).
fn sort_global(d: Task, b: u32, li: u32) {
    let mirror = (d.flags & FLAG_MIRROR) != 0u;
    let r = (d.flags >> FLAG_STEPS_SHIFT) & 3u;
    let lo = firstTrailingBit(d.b) + 1u - r;
    let per_block = CAP >> r;
    for (var q = li; q < per_block; q += WG) {
        let g = b * per_block + q;
        switch r {
            case 1u: { global_group_1(d, g, lo, mirror); }
            case 2u: { global_group_2(d, g, lo, mirror); }
            default: { global_group_3(d, g, lo, mirror); }
        }
    }
}

fn scan_reduce(d: Task, b: u32, li: u32) {
    let base = d.offset + b * CAP;
    let count = block_count(d, b);
    var acc = d.b;
    for (var i = li; i < count; i += WG) { acc = scan_op(d.a, acc, atomicLoad(&data[base + i])); }
    let total = wg_inclusive(d.a, li, acc);
    if (li == WG - 1u) { atomicStore(&state[p.partials_at + d.partial + b], total); }
}

fn scan_apply(d: Task, b: u32, li: u32) {
    let op = d.a;
    let identity = d.b;
    // everything before this block: the aggregates of blocks 0..b
    var acc = identity;
    for (var i = li; i < b; i += WG) {
        acc = scan_op(op, acc, atomicLoad(&state[p.partials_at + d.partial + i]));
    }
    _ = wg_inclusive(op, li, acc);
    let carry = sums[WG - 1u];
    let base = d.offset + b * CAP;
    let count = block_count(d, b);
    for (var i = li; i < CAP; i += WG) { // coalesced
        var w = identity;
        if (i < count) { w = atomicLoad(&data[base + i]); }
        tile[pad(i)] = w;
    }
    workgroupBarrier();
    // each invocation scans its own PER_INVOCATION consecutive words
    let first = li * PER_INVOCATION;
    var run = identity;
    for (var k = 0u; k < PER_INVOCATION; k++) {
        run = scan_op(op, run, tile[pad(first + k)]);
        tile[pad(first + k)] = run;
    }
    _ = wg_inclusive(op, li, run);
    var before = carry;
    if (li > 0u) { before = scan_op(op, carry, sums[li - 1u]); }
    let keep_inclusive = (d.flags & FLAG_INCLUSIVE) != 0u;
    var prev = before;
    for (var k = 0u; k < PER_INVOCATION; k++) {
        let s = tile[pad(first + k)];
        let out = scan_op(op, before, s);
        tile[pad(first + k)] = select(prev, out, keep_inclusive);
        prev = out;
    }
    workgroupBarrier();
    for (var i = li; i < count; i += WG) { atomicStore(&data[base + i], tile[pad(i)]); }
}

// Whether word `w` passes the split's test (scan.rs Predicate; reference::scan::holds).
fn passes(d: Task, w: u32) -> bool {
    let kind = key_kind(d);
    if (d.a == 2u) {
        return select(w, w & 0x7fffffffu, kind == KIND_F32) != 0u;
    }
    let below = key_encode(kind, false, w, 0u).x < key_encode(kind, false, d.b, 0u).x;
    return below == (d.a == 0u);
}

fn split_count(d: Task, b: u32, li: u32) {
    let base = d.offset + b * CAP;
    let count = block_count(d, b);
    var c = 0u;
    for (var i = li; i < count; i += WG) { c += select(0u, 1u, passes(d, atomicLoad(&data[base + i]))); }
    let total = wg_inclusive(0u, li, c);
    if (li == WG - 1u) { atomicStore(&state[p.partials_at + d.partial + b], total); }
}

fn split_apply(d: Task, b: u32, li: u32) {
    let base = d.offset + b * CAP;
    let count = block_count(d, b);
    for (var i = li; i < CAP; i += WG) { // coalesced
        var w = 0u;
        if (i < count) { w = atomicLoad(&data[base + i]); }
        tile[pad(i)] = w;
    }
    // passing elements before this block, and in all blocks (single-block tasks count here)
    var before = 0u;
    var all = 0u;
    if (d.blocks > 1u) {
        for (var i = li; i < d.blocks; i += WG) {
            let c = atomicLoad(&state[p.partials_at + d.partial + i]);
            all += c;
            if (i < b) { before += c; }
        }
    }
    _ = wg_inclusive(0u, li, before);
    before = sums[WG - 1u];
    _ = wg_inclusive(0u, li, all);
    all = sums[WG - 1u];
    // each invocation's own PER_INVOCATION consecutive words
    let first = li * PER_INVOCATION;
    var mine = 0u;
    for (var k = 0u; k < PER_INVOCATION; k++) {
        let i = first + k;
        if (i < count && passes(d, tile[pad(i)])) { mine++; }
    }
    let inclusive = wg_inclusive(0u, li, mine);
    let block_total = sums[WG - 1u];
    if (d.blocks == 1u) { all = block_total; }
    var t = before + inclusive - mine; // passing elements before this invocation's first
    let keep_rest = (d.flags & FLAG_KEEP_REST) != 0u;
    for (var k = 0u; k < PER_INVOCATION; k++) {
        let i = first + k;
        if (i < count) {
            let w = tile[pad(i)];
            if (passes(d, w)) {
                atomicStore(&data[d.dst + t], w);
                t++;
            } else if (keep_rest) {
                // failing elements before it: all elements before it minus the passing ones
                atomicStore(&data[d.dst + all + (b * CAP + i) - t], w);
            }
        }
    }
    if (b == 0u && li == 0u) { atomicStore(&data[d.count_at], all); }
}

fn run_slot(slot: u32, merged: bool, li: u32) {
    let t = plan[p.table_at + 2u * slot];
    let b = plan[p.table_at + 2u * slot + 1u];
    let d = task(t);
    if (merged) {
        if (li == 0u) {
            go_wg = select(producers_done(d), 0u, (d.flags & FLAG_FAIL) != 0u);
        }
        if (workgroupUniformLoad(&go_wg) == 0u) {
            if (li == 0u) { defer_slot(t); }
            return;
        }
        storageBarrier(); // acquire: the producers' data after their marks
    }
    switch d.kind {
        case 0u: { sort_local(d, b, li); }
        case 1u: { sort_global(d, b, li); }
        case 2u: { sort_merge(d, b, li); }
        case 3u: { scan_reduce(d, b, li); }
        case 5u: { split_count(d, b, li); }
        case 6u: { split_apply(d, b, li); }
        default: { scan_apply(d, b, li); }
    }
    storageBarrier(); // release: every invocation's data before the mark
    if (li == 0u) {
        atomicOr(&state[p.done_at + slot / 32u], 1u << (slot % 32u));
        atomicAdd(&state[p.marks_at + t], 1u);
    }
}

@compute @workgroup_size(WG)
fn run(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) li: u32) {
    if (p.mode == MODE_MERGED) {
        if (li == 0u) { ticket_wg = atomicAdd(&state[p.ticket_at], 1u); }
        let slot = workgroupUniformLoad(&ticket_wg);
        if (slot >= p.end) { return; }
        run_slot(slot, true, li);
    } else if (p.mode == MODE_LEVEL) {
        let slot = p.begin + linear_workgroup(wid, nwg);
        if (slot >= p.end) { return; }
        run_slot(slot, false, li);
    } else {
        // MODE_RESUME, one workgroup: every block not yet done, in table order
        for (var w = 0u; w * 32u < p.end; w++) {
            if (li == 0u) { ticket_wg = ~atomicLoad(&state[p.done_at + w]); }
            var todo = workgroupUniformLoad(&ticket_wg);
            while (todo != 0u) {
                let slot = w * 32u + firstTrailingBit(todo);
                todo &= todo - 1u;
                if (slot < p.end) { run_slot(slot, false, li); }
            }
        }
    }
}
