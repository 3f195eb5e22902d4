// LSD radix sort, one sweep per 8-bit digit (METHODS.md method 3: LSD radix sort as stable splits,
// with whole digits ranked at once). Works on the user's keys in place, with no encode or decode
// pass: the order-preserving transform (common/keyorder.wgsl) is applied as digits are read, and
// floats and 64-bit keys travel between passes encoded, by the first and last pass that run
// (ENCODED, below). Per sort:
//   count_digits  one read of the keys: the digit histograms of every pass at once
//   prepare       one workgroup: digit starts per pass, which passes can be skipped (one digit
//                 holds every key), ping-pong sides, indirect dispatch sizes
//   sweep         per pass (indirect; 0 workgroups when skipped): a tile of TILE keys is loaded,
//                 its digit counts are published (with EARLY before the ranking, else after it),
//                 it is ranked stably by digit inside the workgroup (common/radix_rank_*.wgsl),
//                 the counts of the tiles before it are looked back at (decoupled look-back,
//                 digit by digit; a payload is read before, so its loads are in flight then),
//                 then keys (and the u32 payload) are written to their places through workgroup
//                 memory, so writes of one digit's run are consecutive
//   finish        indirect: copies the alternate buffers back when an odd number of passes ran
// Keys-only sorts of 32-bit keys over every bit from RadixTuning::msd_from keys take the MSD path
// instead (radix_msd.wgsl, in the unstable module): count_digits then counts the top digit alone
// and prepare lays out its buckets; the LSD passes' dispatches stay empty unless it falls back.
// No workgroup waits on another without a bound: tiles take tickets in launch order, and a tile
// whose predecessor stays silent for SPIN_LIMIT reads counts that digit in that tile itself.
// CPU twin: crates/gpusort-core/src/reference/radix.rs.
// Keys, payloads and their alternates are reached only through key_word_at, set_key_word,
// payload_at and set_payload (host-composed, sort::radix_wgsl::element_access): one binding each,
// or, for a job beyond one binding, the first PART elements at bindings 1..=4 and the rest at
// 10..=13 (ranges of the same buffers); radix_msd.wgsl reaches keys the same way.
// Host-prepended constants: PROBE (0; measuring only: 1 skips the look-back, 2 the ranking's
// result, 4 the global writes, 8 the ranking itself, 16 the trip through workgroup memory, 32
// seven of the ranking's eight ballots, 64 its scan over the subgroups' rows, 128 its scan over
// the digits; in the MSD path's msd_local 512 skips the comparisons, 1024 the places and
// comparisons, 2048 the bins' scan; in count_keys 4096 sums the digits instead of counting
// them, 8192 makes the keys up instead of loading them, 16384 returns at once, 32768 leaves the
// look-back state alone, 65536 skips the histograms' zeroing and flush; results then wrong),
// WG (256: one digit per invocation; or 512 with subgroups, the
// second half idle where the work is per digit), ITEMS, KIND and DESCENDING (the key order,
// keyorder.wgsl: constants, so each key's transform folds to its few instructions), KEY_WORDS
// (1|2), HIST_CHUNKS (count_digits reads HIST_CHUNKS * TILE keys a workgroup), PAYLOAD (0|1),
// SCRATCH (workgroup words), SPIN_LIMIT, SWEEP_GROUPS and PERSIST (1: at most SWEEP_GROUPS sweep
// workgroups, each looping over tiles), STABLE_TILE and STABLE_SWEEP_GROUPS (the stable sweep's
// TILE and SWEEP_GROUPS, which the unstable module's count_keys and plan_passes need), MAX_DIM
// (workgroups per dimension), IDENTITY (0), MIN_SG (smallest subgroup size, for the rank tables), PACK (digits a rank-table word), EARLY
// (1: a tile counts and publishes its digits before ranking them; subgroup ranking only),
// NAN_TEST (1: an ascending order on part of a float's bits, see sortable),
// EARLY_AT (where in scratch that histogram sits: past the rank tables), SPARE_AT (past it, a
// word a lane: where the ranking's other lanes add nothing), HIST_COPIES (count_digits'
// copies of its histograms), UNSTABLE_TILE (the
// unstable sweep's tile, WG times its own ITEMS: prepare sizes its dispatch), UNSTABLE_ARGS
// and MSD_ARGS (where the unstable sweeps' and the MSD path's dispatch sizes start in args),
// MSD_LOCAL_GROUPS (msd_local's and msd_dense's looping workgroups) and the MSD path's words
// and constants (below, radix_msd.wgsl).
// Host-composed before this file: common/grid.wgsl, common/keyorder.wgsl, one of
// common/wgscan_{subgroup,shared}.wgsl and the matching common/radix_rank_{subgroup,shared}.wgsl.

const TILE: u32 = WG * ITEMS;
// a sweep puts its whole tile in scratch (the host sizes both: sort::radix_wgsl)
const_assert SCRATCH >= TILE;
const RADIX: u32 = 256u;
const MAX_PASSES: u32 = 8u;
// The atomic control words.
const C_TICKETS: u32 = 0u;   // [MAX_PASSES]
const C_NARROW: u32 = 8u;    // [2]: the keys' sign-extension bits, OR-ed (hi, lo; narrow_bits)
// C_LSD_RAN (10, host-prepended): bit p, the LSD plan runs pass p (plan_passes; read by tests)
const C_HIST: u32 = 32u;     // [MAX_PASSES][RADIX]: digit counts
// The plan prepare writes and later dispatches only read (plain words, so reads are plain loads).
const P_N: u32 = 0u;
const P_FLIP: u32 = 4u;      // [MAX_PASSES]: the pass reads the alternate buffers
const P_FIRST: u32 = 12u;    // [MAX_PASSES]: 1 the first pass that runs (encodes the keys, makes
                             // the index payload), | 2 the last (decodes them)
