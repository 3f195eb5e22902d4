//! The sort's tuning: a plain value, chosen by the caller (or `gpusort tune`), never read from
//! the environment. The defaults are the fastest configuration measured on an H100 and an H200
//! at 2^20..2^28 keys (docs/BENCHMARKS.md); kernels cut them to what a device's limits hold.

use crate::error::{Error, Result};

/// How the sorter's kernels are built and when `Algorithm::Auto` picks which sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct SortTuning {
    /// `Auto` takes the radix sort from this many 32-bit keys on a hardware GPU (below, the
    /// bitonic network is faster).
    pub radix_from: u32,
    /// The same for sorts of 32-bit keys with a payload (argsorts, key-value): the bitonic
    /// network moves the payload at each of its steps, the radix sort at each of its passes.
    pub payload_radix_from: u32,
    /// The same for 64-bit keys (twice the digit passes), with or without a payload.
    pub radix_from_wide: u32,
    /// Segmented sorts take the radix path (a sort by key, then a sort by segment) from
    /// segments of this many keys; smaller segments sort in the bitonic network.
    pub segmented_radix_from: u32,
    /// Keys an invocation holds in a radix sweep of a keys-only sort (1..=64).
    pub items: u32,
    /// The same for sorts with a payload (argsorts, key-value), which hold a payload word too.
    pub payload_items: u32,
    /// Keys an invocation holds in the radix sweeps of a keys-only sort of 64-bit keys (1..=64;
    /// cut to `items`, and the unstable sweep's to `unstable_items`): each holds two words, and
    /// fewer keys keep more workgroups on an SM.
    pub wide_items: u32,
    /// Predecessor tiles the radix look-back reads at once (1..=64).
    pub window: u32,
    /// Reads of a silent predecessor before a tile counts its digits itself (0: always count).
    pub spin_limit: u32,
    /// Whole vec4 ballots even where subgroups have at most 32 lanes (tests of the wide path).
    pub wide_ballot: bool,
    /// Invocations per radix workgroup (256, 384, 512, 768 or 1024: multiples of every subgroup
    /// size from 4 to 128, at least one a digit; CUB's sm90 sweep has 384); None: 512 with
    /// subgroups where the tile fits the device's workgroup memory, else 256.
    pub wg: Option<u32>,
    /// Invocations per radix workgroup of sorts of 64-bit keys with a payload (argsorts,
    /// key-value; one of the sizes `wg` takes), holding `payload_items` keys each, cut to the workgroup
    /// memory; None: 1024 with subgroups where the device allows it and the tile is no smaller
    /// than the shared shape's, else the shared shape (`wg`).
    pub wide_payload_wg: Option<u32>,
    /// Stable keys-only sweep workgroups, each looping over tiles (0: one per tile).
    pub workgroups: u32,
    /// The same for sorts with a payload.
    pub payload_workgroups: u32,
    /// The same for the unstable sweep (first pass of a keys-only sort, the MSD path's top digit).
    pub unstable_workgroups: u32,
    /// Sweeps publish their tile's digit counts before ranking it (subgroup ranking only).
    pub early_counts: bool,
    /// Sweeps count each subgroup's digits before the ballots and rank every key at its place
    /// in the tile in one step (CUB's onesweep order; subgroup ranking only, counts published
    /// early), rather than ranking within each subgroup first and adding its offsets after.
    pub count_first: bool,
    /// Whether the ranking's lanes that add nothing add to spare words of their own rather than
    /// to their digit's counter (subgroup ranking); None: in every sweep but the keys-only one of
    /// 32-bit keys, whose registers it pushes past a line that halves its occupancy on NVIDIA.
    pub spare_lanes: Option<bool>,
    /// Tiles of keys each histogram workgroup reads (1..=64).
    pub hist_chunks: u32,
    /// Digits a word of the subgroup rank tables (1 or 2); None: 1 where the tables fit the
    /// words the tile needs anyway, else 2.
    pub pack: Option<u32>,
    /// Keys-only sorts over every key bit run their lowest pass as an unstable sweep (equal keys
    /// are the same key there, so no order needs keeping).
    pub unstable_first: bool,
    /// Keys an invocation of the unstable sweep holds (1..=64); its tile is also the most keys a
    /// 16-bit bucket of the MSD path may hold.
    pub unstable_items: u32,
    /// Keys-only sorts of 32-bit keys over every bit take the MSD path from this many keys
    /// (u32::MAX: never; 0: always).
    pub msd_from: u32,
    /// f32 keys take the MSD path too (off: their exponents put most keys in a few top-digit
    /// buckets, and the LSD passes measured faster for every key set).
    pub msd_f32: bool,
    /// Workgroups of the MSD path's local sorts, each looping over tiles (0: one a tile).
    pub msd_local_groups: u32,
    /// The MSD local sort loads the next tile's keys while it ranks this one's.
    pub msd_prefetch: bool,
    /// Keys a radix sort beyond one binding keeps in the first binding of each array (None: as
    /// many as one binding holds). Fewer make small sorts take the kernels of large ones (tests);
    /// results are the same either way.
    pub binding_keys: Option<u32>,
    /// Measuring only, results wrong when non-zero: parts of the radix kernels switched off.
    pub probe: u32,
    /// Measuring only, results wrong when non-zero: stop recording after a step (1 histograms,
    /// 2 sweeps, 3 without the MSD local sorts; 10 + k after the MSD path's first k dispatches,
    /// 20 + k after the first k LSD passes).
    pub stop: u32,
}

