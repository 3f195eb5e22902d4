//! The radix sort's layouts and parameters, which its host code (`sort::radix`), its kernels'
//! generation (`sort::radix_wgsl`), its tuning's checks and its CPU twin (`reference::radix`)
//! share: dispatch-size slots, control and plan words, workgroup scratch, the MSD path's bins.
//! Here so that none of them imports another for it.

/// msd_local's and msd_dense's bins: 1 << MSD_BIN_BITS, so that a tile of 4,608 keys spreads
/// about one key a bin.
pub const MSD_BIN_BITS: u32 = 12;
/// The most keys an msd_local bin ranks by comparisons (each key compared with each of its bin's);
/// a tile with a fuller bin of unequal keys goes to msd_dense's counting sort (a full bin of
/// equal keys is in place already). A tile of such bins costs about what one 16-bit bucket costs
/// msd_dense.
pub const MSD_GROUP_MAX: u32 = 64;

/// Dispatches of the MSD path (RadixKernels::record's steps; `SortTuning::stop` 10 + k records
/// the first k).
pub(crate) const MSD_STEPS: usize = 9;
/// Digit passes one sort can have (64-bit keys, 8 bits a pass).
pub(crate) const MAX_PASSES: u32 = 8;
/// Dispatch-size slots (x, y, z each): a sweep per pass, finish, then an unstable sweep per pass
/// (passed to radix.wgsl as UNSTABLE_ARGS), then the MSD path's six (MSD_ARGS: the top digit's
/// sweep, msd_count, msd_sweep or its fall back's count, msd_local, msd_dense, and the top digit's
/// count relative to the keys' range, MSD_RECOUNT).
pub(crate) const UNSTABLE_ARGS: u64 = MAX_PASSES as u64 + 1;
pub(crate) const MSD_ARGS: u64 = UNSTABLE_ARGS + MAX_PASSES as u64;
pub(crate) const MSD_RECOUNT: u64 = 5;
pub(crate) const ARGS_SLOTS: u64 = MSD_ARGS + 6;
/// Control and plan words: see the C_* and P_* constants of radix.wgsl. The LSD plan's, then the
/// MSD path's (`MSD_WORDS`, passed to the shaders), whose tables of 65,536 words come last.
pub(crate) const CONTROL_WORDS: u64 = 32 + (MAX_PASSES as u64) * 256;
pub(crate) const C_MSD_FLAG: u32 = CONTROL_WORDS as u32;
pub(crate) const C_JOINT: u32 = C_MSD_FLAG + 32;
/// Per top digit (256 words each): whether a workgroup of the MSD path's first count saw two values
/// of it, and the highest value and the complement of the lowest seen where none did.
pub(crate) const C_TOP: u32 = C_JOINT + 256 * 256;
pub(crate) const MSD_CONTROL_WORDS: u64 = C_TOP as u64 + 3 * 256;
pub(crate) const P_TILES: u32 = CONTROL_WORDS as u32 + 16;
pub(crate) const P_START16: u32 = (P_TILES + 257).next_multiple_of(32);
pub(crate) const P_MSD_TILES: u32 = P_START16 + 256 * 256;
pub(crate) const P_DENSE: u32 = P_MSD_TILES + 3 * 256 * 256;
pub(crate) const PLAN_WORDS: u64 = P_DENSE as u64 + 2 * 256 * 256;
pub(crate) const C_DENSE_COUNT: u32 = C_MSD_FLAG + 1;
/// 1 where the MSD path sorted relative to the keys' range (radix.wgsl's choose_msd_range).
pub(crate) const C_MSD_RANGE: u32 = C_MSD_FLAG + 3;
/// Bit p: the LSD plan runs pass p (radix.wgsl's plan_passes; read back for tests), in the words
/// below C_HIST that every sort clears.
pub(crate) const C_LSD_RAN: u32 = 10;
/// The MSD path's control and plan words and constants, as radix.wgsl and radix_msd.wgsl name them
/// (and C_LSD_RAN).
pub(crate) const MSD_WORDS: [(&str, u32); 20] = [
    ("C_LSD_RAN", C_LSD_RAN),
    ("C_TOP_MIXED", C_TOP),
    ("C_TOP_HI", C_TOP + 256),
    ("C_TOP_NLO", C_TOP + 512),
    ("C_MSD_FLAG", C_MSD_FLAG),
    ("C_DENSE_COUNT", C_DENSE_COUNT),
    ("C_TILE_COUNT", C_MSD_FLAG + 2),
    ("C_MSD_RANGE", C_MSD_RANGE),
    // the keys' highest sortable word, and the complement of their lowest (both found by atomic
    // maxima from zero)
    ("C_MSD_HI", C_MSD_FLAG + 4),
    ("C_MSD_NLO", C_MSD_FLAG + 5),
    // the MSD values' lowest sortable word and shift (radix.wgsl's msd_value_of)
    ("P_MSD_LO", CONTROL_WORDS as u32 + 1),
    ("P_MSD_SHIFT", CONTROL_WORDS as u32 + 2),
    ("C_JOINT", C_JOINT),
    ("P_RECOUNT", CONTROL_WORDS as u32),
    ("P_TILES", P_TILES),
    ("P_START16", P_START16),
    ("P_MSD_TILES", P_MSD_TILES),
    ("P_DENSE", P_DENSE),
    ("MSD_BIN_BITS", MSD_BIN_BITS),
    ("MSD_GROUP_MAX", MSD_GROUP_MAX),
];
/// The MSD path's choice (radix.wgsl's choose_msd_range, which this mirrors for the CPU twin and
/// the host's sample): for `n` keys whose sortable words span `lo..=hi`, the shift of the keys'
/// MSD values `(s - lo) << shift` where the path sorts relative to their range, None where it
/// sorts them as they are. Relative where the range leaves leading bits free and the keys, spread
/// evenly over the absolute 16-bit buckets it covers, would fill them past half of msd_local's
/// `tile` (so that some would likely overflow it and the path fall back), and only where every
/// absolute digit varies (the LSD passes would run all four; they skip a top digit the range
/// shares) and keys repeat at most about 8 times a value (msd_local ranks a bin's equal keys by
/// comparisons, which many copies make slower than the LSD passes: docs/BENCHMARKS.md).
pub fn msd_range_shift(lo: u32, hi: u32, n: u64, tile: u32) -> Option<u32> {
    if n == 0 || hi <= lo {
        return None;
    }
    let shift = (hi - lo).leading_zeros().min(24);
    let buckets = (hi >> 16) - (lo >> 16) + 1;
    let crowded = n > buckets as u64 * (tile / 2) as u64;
    let every_digit = lo >> 24 != hi >> 24;
    // at most 8 copies a value: n <= 8 * (the values lo..=hi)
    let few_copies = n <= 8 * ((hi - lo) as u64 + 1);
    (shift > 0 && crowded && every_digit && few_copies).then_some(shift)
}