const P_HALF: u32 = 20u;     // [MAX_PASSES]: the half of the look-back state a stable pass uses
const P_NARROW: u32 = 28u;   // 1 + the pass whose digit's top bit is flipped (narrow_passes), or 0
const P_STARTS: u32 = 32u;   // [MAX_PASSES][RADIX]: exclusive digit starts
// The keys-only MSD path's words (radix_msd.wgsl) come from the host, which sizes ctl and plan
// by them (radix.rs, MSD_WORDS): C_MSD_FLAG (0: the MSD path runs; 1: a 16-bit bucket is too
// large, fall back to the LSD passes; 2: a top-digit bucket is, or there are no keys: prepare fell
// back at once), C_TILE_COUNT (msd_local's tiles), C_DENSE_COUNT (16-bit buckets msd_local left
// to msd_dense), C_JOINT ([RADIX][RADIX]: keys of each top digit and next digit), P_RECOUNT
// (the fall back's count workgroups), P_TILES ([RADIX + 1]: MSD tiles before each top-digit
// bucket, then all; msd_decide sets all to 0 where the path falls back), P_START16
// ([RADIX * RADIX]: where each 16-bit bucket starts), P_MSD_TILES ([RADIX * RADIX][3]: msd_local's tiles, first key, keys, first 16-bit bucket | span
// << 16, in any order) and P_DENSE ([RADIX * RADIX][2]: the 16-bit buckets msd_dense sorts, first
// key and keys, in any order).
// Status words of the look-back: flag in the top two bits, a count below. The state has two
// halves of a row of RADIX words a tile: a stable pass uses one (P_HALF) and zeroes the other's
// rows for the next stable pass; count_keys zeroes the first one's. So no clear is recorded
// between passes, and where the MSD path runs (its LSD passes then empty) nothing is zeroed.
const AGGREGATE: u32 = 0x40000000u;
const INCLUSIVE: u32 = 0x80000000u;
const VALUE: u32 = 0x3fffffffu;
// Dispatch sizes (args): a pass's sweep at 3 * pass, finish at 3 * MAX_PASSES, a pass's unstable
// sweep at 3 * (UNSTABLE_ARGS + pass) (UNSTABLE_ARGS from the host: radix.rs); the MSD path's
// top-digit sweep, msd_count, msd_sweep (or the fall back's count), msd_local, msd_dense and the
// top digit's count relative to the keys' range at 3 * (MSD_ARGS + 0..MSD_SLOTS).
const MSD_SLOTS: u32 = 6u;
// The MSD path's count of the top digit again, relative to the keys' range (prepare sizes it: see
// choose_msd_range), in count_digits' second dispatch.
const MSD_RECOUNT: u32 = 5u;
// Tiles of the MSD path's keys an msd_count workgroup reads (prepare sizes its dispatch): four
// leave 819 workgroups at 2^24 keys, more than an H100 holds at once.
const MSD_COUNT_TILES: u32 = 4u;

