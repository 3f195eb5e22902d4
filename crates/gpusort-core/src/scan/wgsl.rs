//! WGSL generation for the scan and compaction kernels (shaders/scan.wgsl, shaders/compact.wgsl).

use crate::scan::ScanTuning;
use crate::wgsl::{compose_with, expand_lines, single_pass, COMPACT, KEY_ORDER, SCAN, SCAN_OP};

/// The constants common/lookback.wgsl and its walks need, for a family whose workgroups loop
/// over tiles or not (`persist`) and wait on the nearest silent tile or not.
fn look_back_constants(
    t: &ScanTuning,
    persist: bool,
    wait_nearest: bool,
    group_tiles: u32,
    one_word: bool,
    stride: u32,
    walk_op: u32,
) -> [(&'static str, u32); 11] {
    [
        ("WALK_OP", walk_op),
        ("SPIN_LIMIT", t.spin_limit),
        ("ONE_WORD", one_word as u32),
        ("WINDOW", t.window),
        ("WAIT_NEAREST", wait_nearest as u32),
        ("PERSIST", persist as u32),
        ("GROUP_TILES", group_tiles),
        ("NO_LOOKBACK", t.no_lookback as u32),
        ("COUNTERS", t.counters as u32),
        ("STATE_STRIDE", stride),
        ("STATE_HEADER", crate::scan::state_header(stride)),
    ]
}

/// The scan family for operator code `op` (see common/scanop.wgsl).
pub fn scan(
    op: u32,
    identity: u32,
    inclusive: bool,
    subgroups: bool,
    t: &ScanTuning,
    group_tiles: u32,
) -> String {
    let [wgscan, lookback, walk] = single_pass(subgroups);
    let source = compose_with(
        SCAN,
        &[
            ("WG", t.scan_wg),
            ("OP", op),
            ("IDENTITY", identity),
            ("INCLUSIVE", inclusive as u32),
            ("ROUNDS", t.scan_rounds),
        ]
        .into_iter()
        .chain(look_back_constants(
            t,
            t.scan_workgroups != 0,
            t.scan_wait_nearest,
            group_tiles,
            false,
            t.look_back_stride(false),
            op,
        ))
        .collect::<Vec<_>>(),
        &[SCAN_OP, wgscan, lookback, walk],
    );
    let persist = t.scan_workgroups != 0;
    let source = expand_lines(&source, "//@PERSIST", persist as u32, |_, l| l.to_string());
    per_round_lines(&source, t.scan_rounds)
}

/// scan.wgsl's and compact.wgsl's rounds as straight-line code: lines ending in `//@ROUND` once
/// per round (`@R` the round, `@Q` its group of four, `@C` its place in the group), lines ending
/// in `//@QUAD` once per group of four rounds (`@Q0`..`@Q3` its rounds, `@Q` the group; the
/// last group may be partial), lines ending in `//@PAD` once per round that fills the last
/// group up to four (`@R` that round: compact.wgsl defines its kept mask as empty there).
fn per_round_lines(source: &str, rounds: u32) -> String {
    let quads = rounds.div_ceil(4);
    let source = expand_lines(source, "//@ROUND", rounds, |r, l| {
        l.replace("@R", &r.to_string())
            .replace("@Q", &(r / 4).to_string())
            .replace("@C", &(r % 4).to_string())
    });
    let source = expand_lines(&source, "//@PAD", 4 * quads - rounds, |p, l| {
        l.replace("@R", &(rounds + p).to_string())
    });
    expand_lines(&source, "//@QUAD", quads, |q, l| {
        (0..4)
            .fold(l.to_string(), |l, c| {
                l.replace(&format!("@Q{c}"), &(4 * q + c).to_string())
            })
            .replace("@Q", &q.to_string())
    })
}

/// The compaction family for elements of `words` u32 words.
/// `variant` is kind << 3 | predicate << 1 | keep (see compact.wgsl's constants).
pub fn compact(
    words: u32,
    payload: bool,
    variant: u32,
    subgroups: bool,
    t: &ScanTuning,
    group_tiles: u32,
    storage: u32,
) -> String {
    let [wgscan, lookback, walk] = single_pass(subgroups);
    let source = compose_with(
        COMPACT,
        &[
            ("WG", t.compact_wg(payload)),
            ("ROUNDS", t.compact_rounds),
            (
                "STAGE",
                t.compact_stage_size(payload, words, subgroups, storage),
            ),
            ("PROBE", t.compact_probe),
            ("LATE_LOADS", t.compact_late_loads as u32),
            ("W", words),
            ("PAYLOAD", payload as u32),
            ("KIND", variant >> 3),
            ("PRED", (variant >> 1) & 3),
            ("KEEP", variant & 1),
            ("IDENTITY", 0),
            ("COUNT_LADDER", t.count_ladder as u32),
        ]
        .into_iter()
        .chain(look_back_constants(
            t,
            t.compact_workgroups != 0,
            t.compact_wait_nearest,
            group_tiles,
            t.compact_one_word,
            t.look_back_stride(true),
            0, // counts: a wrapping add
        ))
        .collect::<Vec<_>>(),
        &[KEY_ORDER, wgscan, lookback, walk],
    );
    per_round_lines(&source, t.compact_rounds)
}
