//! WGSL generation for the radix sort (shaders/radix.wgsl, shaders/radix_msd.wgsl).

use crate::wgsl::{
    choose_lines, compose_with, per_item_lines, wgscan, KEY_ORDER, RADIX, RADIX_MSD,
    RADIX_RANK_SHARED, RADIX_RANK_SUBGROUP,
};

/// One compiled shape of the radix sort.
pub struct RadixConfig {
    pub items: u32,
    /// Invocations per workgroup: 256, or 512 with subgroups.
    pub wg: u32,
    /// The key type's code (keyorder.wgsl's KIND_*): 64-bit kinds take two words a key.
    pub kind: u32,
    pub descending: bool,
    /// An ascending sort on part of a float's bits: digits take key_encode's NaN (every bit one).
    pub nan_test: bool,
    pub payload: bool,
    /// Smallest subgroup size for the subgroup ranking; None ranks in workgroup memory.
    pub min_subgroup: Option<u32>,
    pub spin_limit: u32,
    pub max_dim: u32,
    /// Predecessor tiles the look-back reads at once.
    pub window: u32,
    /// Measuring only (`SortTuning::probe`): parts switched off, results wrong; 0 otherwise.
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
    /// SortTuning::count_first (subgroup ranking only; counts then published before the ballots).
    pub count_first: bool,
    /// SortTuning::spare_lanes (None: the default rule below).
    pub spare_lanes: Option<bool>,
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
    /// Keys held in the first of two bindings per key and payload array, for jobs beyond one
    /// binding (the rest in bindings 10..=13); None: one binding each.
    pub split: Option<u32>,
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
    let scratch = crate::sort::radix_layout::scratch_words(items, c.min_subgroup, c.wg, c.pack);
    let key_words = if c.kind >= 3 { 2 } else { 1 };
    let early_at = crate::sort::radix_layout::early_counts_at(c.min_subgroup, c.wg, c.pack);
    let mut consts = vec![
        ("WG", c.wg),
        ("ITEMS", items),
        ("UNSTABLE_TILE", c.wg * c.unstable_items),
        ("STABLE_TILE", c.wg * c.items),
        (
            "UNSTABLE_ARGS",
            crate::sort::radix_layout::UNSTABLE_ARGS as u32,
        ),
        ("MSD_ARGS", crate::sort::radix_layout::MSD_ARGS as u32),
        ("MSD_LOCAL_GROUPS", c.msd_local_groups),
        ("KIND", c.kind),
        ("DESCENDING", c.descending as u32),
        ("NAN_TEST", c.nan_test as u32),
        ("KEY_WORDS", key_words),
        ("PAYLOAD", c.payload as u32),
        ("MIN_SG", c.min_subgroup.unwrap_or(256)),
        ("SCRATCH", scratch),
        (
            "HIST_COPIES",
            crate::sort::radix_layout::histogram_copies(scratch, key_words),
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
        ("EARLY", ((c.early_counts || c.count_first) && sg) as u32),
        ("COUNT_FIRST", (c.count_first && sg) as u32),
        ("HIST_CHUNKS", c.hist_chunks),
        ("EARLY_AT", early_at),
        ("SPARE_AT", early_at + 256),
        // idle lanes of the ranking add to spare words, except in the stable keys-only sweep of
        // 32-bit keys: it sits at NVIDIA's 64-register line (two workgroups an SM), which the
        // select crosses (docs/BENCHMARKS.md)
        (
            "SPARE",
            c.spare_lanes.unwrap_or(c.payload || key_words == 2) as u32,
        ),
        ("PACK", c.pack),
        // this module holds the MSD path's kernels (its top digit's sweep is this sweep)
        ("MSD_MODULE", (c.unstable && c.kind < 3) as u32),
    ];
    consts.extend(crate::sort::radix_layout::MSD_WORDS);
    let family = format!(
        "{}\n{}\n{family}",
        key_word_type(key_words),
        element_access(c.split)
    );
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

/// How radix.wgsl's kernels reach element `e` of the keys, the payload and their alternates:
/// one binding each, or (`split`: keys in the first binding) two, the second at bindings 10..=13
/// holding the rest, so that a job may exceed one binding (a caller's buffer up to the device's
/// buffer size). The one-binding form is the code the kernels had before, branch for branch.
fn element_access(split: Option<u32>) -> String {
    // one binding's access to `array` (its alternate `array_alt`) at index `at`
    let load = |array: &str, at: &str| {
        format!("if (alt) {{ return {array}_alt[{at}]; }}\n    return {array}[{at}];")
    };
    let store = |array: &str, at: &str| {
        format!("if (alt) {{ {array}_alt[{at}] = v; }} else {{ {array}[{at}] = v; }}")
    };
    let mut source = String::new();
    if let Some(part) = split {
        source += &format!("const PART: u32 = {part}u;\n");
        for (binding, array, ty) in [
            (10, "keys_rest", "KeyWord"),
            (11, "keys_rest_alt", "KeyWord"),
            (12, "payload_rest", "u32"),
            (13, "payload_rest_alt", "u32"),
        ] {
            source += &format!(
                "@group(0) @binding({binding}) var<storage, read_write> {array}: array<{ty}>;\n"
            );
        }
    }
    for (get, set, array, ty) in [
        ("key_word_at", "set_key_word", "keys", "KeyWord"),
        ("payload_at", "set_payload", "payload", "u32"),
    ] {
        let rest = format!("{array}_rest");
        let (get_body, set_body) = match split {
            None => (load(array, "e"), store(array, "e")),
            Some(_) => (
                format!(
                    "if (e < PART) {{\n    {}\n    }}\n    {}",
                    load(array, "e"),
                    load(&rest, "e - PART")
                ),
                format!(
                    "if (e < PART) {{\n    {}\n    return;\n    }}\n    {}",
                    store(array, "e"),
                    store(&rest, "e - PART")
                ),
            ),
        };
        source += &format!(
            "fn {get}(e: u32, alt: bool) -> {ty} {{\n    {get_body}\n}}\n\
             fn {set}(e: u32, alt: bool, v: {ty}) {{\n    {set_body}\n}}\n"
        );
    }
    source
}

/// How radix.wgsl's kernels hold a key in memory (`KeyWord`) and turn it into the (high, low)
/// words they work on and back: 64-bit keys as one vec2<u32>, so that each key is one 8-byte
/// load or store rather than two 4-byte ones at a stride of 8 bytes.
fn key_word_type(key_words: u32) -> &'static str {
    match key_words {
        1 => concat!(
            "alias KeyWord = u32;\n",
            "fn key_of_word(w: KeyWord) -> vec2<u32> { return vec2<u32>(w, 0u); }\n",
            "fn word_of_key(k: vec2<u32>) -> KeyWord { return k.x; }\n",
        ),
        _ => concat!(
            "alias KeyWord = vec2<u32>;\n",
            "fn key_of_word(w: KeyWord) -> vec2<u32> { return w.yx; }\n",
            "fn word_of_key(k: vec2<u32>) -> KeyWord { return k.yx; }\n",
        ),
    }
}