/// The radix workgroup sizes a tuning may ask for: multiples of every subgroup size (4..128), so
/// no subgroup is partial, and of at least one invocation a digit (256).
const WORKGROUP_SIZES: [u32; 5] = [256, 384, 512, 768, 1024];

impl Default for SortTuning {
    fn default() -> SortTuning {
        SortTuning {
            // where the radix sort overtakes the bitonic network on hardware GPUs (`gpusort tune`
            // measured 2^17 for 32-bit keys on an H100 and an H200; keys-only sorts at 2^17 took
            // 0.61-1.01 of the network's time on uniform, few, small and equal u32 and f32 keys,
            // uniform and few ones 1.04-1.18 at 2^16; 64-bit keys from 2^18-2^19: BENCHMARKS.md)
            radix_from: 1 << 17,
            // argsorts and key-value sorts of 32-bit keys on the radix sort took 0.62-0.87 of the
            // bitonic network's time at 2^16-2^17 on uniform keys, 0.40-0.80 on small and equal
            // ones (H200, 2026-12-01: BENCHMARKS.md); `gpusort tune` measures it
            payload_radix_from: 1 << 16,
            radix_from_wide: 1 << 19,
            // the bitonic network won at every segment size on an H100 (2^8..2^20 of 2^24 keys):
            // the radix path is there when asked for, or when `gpusort tune` finds it faster
            segmented_radix_from: u32::MAX,
            // 512 x 9 keys-only, 512 x 8 with a payload: fastest 2^24..2^28 (BENCHMARKS.md)
            items: 9,
            payload_items: 8,
            // 64-bit keys-only sweeps (stable and unstable): 6 fastest of 3..6 and 9 on an H100;
            // 7 fastest of 4..8 on an H200 (BENCHMARKS.md); `gpusort tune` times 4..9
            wide_items: 7,
            window: 4,
            spin_limit: crate::scan::DEFAULT_SPIN_LIMIT,
            wide_ballot: false,
            wg: None,
            // 1024 x 8 took 0.81-0.92 of 512 x 8's time for 64-bit argsorts at 2^22-2^24 on an
            // H200 (BENCHMARKS.md); `gpusort tune` times both
            wide_payload_wg: None,
            workgroups: 0,
            // looping sweeps pay with a payload (more registers per key), not without
            payload_workgroups: 1024,
            unstable_workgroups: 1024,
            early_counts: true,
            count_first: true,
            spare_lanes: None,
            // 4 tiles a histogram workgroup rather than 8: more workgroups for mid sizes (whole
            // sorts at 2^22 up to 4.5% faster, 2^24-2^26 the same; BENCHMARKS.md); `gpusort
            // tune` measures 2..16
            hist_chunks: 4,
            pack: None,
            unstable_first: true,
            unstable_items: 10,
            // the MSD path wins from 2^24 keys (0.69 against 0.80 ms on an H100)
            msd_from: 1 << 24,
            msd_f32: false,
            // 528 looping workgroups: room for GPUs with twice the H100's SMs
            msd_local_groups: 528,
            msd_prefetch: true,
            binding_keys: None,
            probe: 0,
            stop: 0,
        }
    }
}

/// A workgroup count a dispatch may ask for (0: one per tile).
pub(crate) fn workgroups_ok(v: u32) -> bool {
    v <= 65_535
}

impl SortTuning {
    /// Whether measuring switches (`probe`, `stop`) take parts of the radix sort out, so that
    /// its results are wrong on purpose: such sorts are timed, never checked.
    pub fn measuring(&self) -> bool {
        self.probe != 0 || self.stop != 0
    }

    /// This tuning, or an error naming the first field out of the range the kernels take.
    pub fn checked(self) -> Result<SortTuning> {
        let keys = |v: u32| (1..=64).contains(&v);
        let bad = [
            ("items", keys(self.items)),
            ("payload_items", keys(self.payload_items)),
            ("wide_items", keys(self.wide_items)),
            ("unstable_items", keys(self.unstable_items)),
            ("window", keys(self.window)),
            ("spin_limit", self.spin_limit <= 1 << 24),
            ("wg", self.wg.is_none_or(|w| WORKGROUP_SIZES.contains(&w))),
            (
                "wide_payload_wg",
                self.wide_payload_wg
                    .is_none_or(|w| WORKGROUP_SIZES.contains(&w)),
            ),
            ("workgroups", workgroups_ok(self.workgroups)),
            ("payload_workgroups", workgroups_ok(self.payload_workgroups)),
            (
                "unstable_workgroups",
                workgroups_ok(self.unstable_workgroups),
            ),
            ("hist_chunks", keys(self.hist_chunks)),
            ("pack", self.pack.is_none_or(|p| (1..=2).contains(&p))),
            ("msd_local_groups", workgroups_ok(self.msd_local_groups)),
            ("probe", self.probe < 131072),
            (
                "stop",
                self.stop <= 3
                    || (10..=10 + crate::sort::radix_layout::MSD_STEPS as u32).contains(&self.stop)
                    || (21..=20 + crate::sort::radix_layout::MAX_PASSES).contains(&self.stop),
            ),
        ]
        .into_iter()
        .find(|(_, ok)| !ok);
        match bad {
            Some((field, _)) => Err(Error::InvalidInput(format!(
                "sort tuning: {field} is out of range"
            ))),
            None => Ok(self),
        }
    }
}
