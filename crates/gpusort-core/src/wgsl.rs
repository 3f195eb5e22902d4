//! The WGSL sources (one file per kernel family under `shaders/`) and how they are composed.
//!
//! A kernel's source is `const NAME: u32 = V;` lines for its configuration, then
//! `shaders/common/grid.wgsl`, then the family's file. Plain constants, not pipeline overrides,
//! because they size workgroup arrays and private register arrays.

pub const COMMON: &str = include_str!("../shaders/common/grid.wgsl");
pub const BITONIC: &str = include_str!("../shaders/bitonic.wgsl");
pub const BITONIC_PLAIN: &str = include_str!("../shaders/bitonic_plain.wgsl");
pub const KEYS: &str = include_str!("../shaders/keys.wgsl");
pub const COPY: &str = include_str!("../shaders/copy.wgsl");
pub const SCAN: &str = include_str!("../shaders/scan.wgsl");
pub const SCAN64: &str = include_str!("../shaders/scan64.wgsl");
pub const SCAN64_CHAINED: &str = include_str!("../shaders/scan64_chained.wgsl");
pub const SCAN64_CHAINED_SUBGROUP: &str = include_str!("../shaders/scan64_chained_subgroup.wgsl");
pub const COMPACT: &str = include_str!("../shaders/compact.wgsl");
pub const KEY_ORDER: &str = include_str!("../shaders/common/keyorder.wgsl");
pub const WGSCAN_SUBGROUP: &str = include_str!("../shaders/common/wgscan_subgroup.wgsl");
pub const WGSCAN_SHARED: &str = include_str!("../shaders/common/wgscan_shared.wgsl");
pub const RADIX: &str = include_str!("../shaders/radix.wgsl");
pub const RADIX_MSD: &str = include_str!("../shaders/radix_msd.wgsl");
pub const STENCIL: &str = include_str!("../shaders/stencil.wgsl");
pub const STENCIL_VEC: &str = include_str!("../shaders/stencil_vec.wgsl");
pub const SCAN_OP: &str = include_str!("../shaders/common/scanop.wgsl");
pub const MERGED: &str = include_str!("../shaders/merged.wgsl");
pub const LOOKBACK: &str = include_str!("../shaders/common/lookback.wgsl");
pub const LOOKBACK_SUBGROUP: &str = include_str!("../shaders/common/lookback_subgroup.wgsl");
pub const LOOKBACK_SHARED: &str = include_str!("../shaders/common/lookback_shared.wgsl");

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

pub const RADIX_RANK_SUBGROUP: &str = include_str!("../shaders/common/radix_rank_subgroup.wgsl");
pub const RADIX_RANK_SHARED: &str = include_str!("../shaders/common/radix_rank_shared.wgsl");

/// Keep the lines ending in `if_true` (marker removed) and drop those ending in `if_false`, or
/// the other way round when `which` is false.
pub(crate) fn choose_lines(source: &str, which: bool, if_true: &str, if_false: &str) -> String {
    let (keep, drop) = if which {
        (if_true, if_false)
    } else {
        (if_false, if_true)
    };
    per_item_lines(&per_item_lines(source, keep, "@NONE", 1), drop, "@NONE", 0)
}

/// Write each line ending in `marker` out `items` times, `var` replaced by the copy's number
/// (0 times drops the lines, once with a `var` that never occurs keeps them as they are).
pub(crate) fn per_item_lines(source: &str, marker: &str, var: &str, items: u32) -> String {
    expand_lines(source, marker, items, |j, l| l.replace(var, &j.to_string()))
}

/// Write each line ending in `marker` out `copies` times, copy j as `copy(j, line)` (without the
/// marker); other lines stay as they are.
pub(crate) fn expand_lines(
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
