//! The WGSL sources (one file per kernel family under `shaders/`) and how they are composed.
//!
//! A kernel's source is `const NAME: u32 = V;` lines for its configuration, then
//! `shaders/common/grid.wgsl`, then the family's file. Plain constants, not pipeline overrides,
//! because they size workgroup arrays and private register arrays.

use crate::scan::Tuning;

pub const COMMON: &str = include_str!("../../../shaders/common/grid.wgsl");
pub const BITONIC: &str = include_str!("../../../shaders/bitonic.wgsl");
pub const BITONIC_PLAIN: &str = include_str!("../../../shaders/bitonic_plain.wgsl");
pub const KEYS: &str = include_str!("../../../shaders/keys.wgsl");
pub const COPY: &str = include_str!("../../../shaders/copy.wgsl");
pub const SCAN: &str = include_str!("../../../shaders/scan.wgsl");
pub const SCAN64: &str = include_str!("../../../shaders/scan64.wgsl");
pub const COMPACT: &str = include_str!("../../../shaders/compact.wgsl");
pub const KEY_ORDER: &str = include_str!("../../../shaders/common/keyorder.wgsl");
pub const WGSCAN_SUBGROUP: &str = include_str!("../../../shaders/common/wgscan_subgroup.wgsl");
pub const WGSCAN_SHARED: &str = include_str!("../../../shaders/common/wgscan_shared.wgsl");
pub const RADIX: &str = include_str!("../../../shaders/radix.wgsl");
pub const RADIX_MSD: &str = include_str!("../../../shaders/radix_msd.wgsl");
pub const STENCIL: &str = include_str!("../../../shaders/stencil.wgsl");
pub const STENCIL_TILED: &str = include_str!("../../../shaders/stencil_tiled.wgsl");
pub const SCAN_OP: &str = include_str!("../../../shaders/common/scanop.wgsl");
pub const MERGED: &str = include_str!("../../../shaders/merged.wgsl");
pub const LOOKBACK: &str = include_str!("../../../shaders/common/lookback.wgsl");
pub const LOOKBACK_SUBGROUP: &str = include_str!("../../../shaders/common/lookback_subgroup.wgsl");
pub const LOOKBACK_SHARED: &str = include_str!("../../../shaders/common/lookback_shared.wgsl");

/// Source of one kernel family with its compile-time constants.
pub fn compose(family: &str, consts: &[(&str, u32)]) -> String {
    compose_with(family, consts, &[])
}

/// Like [`compose`], with shared pieces from `shaders/common/` between the helpers and the family.
pub fn compose_with(family: &str, consts: &[(&str, u32)], commons: &[&str]) -> String {
    let mut s = String::new();
    // wgscan_subgroup.wgsl names COUNT_LADDER (compaction's counts through one-bit scans, 0, or
    // the shuffle ladder, 1) in every family that includes it; only compaction chooses
    if !consts.iter().any(|(n, _)| *n == "COUNT_LADDER") {
        s.push_str("const COUNT_LADDER: u32 = 0u;\n");
    }
    for (name, value) in consts {
        s.push_str(&format!("const {name}: u32 = {value}u;\n"));
    }
    for part in [COMMON].iter().chain(commons) {
        s.push_str(part);
        s.push('\n');
    }
    s.push_str(family);
    s
}

/// The workgroup-scan helpers for a device: subgroups where available and allowed.
pub fn wgscan(subgroups: bool) -> &'static str {
    if subgroups {
        WGSCAN_SUBGROUP
    } else {
        WGSCAN_SHARED
    }
}

/// The workgroup scans, the look-back and its walk of the single-pass families for a device.
pub fn single_pass(subgroups: bool) -> [&'static str; 3] {
    if subgroups {
        [WGSCAN_SUBGROUP, LOOKBACK, LOOKBACK_SUBGROUP]
    } else {
        [WGSCAN_SHARED, LOOKBACK, LOOKBACK_SHARED]
    }
}

/// The constants common/lookback.wgsl and its walks need, for a family whose workgroups loop
/// over tiles or not (`persist`) and wait on the nearest silent tile or not.
fn look_back_constants(
    t: &Tuning,
    persist: bool,
    wait_nearest: bool,
    group_tiles: u32,
    one_word: bool,
    stride: u32,
) -> [(&'static str, u32); 10] {
    [
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
    t: &Tuning,
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
        ))
        .collect::<Vec<_>>(),
        &[SCAN_OP, wgscan, lookback, walk],
    );
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