struct RadixParams {
    capacity: u32,   // keys in the buffers; the count when there is no GPU-resident count
    gpu_count: u32,  // 1: the count is count_in[0] (clamped to capacity)
    begin_bit: u32,  // the sortable key bits [begin_bit, end_bit) are sorted on
    end_bit: u32,
    passes: u32,     // ceil((end_bit - begin_bit) / 8)
    this_pass: u32,  // this sweep's pass
    make_index: u32, // 1: the payload is the input index, made by the first pass that runs
    unstable_passes: u32, // bit p: pass p is the unstable sweep's (see sweep; the host decides)
    msd: u32,        // 1: the host recorded the MSD path (radix_msd.wgsl) before the LSD passes
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> rp: RadixParams;
// KeyWord: a key as it lies in memory, u32 or (64-bit keys, low word first) vec2<u32>, so that a
// key moves in one load or store (host-prepended with key_of_word and word_of_key)
@group(0) @binding(1) var<storage, read_write> keys: array<KeyWord>;
@group(0) @binding(2) var<storage, read_write> keys_alt: array<KeyWord>;
@group(0) @binding(3) var<storage, read_write> payload: array<u32>;
@group(0) @binding(4) var<storage, read_write> payload_alt: array<u32>;
@group(0) @binding(5) var<storage, read_write> ctl: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(7) var<storage, read> count_in: array<u32>;
@group(0) @binding(8) var<storage, read_write> args: array<u32>;
@group(0) @binding(9) var<storage, read_write> plan: array<u32>;

// The subgroup rank tables, then the tile in sorted order; count_digits' histograms (never live at
// once). One array: separate plain and atomic arrays measured slower on the H100 (more workgroup
// memory per tile).
var<workgroup> scratch: array<atomic<u32>, SCRATCH>;
var<workgroup> digit_total: array<u32, RADIX>; // keys of each digit in the tile (positions)
var<workgroup> digit_start: array<u32, RADIX>; // where each digit's run starts in the tile
var<workgroup> dst_base: array<u32, RADIX>;    // output index of a run's first key, less its start
var<workgroup> job: vec4<u32>;                 // tile, n, flip, first | last

fn combine(a: u32, b: u32) -> u32 {
    return a + b;
}

// digit_start from digit_total (a workgroup scan: every invocation calls it; with WG above RADIX
// the invocations past the digits add nothing).
fn set_digit_starts() {
    let d = min(inv.li, RADIX - 1u);
    let s = wg_exclusive(select(0u, digit_total[d], inv.li < RADIX)).x;
    if (inv.li < RADIX) { digit_start[inv.li] = s; }
}

fn job_n() -> u32 {
    if (rp.gpu_count != 0u) { return min(count_in[0], rp.capacity); }
    return rp.capacity;
}

// The key at `e` as (hi, lo) native words, NaNs made canonical (the bitonic sort returns the
// canonical NaN too, so --algorithm never changes a result).
fn load_key(e: u32, alt: bool) -> vec2<u32> {
    let k = key_of_word(key_word_at(e, alt)); // (hi, lo)
    let nan = select(vec2<u32>(0x7fc00000u, 0u), vec2<u32>(0x7ff80000u, 0u), kind_wide(KIND));
    return select(k, nan, key_is_nan(KIND, k.x, k.y));
}

// The sortable words of a key read through load_key: its NaNs are canonical, so an ascending
// order needs no NaN test (keyorder.wgsl, key_order) — unless it sorts on part of a float's bits
// (NAN_TEST): key_encode makes every bit of a NaN one, key_order only its top ones.
fn sortable(k: vec2<u32>) -> vec2<u32> {
    if (DESCENDING == 0u && NAN_TEST == 0u) { return key_order(KIND, false, k.x, k.y); }
    return key_encode(KIND, DESCENDING == 1u, k.x, k.y);
}

// The digit of pass `p` of a native key: bits [shift, shift + 8) of the sortable value (the
// high word above the low word for 64-bit keys; the one word for 32-bit keys), cut at end_bit.
fn digit_of(k: vec2<u32>, p: u32) -> u32 {
    return sortable_digit(sortable(k), p);
}

// The same digit of a key's sortable words.
fn sortable_digit(s: vec2<u32>, p: u32) -> u32 {
    var lo = s.x;
    var hi = 0u;
    if (KEY_WORDS == 2u) { lo = s.y; hi = s.x; }
    let shift = rp.begin_bit + 8u * p;
    let bits = min(8u, rp.end_bit - shift);
    var v: u32;
    if (shift >= 32u) {
        v = hi >> (shift - 32u);
    } else if (shift == 0u) {
        v = lo;
    } else {
        v = (lo >> shift) | (hi << (32u - shift));
    }
    return v & ((1u << bits) - 1u);
}

// Where keys travel between the passes of one sort as their sortable words (ENCODED): the first
// pass that runs encodes each key as it reads it (NaNs canonical first), the last one decodes it
// as it stores it, and the passes between take digits with a shift and a mask. Floats and 64-bit
// keys travel so (their encoding, paid at every digit, made f32 passes 1.3x u32's); 32-bit
// integers stay as they are (u32 has nothing to encode, and i32 measured slower encoded:
// docs/BENCHMARKS.md).
const ENCODED: bool = KIND == KIND_F32 || KIND == KIND_F64 || KEY_WORDS == 2u;

// A sweep's key at `e`: its sortable words where keys travel ENCODED, else the key itself.
fn load_sweep_key(e: u32, alt: bool, first: bool) -> vec2<u32> {
    if (ENCODED && !first) { return key_of_word(key_word_at(e, alt)); }
    if (ENCODED) { return sortable(load_key(e, alt)); }
    return load_key(e, alt);
}

// The digit of pass `p` of a key as load_sweep_key returned it. In the MSD path's module its top
// digit's sweep takes the top digit of the key's MSD value (msd_value_of).
fn sweep_digit(k: vec2<u32>, p: u32) -> u32 {
    if (MSD_MODULE == 1u && rp.msd == 1u && p + 1u == rp.passes) {
        if (ENCODED) { return msd_value_of(k.x) >> 24u; }
        return msd_value_of(sortable(k).x) >> 24u;
    }
    if (ENCODED) { return sortable_digit(k, p) ^ digit_flip; }
    return digit_of(k, p) ^ digit_flip;
}

// Signed integers that all fit in fewer bits than their type (small values of either sign: the
// sign bit and the bits above a key's width are equal, so in the sortable word every digit above
// differs between negative and non-negative keys and none could be skipped) are sorted as the
// narrow two's-complement numbers they are: the passes above the narrow width are skipped and
// the top pass that runs takes its digit with the top bit flipped (P_NARROW; prepare permutes its
// counts). i64 keys of +-2^20 so run 3 passes, not 8. count_keys ORs each key's sign-extension
// bits into C_NARROW; narrow_passes turns them into the passes needed. CPU twin:
// reference::radix::narrow_passes.
const NARROW: bool = KIND == KIND_I32 || KIND == KIND_I64;
var<private> digit_flip: u32;

// This sweep's digit_flip (plan words are set by prepare before any sweep runs).
fn load_digit_flip() {
    digit_flip = 0u;
    if (NARROW && rp.this_pass + 1u == plan[P_NARROW]) { digit_flip = 0x80u; }
}

// The bits of sortable words `s` (hi, lo; lo alone for 32-bit keys) that differ from the sign
// of the value they encode (the sortable word with its top bit flipped, read as two's
// complement): zero above the key's narrow width, ORed over keys in C_NARROW.
fn narrow_bits(s: vec2<u32>) -> vec2<u32> {
    let y = s.x ^ 0x80000000u;
    let m = select(0u, 0xffffffffu, y >= 0x80000000u);
    if (KEY_WORDS == 1u) { return vec2<u32>(0u, y ^ m); }
    return vec2<u32>(y ^ m, s.y ^ m);
}

// The passes the keys need where they are narrowed (C_NARROW's bits and a sign bit, eight bits
// a pass), or rp.passes where the whole key is sorted some other way (a range of its bits).
fn narrow_passes() -> u32 {
    if (!NARROW || rp.begin_bit != 0u || rp.end_bit != 32u * KEY_WORDS) { return rp.passes; }
    let hi = atomicLoad(&ctl[C_NARROW]);
    let lo = atomicLoad(&ctl[C_NARROW + 1u]);
    let bits = select(32u - countLeadingZeros(lo), 64u - countLeadingZeros(hi), hi != 0u);
    return min((bits + 8u) / 8u, rp.passes);
}

// The MSD path's value of a 32-bit key's sortable word `s`: `s` itself, or, where prepare chose to
// sort relative to the keys' range (choose_msd_range), (s - lowest) << the range's free leading
// bits: the same order on 32 bits, the keys spread over every top digit and 16-bit bucket. The
// plan words are 0 otherwise, and after a fall back to the LSD passes (msd_decide).
// The range's words are read from the plan once a workgroup (load_msd_range), not a key at a time.
fn msd_value_of(s: u32) -> u32 {
    return (s - msd_lo) << msd_shift;
}

// The sortable word of MSD value `v` (its low shifted-out bits are zero).
fn msd_sortable_of(v: u32) -> u32 {
    return (v >> msd_shift) + msd_lo;
}

var<private> msd_lo: u32;
var<private> msd_shift: u32;

// The MSD values' range words, for msd_value_of in this invocation (P_MSD_LO and P_MSD_SHIFT are
// set by prepare before any reader runs).
fn load_msd_range() {
    msd_lo = plan[P_MSD_LO];
    msd_shift = plan[P_MSD_SHIFT];
}

// Store a key as load_sweep_key returned it (hi, lo; lo unused for 32-bit keys) at `out`: as the
// user's key where this is the last pass that runs.
fn store_sweep_key(out: u32, hi: u32, lo: u32, to_alt: bool, last: bool) {
    if ((PROBE & 4u) != 0u && hi != 0x12345678u) { return; }
    var k = vec2<u32>(hi, lo);
    if (ENCODED && last) { k = key_decode(KIND, DESCENDING == 1u, hi, lo); }
    set_key_word(out, to_alt, word_of_key(k));
}

// ---- count_digits: the histograms of every pass in one read -----------------------------------

@compute @workgroup_size(WG)
fn count_digits(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) {
    // the MSD path needs the top digit's alone (its fall back counts every digit again, in
    // msd_sweep's dispatch)
    count_keys(linear_workgroup(wid, nwg), nwg.x * nwg.y, li, rp.msd == 0u);
}

// The digit counts of HIST_CHUNKS * TILE keys (this module's TILE) into C_HIST: every pass's, or
// (`every_digit` false) the top pass's alone. Where every digit is counted the LSD passes run, so
// the first stable pass's half of the look-back state is zeroed too (rows of STABLE_TILE keys,
// spread over the `groups` workgroups launched).
// Each histogram is kept HIST_COPIES times (the host fits them in scratch), an invocation adding
// to copy li % HIST_COPIES: lanes of one subgroup with the same digit would otherwise queue on one
// word, and real keys (floats' exponents, small ranges, sorted runs) share their top digits.
const HIST_SPAN: u32 = KEY_WORDS * 4u * RADIX;
const_assert SCRATCH >= HIST_COPIES * HIST_SPAN;
// The MSD path's first count (every_digit false) also finds the keys' lowest and highest sortable
// words (C_MSD_NLO, C_MSD_HI), from which prepare may choose to sort relative to their range; then
// this count runs again (C_MSD_RANGE 1) on the top digit of the keys' MSD values.
var<workgroup> key_range: array<atomic<u32>, 2>;
var<workgroup> count_state: u32;
// The first count also finds which top digits hold one value alone (C_TOP_MIXED, C_TOP_HI,
// C_TOP_NLO; top_single): a key of each digit from the first chunk names a value, every key
// compares with it. Only in workgroups where some digit holds more than twice a uniform digit's
// share of the first chunk (keys of few values); elsewhere every digit seen counts as of several
// values, and uniform keys pay no comparisons. The named values, the digits that saw another and
// that flag sit in the first copy's rows of passes 0 to 2, which a count of the top digit alone
// leaves free.
const TOP_VALUE_AT: u32 = 0u;
const TOP_MIXED_AT: u32 = RADIX;
const TOP_CHECK_AT: u32 = 2u * RADIX;
var<workgroup> check_values: u32;
// Where every digit is counted (signed integers): the keys' narrow_bits, OR-ed.
var<workgroup> narrow_seen: array<atomic<u32>, 2>;
fn count_keys(group: u32, groups: u32, li: u32, every_digit: bool) {
    if ((PROBE & 16384u) != 0u) { return; }
    let upkeep = (PROBE & 65536u) == 0u;
    for (var b = li; upkeep && b < HIST_COPIES * HIST_SPAN; b += WG) { atomicStore(&scratch[b], 0u); }
    if (li == 0u) {
        count_state = 0u;
        atomicStore(&narrow_seen[0], 0u);
        atomicStore(&narrow_seen[1], 0u);
        if (!every_digit) {
            atomicStore(&key_range[0], 0xffffffffu);
            atomicStore(&key_range[1], 0u);
            count_state = atomicLoad(&ctl[C_MSD_RANGE]);
        }
    }
    let state = workgroupUniformLoad(&count_state); // its barrier: the copies are zero
    if (state == 1u) { load_msd_range(); }
    let n = job_n();
    if (every_digit && (PROBE & 32768u) == 0u) {
        let words = (n + STABLE_TILE - 1u) / STABLE_TILE * RADIX;
        for (var w = group * WG + li; w < words; w += groups * WG) { atomicStore(&status[w], 0u); }
    }
    let copy = (li % HIST_COPIES) * HIST_SPAN;
    var probe_sum = 0u; // measuring only (PROBE 4096: digits summed instead of counted)
    let top = rp.passes - 1u;
    var lowest = 0xffffffffu;
    var highest = 0u;
    var narrow = vec2<u32>(0u);
    var check = false;
    for (var c = 0u; c < HIST_CHUNKS; c++) {
        // every load of a chunk issued before any is used (written out per item, see sweep)
        let e@J = ((group * HIST_CHUNKS + c) * ITEMS + @Ju) * WG + li; //@ITEM
        var k@J = vec2<u32>(0u); //@ITEM
        if ((PROBE & 8192u) != 0u) { k@J = vec2<u32>(e@J * 2654435761u, e@J); } else if (e@J < n) { k@J = load_key(e@J, false); } //@ITEM
        if (every_digit) {
            for (var p = 0u; p < rp.passes; p++) {
                if ((PROBE & 4096u) != 0u) { probe_sum += digit_of(k@J, p); } else if (e@J < n) { atomicAdd(&scratch[copy + p * RADIX + digit_of(k@J, p)], 1u); } //@ITEM
            }
            if (NARROW && e@J < n) { narrow |= narrow_bits(sortable(k@J)); } //@ITEM
        } else {
            // the MSD path (32-bit keys over every bit): the top digit alone
            let s@J = sortable(k@J).x; //@ITEM
            if (e@J < n) { lowest = min(lowest, s@J); highest = max(highest, s@J); atomicAdd(&scratch[copy + top * RADIX + (msd_value_of(s@J) >> 24u)], 1u); } //@ITEM
            if (state == 0u && c == 0u) {
                workgroupBarrier();
                if (li < RADIX) {
                    var first = 0u;
                    for (var h = 0u; h < HIST_COPIES; h++) { first += atomicLoad(&scratch[h * HIST_SPAN + top * RADIX + li]); }
                    if (first > ITEMS * WG / 128u) { atomicStore(&scratch[TOP_CHECK_AT], 1u); }
                }
                workgroupBarrier();
                if (li == 0u) { check_values = atomicLoad(&scratch[TOP_CHECK_AT]); }
                check = workgroupUniformLoad(&check_values) != 0u;
                if (check) {
                    if (e@J < n) { atomicStore(&scratch[TOP_VALUE_AT + (s@J >> 24u)], s@J); } //@ITEM
                    workgroupBarrier();
                }
            }
            if (check) {
                if (e@J < n && atomicLoad(&scratch[TOP_VALUE_AT + (s@J >> 24u)]) != s@J) { atomicStore(&scratch[TOP_MIXED_AT + (s@J >> 24u)], 1u); } //@ITEM
            }
        }
    }
    if ((PROBE & 4096u) != 0u && probe_sum == 0x12345678u) { atomicAdd(&scratch[0], 1u); }
    if (!every_digit && state == 0u) {
        atomicMin(&key_range[0], lowest);
        atomicMax(&key_range[1], highest);
    }
    if (NARROW && every_digit) {
        if (narrow.x != 0u) { atomicOr(&narrow_seen[0], narrow.x); }
        if (narrow.y != 0u) { atomicOr(&narrow_seen[1], narrow.y); }
    }
    workgroupBarrier();
    if (NARROW && every_digit && li < 2u) {
        let bits = atomicLoad(&narrow_seen[li]);
        if (bits != 0u) { atomicOr(&ctl[C_NARROW + li], bits); }
    }
    if (!every_digit && state == 0u && li < RADIX) {
        var c = 0u;
        for (var h = 0u; h < HIST_COPIES; h++) { c += atomicLoad(&scratch[h * HIST_SPAN + top * RADIX + li]); }
        if (c != 0u) {
            if (!check || atomicLoad(&scratch[TOP_MIXED_AT + li]) != 0u) {
                atomicStore(&ctl[C_TOP_MIXED + li], 1u);
            } else {
                let v = atomicLoad(&scratch[TOP_VALUE_AT + li]);
                atomicMax(&ctl[C_TOP_HI + li], v);
                atomicMax(&ctl[C_TOP_NLO + li], ~v);
            }
        }
    }
    if (li == 0u && !every_digit && state == 0u) {
        let lo = atomicLoad(&key_range[0]);
        let hi = atomicLoad(&key_range[1]);
        if (lo <= hi) { // (a workgroup past the keys saw none)
            atomicMax(&ctl[C_MSD_NLO], ~lo);
            atomicMax(&ctl[C_MSD_HI], hi);
        }
    }
    // (the top digit's row alone where that alone was counted: the rows below hold the above)
    for (var b = select(top * RADIX, 0u, every_digit) + li; upkeep && b < rp.passes * RADIX; b += WG) {
        var c = 0u;
        for (var h = 0u; h < HIST_COPIES; h++) { c += atomicLoad(&scratch[h * HIST_SPAN + b]); }
        if (c != 0u) { atomicAdd(&ctl[C_HIST + b], c); }
    }
}

// Stable sweep workgroups for `tiles` tiles: one per tile, or STABLE_SWEEP_GROUPS that loop
// (PERSIST in the stable module), but enough that none takes more than GROUP_TILES:
// scan::launched's rule, here on the GPU because the key count may live there.
fn stable_sweep_groups(tiles: u32) -> u32 {
    return looping_sweep_groups(tiles, STABLE_SWEEP_GROUPS);
}

// The same for the unstable sweep, whose module has SWEEP_GROUPS = UNSTABLE_SWEEP_GROUPS.
fn unstable_sweep_groups(tiles: u32) -> u32 {
    return looping_sweep_groups(tiles, UNSTABLE_SWEEP_GROUPS);
}

fn looping_sweep_groups(tiles: u32, groups: u32) -> u32 {
    if (groups != 0u) { return min(tiles, max(groups, (tiles - 1u) / GROUP_TILES + 1u)); } // tiles = 0: 0
    return tiles;
}

// ---- prepare: one workgroup -------------------------------------------------------------------

var<workgroup> one_digit: u32;
var<workgroup> msd_too_big: u32;

fn write_args(at: u32, groups: u32) {
    var x = groups;
    var y = 1u;
    if (groups > MAX_DIM) { y = (groups + MAX_DIM - 1u) / MAX_DIM; x = (groups + y - 1u) / y; }
    args[at] = x;
    args[at + 1u] = y;
    args[at + 2u] = 1u;
}

var<workgroup> range_choice: u32;

@compute @workgroup_size(WG)
fn prepare(i: Invocation) {
    set_invocation(i);
    if (rp.msd == 1u) {
        if (inv.li == 0u) { range_choice = choose_msd_range(); }
        if (workgroupUniformLoad(&range_choice) == 1u) {
            // relative to the keys' range: the top digit is counted again (count_digits' second
            // dispatch) and msd_range_plan plans the path from those counts; nothing else runs
            // before it
            if (inv.li < RADIX) { atomicStore(&ctl[C_HIST + (rp.passes - 1u) * RADIX + inv.li], 0u); }
            if (inv.li == 0u) {
                for (var w = 0u; w < 3u * (MSD_ARGS + MSD_SLOTS); w++) { args[w] = 0u; }
                write_args(3u * (MSD_ARGS + MSD_RECOUNT), (job_n() + HIST_CHUNKS * TILE - 1u) / (HIST_CHUNKS * TILE));
            }
            return;
        }
    }
    plan_passes(rp.msd == 1u);
}

// Whether the MSD path's top-digit bucket `d`, of `c` of the `n` keys, holds one value alone and
// not every key (the first count's words; never relative to the range, whose digits are others):
// sorted once the top digit's sweep has run, so however full it needs no more (msd_scan lists
// none of it). Keys of few distinct values (codes, categories) so take the MSD path. Where one
// value is every key the LSD passes, each skipped but one, are cheaper.
fn top_single(d: u32, c: u32, n: u32) -> bool {
    if (c == 0u || c == n || atomicLoad(&ctl[C_MSD_RANGE]) != 0u) { return false; }
    if (atomicLoad(&ctl[C_TOP_MIXED + d]) != 0u) { return false; }
    return atomicLoad(&ctl[C_TOP_HI + d]) == ~atomicLoad(&ctl[C_TOP_NLO + d]);
}

// prepare's invocation 0 on the MSD path: whether it sorts the keys' MSD values relative to their
// range (1; msd_value_of, P_MSD_LO and P_MSD_SHIFT set, C_MSD_RANGE 1) or as they are (0): the rule
// of sort::radix_layout::msd_range_shift (relative where the range leaves leading bits free and
// the keys would crowd the absolute 16-bit buckets: timestamps, ids from a sequence, small signed
// ranges).
fn choose_msd_range() -> u32 {
    plan[P_MSD_LO] = 0u;
    plan[P_MSD_SHIFT] = 0u;
    let n = job_n();
    let lo = ~atomicLoad(&ctl[C_MSD_NLO]);
    let hi = atomicLoad(&ctl[C_MSD_HI]);
    if (n == 0u || hi <= lo) { return 0u; } // no keys, or all equal
    let shift = min(countLeadingZeros(hi - lo), 24u);
    let buckets = (hi >> 16u) - (lo >> 16u) + 1u;
    if (shift == 0u || (lo >> 24u) == (hi >> 24u) || n <= buckets * (UNSTABLE_TILE / 2u) || (n + 7u) / 8u - 1u > hi - lo) { return 0u; }
    plan[P_MSD_LO] = lo;
    plan[P_MSD_SHIFT] = shift;
    atomicStore(&ctl[C_MSD_RANGE], 1u);
    return 1u;
}

// prepare's work, a workgroup's: from the digit counts, the plan of the LSD passes (or, `msd`,
// of the MSD path's top digit). The MSD path's fall back plans the LSD passes here too, afresh
// from every digit's counts (in the unstable module's msd_plan_rest, so tile sizes and workgroups
// here are the stable sweep's constants, not this module's). An odd count of passes ends in
// finish's copy back on every path: cheaper than running a skippable pass to make it even
// (docs/BENCHMARKS.md, the MSD path's fall back).
fn plan_passes(msd: bool) {
    let n = job_n();
    let tiles = (n + STABLE_TILE - 1u) / STABLE_TILE;
    let unstable_tiles = (n + UNSTABLE_TILE - 1u) / UNSTABLE_TILE;
    var skip: array<bool, MAX_PASSES>;
    if (inv.li == 0u) { msd_too_big = 0u; } // behind the loop's first barrier
    // signed keys of a narrow width (narrow_passes): the passes above it skipped, the top one's
    // digit with its top bit flipped, so its digit starts are of the flipped digits
    var needed = rp.passes;
    if (!msd) { needed = narrow_passes(); }
    for (var p = 0u; p < rp.passes; p++) {
        if (inv.li == 0u) { one_digit = 0u; }
        workgroupBarrier();
        var c = 0u;
        let digit = inv.li < RADIX; // WG may exceed RADIX (see sweep)
        let flip = select(0u, 0x80u, needed < rp.passes && p + 1u == needed);
        if (p < rp.passes && digit) { c = atomicLoad(&ctl[C_HIST + p * RADIX + (inv.li ^ flip)]); }
        if (c == n && digit) { one_digit = 1u; } // every key has this digit: the pass cannot reorder
        let s = wg_exclusive(c);
        if (digit) { plan[P_STARTS + p * RADIX + inv.li] = s.x; }
        if (msd && p + 1u == rp.passes) {
            // the MSD path: tiles of the top digit's buckets, none crossing a bucket; a bucket
            // of more than RADIX tiles holds a 16-bit bucket too large for msd_local
            let t = wg_exclusive((c + UNSTABLE_TILE - 1u) / UNSTABLE_TILE);
            if (digit) { plan[P_TILES + inv.li] = t.x; }
            if (inv.li == 0u) { plan[P_TILES + RADIX] = t.y; }
            if (c > RADIX * UNSTABLE_TILE && !top_single(inv.li, c, n)) { msd_too_big = 1u; }
        }
        skip[p] = workgroupUniformLoad(&one_digit) != 0u || p >= needed;
        workgroupBarrier();
    }
    if (inv.li != 0u) { return; }
    plan[P_N] = n;
    plan[P_NARROW] = select(0u, needed, needed < rp.passes);
    var any = false;
    for (var p = 0u; p < rp.passes; p++) { any = any || !skip[p]; }
    // With every pass skipped one still runs when there are keys, so NaNs come out canonical and
    // the index payload is made, as in every other sort.
    if (!any && n > 0u) { skip[0] = false; }
    var runs = 0u;
    var stable_runs = 0u;
    var last_run = 0u;
    for (var p = 0u; p < rp.passes; p++) {
        plan[P_FLIP + p] = runs & 1u;
        plan[P_HALF + p] = stable_runs & 1u;
        plan[P_FIRST + p] = select(0u, 1u, runs == 0u);
        if (!skip[p]) { last_run = p; }
        let groups = select(stable_sweep_groups(tiles), 0u, skip[p]);
        let unstable_groups = select(unstable_sweep_groups(unstable_tiles), 0u, skip[p]);
        // a pass the host recorded both ways (bit p: radix.rs) runs as the unstable sweep where
        // no pass ran before it (a keys-only sort's first pass need keep no order), or always
        // where every pass is measured so (PROBE 256)
        let unstable = ((rp.unstable_passes >> p) & 1u) == 1u && (runs == 0u || (PROBE & 256u) != 0u);
        write_args(3u * p, select(groups, 0u, unstable));
        write_args(3u * (UNSTABLE_ARGS + p), select(0u, unstable_groups, unstable));
        if (!skip[p]) { runs += 1u; }
        if (!skip[p] && !unstable) { stable_runs += 1u; }
    }
    if (runs > 0u) { plan[P_FIRST + last_run] |= 2u; } // its keys leave as the user's
    var ran = 0u;
    for (var p = 0u; p < rp.passes; p++) { ran |= select(1u << p, 0u, skip[p]); }
    atomicStore(&ctl[C_LSD_RAN], ran);
    write_args(3u * MAX_PASSES, select(0u, (n + WG - 1u) / WG, (runs & 1u) == 1u));
    // The MSD path (keys-only, every bit, 32-bit keys: the host decides) has the top digit's
    // counts alone, so its LSD plan above is not used. The MSD path runs unless a top-digit
    // bucket is already too large (or there are no keys); then msd_decide has the digits counted
    // again for the LSD passes.
    for (var w = 0u; w < MSD_SLOTS; w++) { write_args(3u * (MSD_ARGS + w), 0u); }
    if (msd) {
        for (var w = 0u; w < 3u * MSD_ARGS; w++) { args[w] = 0u; } // the LSD passes wait
        // the fall back's count, in the unstable module (msd_sweep's dispatch)
        plan[P_RECOUNT] = (n + HIST_CHUNKS * UNSTABLE_TILE - 1u) / (HIST_CHUNKS * UNSTABLE_TILE);
        if (n > 0u && msd_too_big == 0u) {
            plan[P_FLIP + rp.passes - 1u] = 0u;
            plan[P_FIRST + rp.passes - 1u] = 3u; // the top digit's sweep hands on the user's keys
            write_args(3u * MSD_ARGS, unstable_sweep_groups(unstable_tiles));
            write_args(3u * (MSD_ARGS + 1u), (n + MSD_COUNT_TILES * UNSTABLE_TILE - 1u) / (MSD_COUNT_TILES * UNSTABLE_TILE));
        } else {
            atomicStore(&ctl[C_MSD_FLAG], 2u);
        }
    }
}

// ---- sweep: one pass --------------------------------------------------------------------------

// Tile `t`'s keys with digit `d`, counted directly: what a silent predecessor would publish.
fn count_in_tile(t: u32, d: u32, alt: bool) -> u32 {
    var c = 0u;
    let first = (plan[P_FIRST + rp.this_pass] & 1u) != 0u;
    for (var k = 0u; k < TILE; k++) {
        if (sweep_digit(load_sweep_key(t * TILE + k, alt, first), rp.this_pass) == d) { c += 1u; }
    }
    return c;
}

// The first row of this pass's half of the look-back state, or (`other`) of the half it zeroes.
// Read where used, not held through the sweep: the keys-only sweep sits at the 64 registers that
// let two workgroups of 512 share an SM on the H100.
fn lb_row0(other: bool) -> u32 {
    let half = plan[P_HALF + rp.this_pass];
    return select(half, 1u - half, other) * ((plan[P_N] + TILE - 1u) / TILE);
}

// Publish tile `tile`'s count of digit `d` for its successors: inclusive for the first tile.
fn publish_count(tile: u32, d: u32, mine: u32) {
    atomicStore(&status[(lb_row0(false) + tile) * RADIX + d], select(AGGREGATE, INCLUSIVE, tile == 0u) | mine);
}

// The status of tile k - 1 - i for the digit whose word in the half's first row is `base`, or
// "inclusive 0" before the first tile.
fn status_before(k: u32, i: u32, base: u32) -> u32 {
    if (i >= k) { return INCLUSIVE; }
    return atomicLoad(&status[(k - 1u - i) * RADIX + base]);
}

// Invocation `d`: the keys of digit `d` in the tiles before `tile` (decoupled look-back). The
// predecessors are read LB_WINDOW at a time (lines ending in //@LB are written out per window
// slot, @L its number): independent loads, one memory latency per window instead of one per tile.
// With EARLY the count was published before the ranking.
fn look_back(tile: u32, d: u32, mine: u32, alt: bool) -> u32 {
    if (EARLY == 0u) { publish_count(tile, d, mine); }
    let base = lb_row0(false) * RADIX + d; // in place of d (d = base % RADIX): no more registers
    let at = tile * RADIX + base;
    if (tile == 0u) { return 0u; }
    var prefix = 0u;
    var k = tile; // tiles below k are still to add
    loop {
        let s@L = status_before(k, @Lu, base); //@LB
        var stop = false;
        var silent = false;
        var added = 0u;
        if (!stop) { if (s@L == 0u) { silent = true; stop = true; } else { prefix += s@L & VALUE; added += 1u; stop = (s@L & INCLUSIVE) != 0u; } } //@LB
        if (stop && !silent) { break; }
        k -= added;
        if (silent) {
            // wait on the nearest silent tile alone; if it stays silent, count its digit here
            var v = 0u;
            for (var spins = 0u; spins <= SPIN_LIMIT && v == 0u; spins++) { v = status_before(k, 0u, base); }
            if (v == 0u) {
                prefix += count_in_tile(k - 1u, base % RADIX, alt);
                k -= 1u;
                if (k == 0u) { break; }
            }
        }
    }
    atomicStore(&status[at], INCLUSIVE | (prefix + mine));
    return prefix;
}

var<workgroup> next_ticket: u32;

// Lines ending in //@ITEM are written out once per key an invocation holds (@J: 0..ITEMS-1) by
// the host (sort::radix_wgsl): straight-line code keeps the keys in registers, where loops over
// private arrays measured spilling to local memory on the H100 (ITEMS 8 -> 16 doubled the time).
// With PERSIST (fewer workgroups than tiles, see prepare), a workgroup loops over tiles: once its
// tile is ranked it takes its next ticket and starts loading that tile's keys, so those loads
// are in flight while it looks back and writes this tile out.
@compute @workgroup_size(WG)
fn sweep(i: Invocation) {
    set_invocation(i);
    let p = rp.this_pass;
    if (inv.li == 0u) {
        job = vec4<u32>(atomicAdd(&ctl[C_TICKETS + p], 1u), plan[P_N], plan[P_FLIP + p],
                        plan[P_FIRST + p]);
    }
    let jb = workgroupUniformLoad(&job);
    if (MSD_MODULE == 1u && rp.msd == 1u && p + 1u == rp.passes) { load_msd_range(); }
    load_digit_flip();
    var tile = jb.x;
    let n = jb.y;
    let from_alt = jb.z != 0u;
    let first = (jb.w & 1u) != 0u;
    let last = (jb.w & 2u) != 0u;
    let tiles = (n + TILE - 1u) / TILE;
    if (tile >= tiles) { return; } // surplus workgroups of the grid

    // load; keys past the end get the last digit, so they rank after every real key
    var k@J = vec2<u32>(0u); //@ITEM
    let l@J = local_index(@Ju); //@ITEM
    if (l@J < n - tile * TILE) { k@J = load_sweep_key(tile * TILE + l@J, from_alt, first); } //@ITEM
    var taken = 1u; // tiles this workgroup has taken: at most GROUP_TILES (scan::group_tiles)
    loop {
        let base = tile * TILE;
        let in_tile = min(TILE, n - base);
        var d@J = RADIX - 1u; //@ITEM
        if (l@J < in_tile) { d@J = sweep_digit(k@J, p); } //@ITEM
        // EARLY: the tile's digit counts first, published at once, so successors find them
        // while this tile is still ranking (CUB's onesweep does the same); the histogram sits
        // past the rank tables (EARLY_AT), cleared behind rank_begin's barrier
        let d = inv.li;
        if (EARLY == 1u) { //@STABLE
            if (d < RADIX) { atomicStore(&scratch[EARLY_AT + d], 0u); } //@STABLE
            if ((PROBE & 8u) != 0u) { workgroupBarrier(); } //@STABLE
        } //@STABLE
        // rank inside the tile (common/radix_rank_*.wgsl); sets digit_total and digit_start
        var p@J = l@J; //@ITEM
        if ((PROBE & 8u) == 0u) { rank_begin(); } //@STABLE
        if (COUNT_FIRST == 1u && (PROBE & 8u) == 0u) { //@STABLE
            // the keys past the end are counted (digit RADIX - 1) as they are ranked
            rank_count(d@J); //@ITEM//@STABLE
            rank_offsets(); //@STABLE
            if (d < RADIX && (PROBE & 1u) == 0u) { publish_count(tile, d, digit_total[d] - select(0u, TILE - in_tile, d == RADIX - 1u)); } //@STABLE
            // one-word keys take their digit again rather than hold it through rank_offsets (held,
            // the keys-only sweep needed 81 registers on an H200 instead of 64)
            p@J = rank_item(@Ju, select(d@J, select(RADIX - 1u, sweep_digit(k@J, p), l@J < in_tile), KEY_WORDS == 1u)); //@ITEM//@STABLE
        } else { //@STABLE
        if (EARLY == 1u) { //@STABLE
            if (l@J < in_tile) { atomicAdd(&scratch[EARLY_AT + d@J], 1u); } //@ITEM//@STABLE
            workgroupBarrier(); //@STABLE
            // (read again from digit_total after the ranking: held in a register through it,
            // the count took the keys-only sweep from 64 registers to 77 on the H100)
            if (d < RADIX && (PROBE & 1u) == 0u) { publish_count(tile, d, atomicLoad(&scratch[EARLY_AT + d])); } //@STABLE
        } //@STABLE
        if ((PROBE & 8u) == 0u) { //@STABLE
            p@J = rank_item(@Ju, d@J); //@ITEM//@STABLE
            rank_middle(); //@STABLE
            p@J += rank_end(@Ju, d@J); //@ITEM//@STABLE
        } //@STABLE
        } //@STABLE
        // The unstable sweep (the first pass of a keys-only sort over every key bit, where no
        // earlier order needs keeping): the tile's digit histogram's own atomic gives each key its
        // slot among its digit's keys, in whatever order the adds land
        if (d < RADIX) { atomicStore(&scratch[d], 0u); } //@UNSTABLE
        workgroupBarrier(); //@UNSTABLE
        if (l@J < in_tile) { p@J = atomicAdd(&scratch[d@J], 1u); } //@ITEM//@UNSTABLE
        workgroupBarrier(); //@UNSTABLE
        if (d < RADIX) { digit_total[d] = atomicLoad(&scratch[d]); } //@UNSTABLE
        workgroupBarrier(); //@UNSTABLE
        set_digit_starts(); //@UNSTABLE
        workgroupBarrier(); //@UNSTABLE
        p@J += digit_start[d@J]; //@ITEM//@UNSTABLE
        if ((PROBE & 2u) != 0u) { p@J = l@J; } //@ITEM
        var next = tiles;
        if (PERSIST == 1u && taken < GROUP_TILES) {
            taken += 1u;
            if (inv.li == 0u) { next_ticket = atomicAdd(&ctl[C_TICKETS + p], 1u); }
            next = min(workgroupUniformLoad(&next_ticket), tiles); // its barrier: rank tables read
        } else {
            workgroupBarrier(); // the rank tables are read; scratch is free
        }
        // one-word keys go to their places in the tile now, before the look-back, so they leave
        // registers while it waits (and a looping workgroup holds the next tile's keys instead)
        let early = KEY_WORDS == 1u && (PROBE & 16u) == 0u;
        if (early && l@J < in_tile) { atomicStore(&scratch[p@J], k@J.x); } //@ITEM
        // the payload is read now, so its loads are in flight through the look-back
        var pv@J = 0u; //@ITEM
        if (PAYLOAD == 1u && l@J < in_tile) { pv@J = load_payload(base + l@J, from_alt, first); } //@ITEM
        var nk@J = vec2<u32>(0u); //@ITEM
        if (l@J < n - min(next * TILE, n)) { nk@J = load_sweep_key(next * TILE + l@J, from_alt, first); } //@ITEM

        // publish, look back, and find where each digit's run goes: one invocation a digit (with
        // WG = 512 the second half waits)
        if (d < RADIX) {
            var mine = digit_total[d];
            if (d == RADIX - 1u) { mine -= TILE - in_tile; } //@STABLE
            let start = plan[P_STARTS + p * RADIX + d]; // in flight during the walk
            var before = 0u;
            // this tile's row of the other half, from zero for the next stable pass
            atomicStore(&status[(lb_row0(true) + tile) * RADIX + d], 0u); //@STABLE
            if ((PROBE & 1u) == 0u) { before = look_back(tile, d, mine, from_alt); } //@STABLE
            // unstable: the run's place among this digit's keys reserved by one atomic (the digit's
            // count, left by count_digits and read by prepare, counted down), no waiting on others
            // (the counts are of the digits before digit_flip)
            if (mine != 0u) { before = atomicSub(&ctl[C_HIST + p * RADIX + (d ^ digit_flip)], mine) - mine; } //@UNSTABLE
            dst_base[d] = start + before - digit_start[d];
        }

        // through workgroup memory in tile order, then out in runs: position q of the tile goes to
        // o = dst_base[its digit] + q
        let q@J = inv.li + @Ju * WG; //@ITEM
        var o@J = 0u; //@ITEM
        if ((PROBE & 16u) != 0u) {
            if (l@J < in_tile) { store_sweep_key(base + l@J, k@J.x, k@J.y, !from_alt, last); } //@ITEM
        } else if (KEY_WORDS == 1u) {
            // the key word gives its digit back; the keys were stored before the look-back
            workgroupBarrier();
            if (q@J < in_tile) { let v = atomicLoad(&scratch[q@J]); o@J = dst_base[sweep_digit(vec2<u32>(v, 0u), p)] + q@J; store_sweep_key(o@J, v, 0u, !from_alt, last); } //@ITEM
        } else {
            workgroupBarrier();
            if (l@J < in_tile) { atomicStore(&scratch[p@J], d@J); } //@ITEM
            workgroupBarrier();
            if (q@J < in_tile) { o@J = dst_base[atomicLoad(&scratch[q@J])] + q@J; } //@ITEM
            // the low words, then the high ones: each key leaves in one 8-byte store
            workgroupBarrier();
            if (l@J < in_tile) { atomicStore(&scratch[p@J], k@J.y); } //@ITEM
            workgroupBarrier();
            var lo@J = 0u; //@ITEM
            if (q@J < in_tile) { lo@J = atomicLoad(&scratch[q@J]); } //@ITEM
            workgroupBarrier();
            if (l@J < in_tile) { atomicStore(&scratch[p@J], k@J.x); } //@ITEM
            workgroupBarrier();
            if (q@J < in_tile) { store_sweep_key(o@J, atomicLoad(&scratch[q@J]), lo@J, !from_alt, last); } //@ITEM
        }
        if (PAYLOAD == 1u) {
            workgroupBarrier();
            if (l@J < in_tile) { atomicStore(&scratch[p@J], pv@J); } //@ITEM
            workgroupBarrier();
            if (q@J < in_tile) { store_payload(o@J, atomicLoad(&scratch[q@J]), !from_alt); } //@ITEM
        }
        if (next >= tiles) { break; }
        tile = next;
        k@J = nk@J; //@ITEM
        workgroupBarrier(); // scratch, digit_total and dst_base are read before the next tile's ranking
    }
}

// The payload of element `e`: its index in the first pass that runs, when an index is made.
fn load_payload(e: u32, alt: bool, first: bool) -> u32 {
    if (first && rp.make_index == 1u) { return e; }
    return payload_at(e, alt);
}

fn store_payload(out: u32, v: u32, to_alt: bool) {
    if ((PROBE & 4u) != 0u && v != 0x12345678u) { return; }
    set_payload(out, to_alt, v);
}

// ---- finish: back from the alternate buffers after an odd number of passes --------------------

@compute @workgroup_size(WG)
fn finish(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let e = linear_workgroup(wid, nwg) * WG + li;
    if (e >= plan[P_N]) { return; }
    set_key_word(e, false, key_word_at(e, true));
    if (PAYLOAD == 1u) { set_payload(e, false, payload_at(e, true)); }
}