/// Workgroup words of the sweep's scratch: the sorted tile, the subgroup rank tables (`pack`
/// counters a word, a row per subgroup) and count_digits' histograms share it.
pub(crate) fn scratch_words(items: u32, min_subgroup: Option<u32>, wg: u32, pack: u32) -> u32 {
    // with subgroups, the early digit counts follow the rank tables (radix.wgsl, EARLY_AT), then
    // a spare word for each lane of the largest subgroup (radix_rank_subgroup.wgsl, SPARE_AT)
    let tables = early_counts_at(min_subgroup, wg, pack)
        + if min_subgroup.is_some() {
            256 + MAX_LANES
        } else {
            0
        };
    (wg * items).max(tables).max(MAX_PASSES * 256)
}

/// The most lanes a subgroup has (a ballot is a vec4<u32>).
pub(crate) const MAX_LANES: u32 = 128;

/// Copies of count_digits' histograms (one for each digit pass of keys of `key_words` words) that
/// fit a scratch of `scratch` words: the largest power of two up to 8. Invocations spread their
/// adds over the copies so that lanes with the same digit do not queue on one word.
pub(crate) fn histogram_copies(scratch: u32, key_words: u32) -> u32 {
    let span = key_words * 4 * 256;
    let fit = (scratch / span).clamp(1, 8);
    1 << fit.ilog2()
}

/// Where the early digit counts start in the sweep's scratch: past the subgroup rank tables (a
/// row of 256 / `pack` words per subgroup).
pub(crate) fn early_counts_at(min_subgroup: Option<u32>, wg: u32, pack: u32) -> u32 {
    wg / min_subgroup.unwrap_or(wg) * (256 / pack)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msd_range_shift_takes_crowded_ranges_across_a_top_digit_with_few_copies() {
        // i32 keys in [-2^20, 2^20): sortable words across 0x8000_0000, 21 bits
        let (lo, hi) = (0x7ff0_0000, 0x800f_ffff);
        let tile = 4608;
        // up to 8 copies a value relative (shift 11), beyond that as they are
        assert_eq!(msd_range_shift(lo, hi, 8 << 21, tile), Some(11));
        assert_eq!(msd_range_shift(lo, hi, (8 << 21) + 1, tile), None);
        // too few keys to crowd the 32 absolute 16-bit buckets the range covers
        assert_eq!(msd_range_shift(lo, hi, 32 * 2304, tile), None);
        assert_eq!(msd_range_shift(lo, hi, 32 * 2304 + 1, tile), Some(11));
        // within one top digit (the LSD passes skip it), the whole range, all equal, none
        assert_eq!(
            msd_range_shift(0x1000_0000, 0x101f_ffff, 1 << 22, tile),
            None
        );
        assert_eq!(msd_range_shift(0, u32::MAX, 1 << 26, tile), None);
        assert_eq!(msd_range_shift(7, 7, 1 << 26, tile), None);
        assert_eq!(msd_range_shift(0, 1, 0, tile), None);
        // the shift is the range's free leading bits, at most 24 (the top digit still sorts)
        assert_eq!(
            msd_range_shift(0x00ff_ff00, 0x0100_00ff, 1 << 11, 4),
            Some(23)
        );
        assert_eq!(msd_range_shift(0x00ff_ffc0, 0x0100_003f, 1000, 4), Some(24));
    }

    #[test]
    fn histogram_copies_fit_the_scratch() {
        // the H100's keys-only tile (4,608 words): four copies of 32-bit keys' four histograms,
        // two of 64-bit keys' eight
        assert_eq!(histogram_copies(4608, 1), 4);
        assert_eq!(histogram_copies(4608, 2), 2);
        // the least scratch there is (MAX_PASSES histograms) still holds one copy
        assert_eq!(histogram_copies(MAX_PASSES * 256, 2), 1);
        assert_eq!(histogram_copies(MAX_PASSES * 256, 1), 2);
        // at most eight, and a power of two
        assert_eq!(histogram_copies(1 << 20, 1), 8);
        assert_eq!(histogram_copies(3 * 1024, 1), 2);
        for words in (2048..20_000).step_by(97) {
            for key_words in [1, 2] {
                let c = histogram_copies(words, key_words);
                assert!(c.is_power_of_two() && c * key_words * 1024 <= words);
            }
        }
    }
}