pub const RADIX_RANK_SUBGROUP: &str =
    include_str!("../../../shaders/common/radix_rank_subgroup.wgsl");
pub const RADIX_RANK_SHARED: &str = include_str!("../../../shaders/common/radix_rank_shared.wgsl");

/// One compiled shape of the radix sort.
pub struct RadixConfig {
    pub items: u32,
    /// Invocations per workgroup: 256, or 512 with subgroups.
    pub wg: u32,
    /// The key type's code (keyorder.wgsl's KIND_*): 64-bit kinds take two words a key.
    pub kind: u32,
    pub descending: bool,
    pub payload: bool,
    /// Smallest subgroup size for the subgroup ranking; None ranks in workgroup memory.
    pub min_subgroup: Option<u32>,
    pub spin_limit: u32,
    pub max_dim: u32,
    /// Predecessor tiles the look-back reads at once.
    pub window: u32,
    /// Measuring only (`GPUSORT_RADIX_PROBE`): parts switched off, results wrong; 0 otherwise.
    pub probe: u32,
    /// Stable sweep workgroups launched, each looping over tiles; 0: one per tile.
    pub stable_sweep_groups: u32,
    /// The unstable sweep's (prepare sizes the dispatches of both).
    pub unstable_sweep_groups: u32,
    /// Tiles a looping workgroup takes at most (crate::scan::group_tiles).
    pub group_tiles: u32,
    /// Ballots of one word: every subgroup of the device has at most 32 lanes.
    pub narrow_ballot: bool,
    /// Digit counts published before the ranking (subgroup ranking only).
    pub early_counts: bool,
    /// Tiles of keys a count_digits workgroup reads.
    pub hist_chunks: u32,
    /// Digits a word of the subgroup rank tables (1 or 2).
    pub pack: u32,
    /// The unstable sweep (lines ending in `//@UNSTABLE` kept, `//@STABLE` dropped) instead of
    /// the stable one: for the first pass of keys-only sorts over every key bit (radix.wgsl).
    pub unstable: bool,
    /// Keys an invocation of the unstable sweep holds (its module's ITEMS; UNSTABLE_TILE in both).
    pub unstable_items: u32,
    /// Workgroups of msd_local and msd_dense, each looping over tiles or buckets; 0: one a tile.
    pub msd_local_groups: u32,
    /// msd_local loads the next tile's keys while this one's are ranked (lines ending in
    /// `//@PREFETCH`), or each tile's keys as its round starts (`//@NOPREFETCH`, measuring).
    pub msd_prefetch: bool,
}

/// The radix-sort kernels for one shape.
pub fn radix(c: &RadixConfig) -> String {
    let sg = c.min_subgroup.is_some();
    // keys an invocation of this module's sweep: its tile, its workgroup words, its per-key lines
    let (items, sweep_groups) = match c.unstable {
        true => (c.unstable_items, c.unstable_sweep_groups),
        false => (c.items, c.stable_sweep_groups),
    };
    // the keys-only MSD path's kernels ride in the unstable module of 32-bit keys
    let family = match c.unstable && c.kind < 3 {
        true => format!("{RADIX}\n{RADIX_MSD}"),
        false => RADIX.to_string(),
    };
    let mut consts = vec![
        ("WG", c.wg),
        ("ITEMS", items),
        ("UNSTABLE_TILE", c.wg * c.unstable_items),
        ("STABLE_TILE", c.wg * c.items),
        ("UNSTABLE_ARGS", crate::radix::UNSTABLE_ARGS as u32),
        ("MSD_ARGS", crate::radix::MSD_ARGS as u32),
        ("MSD_LOCAL_GROUPS", c.msd_local_groups),
        ("KIND", c.kind),
        ("DESCENDING", c.descending as u32),
        ("KEY_WORDS", if c.kind >= 3 { 2 } else { 1 }),
        ("PAYLOAD", c.payload as u32),
        ("MIN_SG", c.min_subgroup.unwrap_or(256)),
        (
            "SCRATCH",
            crate::radix::scratch_words(items, c.min_subgroup, c.wg, c.pack),
        ),
        ("SPIN_LIMIT", c.spin_limit),
        ("MAX_DIM", c.max_dim),
        ("IDENTITY", 0),
        ("PROBE", c.probe),
        ("SWEEP_GROUPS", sweep_groups),
        ("STABLE_SWEEP_GROUPS", c.stable_sweep_groups),
        ("UNSTABLE_SWEEP_GROUPS", c.unstable_sweep_groups),
        ("PERSIST", (sweep_groups != 0) as u32),
        ("GROUP_TILES", c.group_tiles),
        ("EARLY", (c.early_counts && sg) as u32),
        ("HIST_CHUNKS", c.hist_chunks),
        (
            "EARLY_AT",
            crate::radix::early_counts_at(c.min_subgroup, c.wg, c.pack),
        ),
        ("PACK", c.pack),
    ];
    consts.extend(crate::radix::MSD_WORDS);
    let source = compose_with(
        &family,
        &consts,
        &[
            KEY_ORDER,
            wgscan(sg),
            if sg {
                RADIX_RANK_SUBGROUP
            } else {
                RADIX_RANK_SHARED
            },
        ],
    );
    // one sweep's lines; before the per-key lines, which may be either's
    let source = choose_lines(&source, c.unstable, "//@UNSTABLE", "//@STABLE");
    let source = choose_lines(&source, c.msd_prefetch, "//@PREFETCH", "//@NOPREFETCH");
    let source = per_item_lines(&source, "//@ITEM", "@J", items);
    let source = per_item_lines(&source, "//@LB", "@L", c.window);
    choose_lines(&source, c.narrow_ballot, "//@NARROW", "//@WIDE")
}

/// Keep the lines ending in `if_true` (marker removed) and drop those ending in `if_false`, or
/// the other way round when `which` is false.
fn choose_lines(source: &str, which: bool, if_true: &str, if_false: &str) -> String {
    let (keep, drop) = if which {
        (if_true, if_false)
    } else {
        (if_false, if_true)
    };
    per_item_lines(&per_item_lines(source, keep, "@NONE", 1), drop, "@NONE", 0)
}

/// Write each line ending in `marker` out `items` times, `var` replaced by the copy's number
/// (0 times drops the lines, once with a `var` that never occurs keeps them as they are).
fn per_item_lines(source: &str, marker: &str, var: &str, items: u32) -> String {
    expand_lines(source, marker, items, |j, l| l.replace(var, &j.to_string()))
}

/// Write each line ending in `marker` out `copies` times, copy j as `copy(j, line)` (without the
/// marker); other lines stay as they are.
fn expand_lines(
    source: &str,
    marker: &str,
    copies: u32,
    copy: impl Fn(u32, &str) -> String,
) -> String {
    let mut out = String::with_capacity(source.len() * 2);
    for line in source.lines() {
        match line.strip_suffix(marker) {
            Some(body) => {
                for j in 0..copies {
                    out.push_str(&copy(j, body));
                    out.push('\n');
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// The compaction family for elements of `words` u32 words.
/// `variant` is kind << 3 | predicate << 1 | keep (see compact.wgsl's constants).
pub fn compact(
    words: u32,
    payload: bool,
    variant: u32,
    subgroups: bool,
    t: &Tuning,
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
        ))
        .collect::<Vec<_>>(),
        &[KEY_ORDER, wgscan, lookback, walk],
    );
    per_round_lines(&source, t.compact_rounds)
}

/// The merged launch (scheduler) for blocks of `cap` words of workgroup memory, with its
/// generated register networks.
pub fn merged(cap: u32, spin_limit: u32) -> String {
    let wg = crate::schedule::workgroup_size(cap);
    let mut s = compose_with(
        MERGED,
        &[("CAP", cap), ("WG", wg), ("SPIN_LIMIT", spin_limit)],
        &[KEY_ORDER, SCAN_OP],
    );
    s.push('\n');
    s.push_str(&crate::schedule::own_networks(cap / wg));
    s.push_str(&crate::schedule::global_networks());
    s
}

/// The bitonic family for records of `nw` planes: the file plus its generated networks.
pub fn bitonic(nw: u32, wg: u32) -> String {
    compose(BITONIC, &[("NW", nw), ("WG", wg)]).replacen(
        "// @generated-networks",
        &crate::bitonic_wgsl::generated(nw),
        1,
    )
}

/// Every (family name, composed source) configuration the library can build, so a test can run
/// each through naga's validator without a GPU.
pub fn all_configurations() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let tuning = Tuning::default();
    for nw in 1..=4 {
        for wg in [64, 128, 256] {
            out.push((format!("bitonic NW={nw} WG={wg}"), bitonic(nw, wg)));
        }
    }
    out.push((
        "bitonic_plain".into(),
        compose(BITONIC_PLAIN, &[("WG", 256)]),
    ));
    out.push((
        "keys".into(),
        compose_with(KEYS, &[("WG", 256)], &[KEY_ORDER]),
    ));
    for sg in [false, true] {
        for op in 0..=8 {
            for inclusive in [false, true] {
                out.push((
                    format!("scan op={op} inclusive={inclusive} subgroups={sg}"),
                    scan(op, 0, inclusive, sg, &tuning, 8),
                ));
            }
        }
        for kind in 0..6u32 {
            let words = if kind >= 3 { 2 } else { 1 };
            for variant in (0..6).map(|pk| kind << 3 | pk) {
                for payload in [false, true] {
                    out.push((
                        format!("compact kind={kind} variant={variant} payload={payload} subgroups={sg}"),
                        compact(words, payload, variant, sg, &tuning, u32::MAX, 32768),
                    ));
                }
            }
        }
    }
    for min_subgroup in [None, Some(8), Some(32)] {
        for kind in 0..6u32 {
            for payload in [false, true] {
                for narrow_ballot in [false, true] {
                    let descending = (kind + payload as u32) % 2 == 1;
                    out.push((
                        format!(
                            "radix kind={kind} descending={descending} payload={payload} min_sg={min_subgroup:?} narrow={narrow_ballot} subgroups={}",
                            min_subgroup.is_some()
                        ),
                        radix(&RadixConfig {
                            items: 16,
                            wg: if min_subgroup.is_some() && payload { 512 } else { 256 },
                            kind,
                            descending,
                            payload,
                            min_subgroup,
                            spin_limit: 4096,
                            max_dim: 65535,
                            window: 16,
                            probe: 0,
                            stable_sweep_groups: if narrow_ballot { 0 } else { 64 },
                            unstable_sweep_groups: 64 * (kind % 2),
                            group_tiles: 8,
                            narrow_ballot,
                            early_counts: payload,
                            hist_chunks: 8,
                            pack: 1 + kind % 2,
                            // the unstable sweep is for keys-only sorts
                            unstable: !payload && narrow_ballot,
                            unstable_items: 12,
                            msd_local_groups: 64,
                            msd_prefetch: kind == 0,
                        }),
                    ));
                }
            }
        }
    }
    for cap in crate::schedule::CAPACITIES {
        out.push((
            format!("merged CAP={cap} subgroups=false"),
            merged(cap, 4096),
        ));
    }
    out.push(("copy".into(), compose(COPY, &[("WG", 256)])));
    out.extend(stencil_configurations());
    out
}

/// Stencil kernels are generated per job: a spread of them (2-D and 3-D, every boundary, narrow
/// and wide, f32 and f64, with and without the on-chip pass).
fn stencil_configurations() -> Vec<(String, String)> {
    use crate::stencil::{self, Boundary, GridShape, Stencil, StencilJob, TileConfig};
    let mut out = Vec::new();
    let boundaries = [
        Boundary::Constant,
        Boundary::Nearest,
        Boundary::Reflect,
        Boundary::Mirror,
        Boundary::Wrap,
    ];
    for boundary in boundaries {
        for (shape, st) in [
            (vec![64, 48], Stencil::star(2, 2)),
            (vec![64, 48], Stencil::boxed(2, 4)),
            (vec![16, 12, 20], Stencil::star(3, 1)),
            (vec![16, 12, 20], Stencil::boxed(3, 2)),
        ] {
            let st = st.expect("valid stencil");
            for dtype in [crate::KeyType::F32, crate::KeyType::F64] {
                let job = StencilJob {
                    shape: GridShape::new(&shape).expect("valid shape"),
                    stencil: st.clone(),
                    boundary,
                    cval: 0.5,
                    steps: 1,
                    dtype,
                };
                let name = format!(
                    "stencil {shape:?} {boundary:?} {dtype} taps={}",
                    job.stencil.taps().len()
                );
                out.push((name.clone(), stencil::source(&job, None)));
                if let Some(t) = TileConfig::choose(&job, 48 << 10) {
                    out.push((
                        format!("{name} on-chip {t:?}"),
                        stencil::source(&job, Some(t)),
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// Every shader configuration parses and validates with naga, with no GPU involved.
    #[test]
    fn every_shader_validates_with_naga() {
        for (name, source) in super::all_configurations() {
            let module = naga::front::wgsl::parse_str(&source)
                .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&source)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                // the workgroup-memory twins must not touch subgroups at all
                if name.contains("subgroups=false") {
                    naga::valid::Capabilities::all()
                        - naga::valid::Capabilities::SUBGROUP
                        - naga::valid::Capabilities::SUBGROUP_BARRIER
                } else {
                    naga::valid::Capabilities::all()
                },
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&source)));
        }
    }

    /// Workgroup bytes a composed kernel declares, as the driver is asked for them.
    fn workgroup_bytes(source: &str) -> u32 {
        let module = naga::front::wgsl::parse_str(source).unwrap();
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        module
            .global_variables
            .iter()
            .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
            .map(|(_, v)| layouter[v.ty].size)
            .sum()
    }

    /// Workgroup bytes each entry point of a composed module uses (the variables it touches, as
    /// wgpu and the driver count them), by name.
    fn entry_workgroup_bytes(source: &str) -> Vec<(String, u32)> {
        let module = naga::front::wgsl::parse_str(source).unwrap();
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .unwrap();
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        let workgroup: Vec<_> = module
            .global_variables
            .iter()
            .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
            .collect();
        module
            .entry_points
            .iter()
            .enumerate()
            .map(|(i, ep)| {
                let used = info.get_entry_point(i);
                let bytes = workgroup
                    .iter()
                    .filter(|(h, _)| !used[*h].is_empty())
                    .map(|(_, v)| layouter[v.ty].size)
                    .sum();
                (ep.name.clone(), bytes)
            })
            .collect()
    }

    /// The radix sweep shape rule's estimate (`radix::other_workgroup_bytes` beside the scratch),
    /// checked against every radix kernel as composed: no entry point declares more, with or
    /// without subgroups, at every workgroup size, stable or unstable, with or without a payload.
    #[test]
    fn radix_workgroup_estimate_covers_the_kernels() {
        for min_subgroup in [None, Some(4), Some(8), Some(32), Some(64)] {
            for wg in [256, 512, 1024] {
                for items in [1, 9, 16] {
                    // kind 3 (u64) for the sweeps; kind 0 (u32) adds the MSD path's kernels
                    for (payload, unstable, kind) in [
                        (false, false, 3),
                        (true, false, 3),
                        (false, true, 3),
                        (false, true, 0),
                    ] {
                        let source = super::radix(&super::RadixConfig {
                            items,
                            wg,
                            kind,
                            descending: false,
                            payload,
                            min_subgroup,
                            spin_limit: 4096,
                            max_dim: 65535,
                            window: 4,
                            probe: 0,
                            stable_sweep_groups: 0,
                            unstable_sweep_groups: 0,
                            group_tiles: 8,
                            narrow_ballot: false,
                            early_counts: true,
                            hist_chunks: 8,
                            pack: 2,
                            unstable,
                            unstable_items: items,
                            msd_local_groups: 0,
                            msd_prefetch: true,
                        });
                        let estimate = crate::radix::scratch_words(items, min_subgroup, wg, 2) * 4
                            + crate::radix::other_workgroup_bytes(wg, min_subgroup.is_some());
                        for (entry, bytes) in entry_workgroup_bytes(&source) {
                            let estimate = match entry.as_str() {
                                "msd_local" | "msd_dense" => {
                                    crate::radix::msd_local_bytes(wg, items, min_subgroup.is_some())
                                }
                                _ => estimate,
                            };
                            assert!(
                                bytes <= estimate,
                                "{entry} sg={min_subgroup:?} wg={wg} items={items} \
                                 payload={payload} unstable={unstable}: {bytes} > {estimate}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The compaction stage rule's promise, checked against the kernels as composed: with the
    /// scan helpers it reserves (`scan::scan_helper_bytes`, a copy of the WGSL arrays' sizes), a
    /// stage smaller than its tile leaves the kernel within half the workgroup storage, so two
    /// workgroups can share an SM.
    #[test]
    fn compaction_stage_fits_in_half_the_workgroup_storage() {
        let t = crate::scan::Tuning::default();
        for storage in [32768, 49152, 65536] {
            for subgroups in [true, false] {
                for (words, payload) in [(1, false), (1, true), (2, false), (2, true)] {
                    let stage = t.compact_stage_size(payload, words, subgroups, storage);
                    let source = super::compact(words, payload, 0, subgroups, &t, 8, storage);
                    let bytes = workgroup_bytes(&source);
                    let name = format!("storage={storage} subgroups={subgroups} words={words}");
                    assert!(stage > 1, "{name}: stage {stage}");
                    if stage < t.compact_tile(payload, words) {
                        assert!(bytes <= storage / 2, "{name}: {bytes} bytes");
                    } else {
                        assert!(bytes <= storage, "{name}: {bytes} bytes");
                    }
                }
            }
        }
    }
}
