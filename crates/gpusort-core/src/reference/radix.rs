//! CPU twin of shaders/radix.wgsl: the same digit passes (bits of the sortable key, a key-bit
//! range, 8 bits a pass), the same rule for skipping a pass (one digit holds every key) and for
//! running one anyway (nothing would run but there are keys), each pass a stable counting sort;
//! signed keys of a narrow width sorted on the passes that width needs ([`narrow_passes`]); and
//! [`msd_sort`], the twin of the keys-only MSD path (radix_msd.wgsl).

use std::ops::Range;

pub use crate::keys::order::{key_on_bits, sortable_bits};
use crate::keys::{KeyType, SortKey};

/// The digit passes over sortable bits `bits` (least significant first): (shift, width).
pub fn passes(bits: Range<u32>) -> Vec<(u32, u32)> {
    bits.clone()
        .step_by(8)
        .map(|shift| (shift, (bits.end - shift).min(8)))
        .collect()
}

fn digit(v: u64, (shift, width): (u32, u32)) -> usize {
    ((v >> shift) & ((1u64 << width) - 1)) as usize
}

/// The digit passes signed keys of `key_type` need where every key fits in fewer bits than the
/// type as a two's-complement number (radix.wgsl's narrow_passes: the sign bit and the bits
/// above a key's width are equal, so the sortable words' upper digits tell only the sign), given
/// their `sortable` words; `all` (the type's passes) for other types and wider keys. The last pass
/// needed then takes its digit with the top bit flipped (the narrow number's sign).
pub fn narrow_passes(key_type: KeyType, sortable: &[u64], all: usize) -> usize {
    if !matches!(key_type, KeyType::I32 | KeyType::I64) {
        return all;
    }
    let width = 8 * key_type.size() as u32;
    let sign = 1u64 << (width - 1);
    let mask = u64::MAX >> (64 - width);
    // bits that differ from the value's sign, over every key
    let differ = sortable.iter().fold(0u64, |acc, &v| {
        let y = v ^ sign;
        acc | if y & sign != 0 { !y & mask } else { y }
    });
    let bits = 64 - differ.leading_zeros() as usize;
    ((bits + 8) / 8).min(all)
}

/// The permutation the GPU passes produce, and which passes ran.
pub fn argsort<T: SortKey>(
    keys: &[T],
    descending: bool,
    bits: Range<u32>,
) -> (Vec<u32>, Vec<bool>) {
    let values: Vec<u64> = keys.iter().map(|k| sortable_bits(k, descending)).collect();
    let whole = bits == (0..8 * T::TYPE.size() as u32);
    let mut passes = passes(bits);
    let all = passes.len();
    let needed = match whole {
        true => narrow_passes(T::TYPE, &values, all),
        false => all,
    };
    let n = keys.len();
    // the passes above the narrow width are skipped; the top one that runs flips its digit's
    // top bit (the narrow number's sign)
    passes.truncate(needed);
    let flip_at = (needed < all).then(|| needed - 1);
    let digit_of =
        |v: u64, i: usize, p: (u32, u32)| digit(v, p) ^ if Some(i) == flip_at { 0x80 } else { 0 };
    let mut ran: Vec<bool> = passes
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let mut hist = [0usize; 256];
            for &v in &values {
                hist[digit_of(v, i, p)] += 1;
            }
            !hist.contains(&n)
        })
        .collect();
    if n > 0 && !ran.iter().any(|&r| r) {
        if let Some(r) = ran.first_mut() {
            *r = true;
        }
    }
    let mut perm: Vec<u32> = (0..n as u32).collect();
    for (i, (&p, _)) in passes.iter().zip(&ran).enumerate().filter(|(_, (_, &r))| r) {
        let mut starts = [0usize; 256];
        for &k in &perm {
            starts[digit_of(values[k as usize], i, p)] += 1;
        }
        let mut acc = 0;
        for s in starts.iter_mut() {
            let c = *s;
            *s = acc;
            acc += c;
        }
        let mut next = vec![0u32; n];
        for &k in &perm {
            let d = digit_of(values[k as usize], i, p);
            next[starts[d]] = k;
            starts[d] += 1;
        }
        perm = next;
    }
    ran.resize(all, false); // the passes above the narrow width, skipped
    (perm, ran)
}

/// What [`msd_sort`] made: the sorted values, how many 16-bit buckets took msd_dense, and whether
/// it sorted relative to the values' range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MsdSorted {
    pub values: Vec<u32>,
    pub dense_buckets: u32,
    pub ranged: bool,
}

/// CPU twin of the radix sort's keys-only MSD path (radix_msd.wgsl) on sortable 32-bit values:
/// the top digit's pass and the next digit's pass per top-digit bucket (together a counting sort
/// by the top 16 bits), then msd_scan's tiles of consecutive 16-bit buckets, each sorted as
/// msd_local does (bins, then comparisons inside each bin) or, where a bin holds more than
/// `MSD_GROUP_MAX` keys that are not all equal, bucket by bucket as msd_dense does. None where a 16-bit bucket holds
/// more than `tile` keys: the GPU falls back to the LSD passes there. Where prepare would sort
/// relative to the values' range (`radix_layout::msd_range_shift`), all of it runs on the MSD
/// values `(v - lowest) << shift`, which go back to the values at the end.
pub fn msd_sort(values: &[u32], tile: usize) -> Option<MsdSorted> {
    use crate::sort::radix_layout::msd_range_shift;
    let lo = values.iter().copied().min().unwrap_or(0);
    let hi = values.iter().copied().max().unwrap_or(0);
    match msd_range_shift(lo, hi, values.len() as u64, tile as u32) {
        None => msd_sort_values(values, tile, false),
        Some(shift) => {
            let msd: Vec<u32> = values.iter().map(|&v| (v - lo) << shift).collect();
            let mut sorted = msd_sort_values(&msd, tile, true)?;
            for v in &mut sorted.values {
                *v = (*v >> shift) + lo;
            }
            sorted.ranged = true;
            Some(sorted)
        }
    }
}

/// [`msd_sort`] on the values as they are, or (`ranged`) on their MSD values.
fn msd_sort_values(values: &[u32], tile: usize, ranged: bool) -> Option<MsdSorted> {
    use crate::sort::radix_layout::MSD_BIN_BITS;
    // top-digit buckets of one value alone, not every key (radix.wgsl's top_single): sorted once
    // the top digit's pass has run, so none of them is listed however full. (The GPU finds such
    // a bucket only where its value crowds the first chunk of each count workgroup holding it, so
    // it may find fewer, never more: the tests' few-value sets crowd every chunk.)
    let mut tops = [(u32::MAX, 0u32, 0usize); 256];
    for &v in values {
        let t = &mut tops[(v >> 24) as usize];
        *t = (t.0.min(v), t.1.max(v), t.2 + 1);
    }
    let single = |top: usize| {
        let (lo, hi, c) = tops[top];
        !ranged && c > 0 && c < values.len() && lo == hi
    };
    // the two digit passes: a counting sort by the top 16 bits
    let mut counts = vec![0usize; 1 << 16];
    for &v in values {
        counts[(v >> 16) as usize] += 1;
    }
    if counts
        .iter()
        .enumerate()
        .any(|(b, &c)| c > tile && !single(b >> 8))
    {
        return None;
    }
    let mut starts = vec![0usize; (1 << 16) + 1];
    for b in 0..1 << 16 {
        starts[b + 1] = starts[b] + counts[b];
    }
    let mut out = vec![0u32; values.len()];
    let mut next = starts.clone();
    for &v in values {
        let b = (v >> 16) as usize;
        out[next[b]] = v;
        next[b] += 1;
    }
    // msd_scan's tiles: in each top-digit bucket, runs of consecutive 16-bit buckets as long as
    // `tile` keys and MSD_SPAN buckets allow; those of two keys or more are sorted
    let span_max = (1usize << MSD_BIN_BITS) / 256;
    let mut dense_buckets = 0;
    for top in (0..256).filter(|&t| !single(t)) {
        let mut first = 0;
        while first < 256 {
            let mut end = first;
            let mut total = 0;
            while end < 256
                && (end == first
                    || (end - first < span_max && total + counts[top * 256 + end] <= tile))
            {
                total += counts[top * 256 + end];
                end += 1;
            }
            let (b0, b1) = (top * 256 + first, top * 256 + end);
            if total >= 2 && !local_sort(&mut out[starts[b0]..starts[b1]], b0 as u32, end - first) {
                // msd_dense, a bucket at a time
                for b in b0..b1 {
                    if counts[b] >= 2 {
                        dense_sort(&mut out[starts[b]..starts[b + 1]]);
                        dense_buckets += 1;
                    }
                }
            }
            first = end;
        }
    }
    Some(MsdSorted {
        values: out,
        dense_buckets,
        ranged: false,
    })
}

/// msd_local on one tile of `span` 16-bit buckets from bucket `first16`: false (tile untouched)
/// where a bin holds more than MSD_GROUP_MAX keys that are not all equal.
fn local_sort(tile: &mut [u32], first16: u32, span: usize) -> bool {
    use crate::sort::radix_layout::{MSD_BIN_BITS, MSD_GROUP_MAX};
    let value = |v: u32| (((v >> 16) - first16) << 16) | (v & 0xffff);
    let shift = 16 - MSD_BIN_BITS + (span as u32 - 1).checked_ilog2().map_or(0, |l| l + 1);
    let mut bins = vec![0usize; 1 << MSD_BIN_BITS];
    for &v in tile.iter() {
        bins[(value(v) >> shift) as usize] += 1;
    }
    let big = |c: usize| c > MSD_GROUP_MAX as usize;
    // (first place, keys) of each bin; each key goes to its bin's next place
    let mut acc = 0;
    let groups: Vec<(usize, usize)> = bins
        .iter()
        .map(|&c| {
            acc += c;
            (acc - c, c)
        })
        .collect();
    let mut next: Vec<usize> = groups.iter().map(|g| g.0).collect();
    let mut binned = vec![0u32; tile.len()];
    for &v in tile.iter() {
        let at = &mut next[(value(v) >> shift) as usize];
        binned[*at] = v;
        *at += 1;
    }
    // a bin of more than MSD_GROUP_MAX keys must hold equal keys (in place already), else the
    // tile is dense
    let mixed = groups
        .iter()
        .any(|&(g0, g)| big(g) && binned[g0..g0 + g].iter().any(|&v| v != binned[g0]));
    if mixed {
        return false;
    }
    // each place's key ranked among its bin's by comparisons, equal keys by place
    for (p, &v) in binned.iter().enumerate() {
        let (g0, g) = groups[(value(v) >> shift) as usize];
        let below = match big(g) {
            true => p - g0,
            false => (g0..g0 + g)
                .filter(|&q| value(binned[q]) < value(v) || (binned[q] == v && q < p))
                .count(),
        };
        tile[g0 + below] = v;
    }
    true
}

/// msd_dense on one 16-bit bucket: a counting sort of the low 16 bits (4,096 bins of their top
/// 12, a mask of the 16 low values in each, the distinct (bin, value) pairs numbered from the
/// bin's first place), whatever the duplicates.
fn dense_sort(bucket: &mut [u32]) {
    // bins: (count of keys, mask of low values), then the count becomes the first place
    let mut bins = vec![(0usize, 0u16); 4096];
    for &v in bucket.iter() {
        let u = v & 0xffff;
        let bin = &mut bins[(u >> 4) as usize];
        bin.0 += 1;
        bin.1 |= 1 << (u & 15);
    }
    let mut acc = 0;
    for bin in bins.iter_mut() {
        let c = bin.0;
        bin.0 = acc;
        acc += c;
    }
    // each key counts its (bin, value) pair, numbered from the bin's first place
    let below = |mask: u16, u: u32| (mask & ((1u32 << (u & 15)) - 1) as u16).count_ones();
    let mut pairs = vec![0usize; bucket.len()];
    let mut slots = Vec::with_capacity(bucket.len());
    for &v in bucket.iter() {
        let u = v & 0xffff;
        let (first, mask) = bins[(u >> 4) as usize];
        let pair = first + below(mask, u) as usize;
        slots.push((first, pair, pairs[pair])); // its slot among equal keys
        pairs[pair] += 1;
    }
    let mut sorted = vec![0u32; bucket.len()];
    for (&v, (first, pair, slot)) in bucket.iter().zip(slots) {
        sorted[first + pairs[first..pair].iter().sum::<usize>() + slot] = v;
    }
    bucket.copy_from_slice(&sorted);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::SortOrder;

    #[test]
    fn full_range_is_the_stable_reference_sort() {
        let keys: Vec<f32> = vec![
            3.0,
            -0.0,
            0.0,
            f32::NAN,
            -1.5,
            f32::INFINITY,
            3.0,
            -f32::INFINITY,
        ];
        for descending in [false, true] {
            let order = SortOrder {
                descending,
                segment_size: None,
            };
            let (perm, ran) = argsort(&keys, descending, 0..32);
            assert_eq!(perm, crate::reference::keys::argsort(&keys, order));
            assert_eq!(ran.len(), 4);
        }
    }

    #[test]
    fn msd_sort_sorts_or_falls_back() {
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 16) as u32
        };
        let random: Vec<u32> = (0..50_000).map(|_| next()).collect();
        // duplicates in every bin, and bins holding several low values
        let dups: Vec<u32> = (0..50_000).map(|i| 0x1234_0000 | ((i % 97) * 3)).collect();
        // tiles of several buckets, one bucket of them dense
        let mixed: Vec<u32> = (0..50_000u32)
            .map(|i| match i % 25 {
                0 => 0x5555_0000 | (i % 7),
                _ => next(),
            })
            .collect();
        for (keys, tile, dense) in [
            (random.clone(), 4608, false),
            (random[..3000].to_vec(), 4608, false),
            (dups[..4608].to_vec(), 4608, true),
            (mixed, 4608, true),
            (vec![7; 5], 8, false),
            // a full bin of equal keys is in place; of two values, dense
            (vec![7; 65], 65, false),
            ([vec![7; 40], vec![9; 25]].concat(), 65, true),
        ] {
            let mut want = keys.clone();
            want.sort_unstable();
            let got = msd_sort(&keys, tile).unwrap();
            assert_eq!(got.values, want);
            // a bin of more than MSD_GROUP_MAX keys sends its tile to msd_dense
            assert_eq!(got.dense_buckets > 0, dense);
        }
        // one 16-bit bucket of more than a tile: the GPU falls back to the LSD passes
        assert_eq!(msd_sort(&dups, 4608), None);
        assert_eq!(msd_sort(&[], 1).unwrap().values, Vec::<u32>::new());
    }

    #[test]
    fn msd_sort_relative_to_the_range() {
        let mut x = 777u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 16) as u32
        };
        // timestamps: a year of seconds, over 482 absolute 16-bit buckets of about 104 keys each,
        // more than a tile of 64; relative to the range, 65,536 buckets of about one
        let stamps: Vec<u32> = (0..50_000)
            .map(|_| 1_700_000_000 + next() % 31_536_000)
            .collect();
        // small signed keys about zero (sortable words either side of 2^31): two buckets
        let signed: Vec<u32> = (0..5000).map(|_| 0x7fff_f000 + next() % 0x2000).collect();
        for (keys, tile) in [(stamps.clone(), 64), (signed, 64)] {
            let mut want = keys.clone();
            want.sort_unstable();
            let got = msd_sort(&keys, tile).unwrap();
            assert!(got.ranged);
            assert_eq!(got.values, want);
        }
        // with tiles large enough, as they are
        assert!(!msd_sort(&stamps, 4608).unwrap().ranged);
        // relative, but one value fills a 16-bit bucket past a tile: the GPU falls back
        let crowded: Vec<u32> = (0..50_000u32)
            .map(|i| if i == 0 { 0x1100_0000 } else { 0x1000_0000 })
            .collect();
        assert_eq!(msd_sort(&crowded, 64), None);
    }

    #[test]
    fn msd_sort_of_few_values() {
        // each value its own top digit: each top-digit bucket one value however full, sorted
        let few: Vec<u32> = (0..5000u32)
            .map(|i| [0x0311_0000, 0x9c12_3456, 7][i as usize % 3])
            .collect();
        let mut want = few.clone();
        want.sort_unstable();
        let got = msd_sort(&few, 64).unwrap();
        assert_eq!((got.values, got.dense_buckets), (want, 0));
        // two values of one top digit: 16-bit buckets past a tile, the GPU falls back
        let two: Vec<u32> = (0..5000u32)
            .map(|i| [0x4a00_0007, 0x4a77_0000][i as usize % 2])
            .collect();
        assert_eq!(msd_sort(&two, 64), None);
        // one value is every key: the LSD passes (prepare's choice), as before
        assert_eq!(msd_sort(&[5; 100], 64), None);
    }

    #[test]
    fn narrow_signed_keys() {
        let sortable =
            |v: &[i64]| -> Vec<u64> { v.iter().map(|&x| (x as u64) ^ (1 << 63)).collect() };
        // -128..=127 fit one pass, -129 and 128 need two; the type's passes at most
        assert_eq!(
            narrow_passes(KeyType::I64, &sortable(&[-128, 127, 0]), 8),
            1
        );
        assert_eq!(narrow_passes(KeyType::I64, &sortable(&[-129, 5]), 8), 2);
        assert_eq!(narrow_passes(KeyType::I64, &sortable(&[128]), 8), 2);
        assert_eq!(
            narrow_passes(KeyType::I64, &sortable(&[-(1 << 20), 1 << 20]), 8),
            3
        );
        assert_eq!(narrow_passes(KeyType::I64, &sortable(&[i64::MIN]), 8), 8);
        assert_eq!(narrow_passes(KeyType::I64, &sortable(&[-1, 0]), 8), 1);
        assert_eq!(narrow_passes(KeyType::I64, &[], 8), 1);
        // descending words (every bit inverted) need the same
        let inverted: Vec<u64> = sortable(&[-300, 200]).iter().map(|v| !v).collect();
        assert_eq!(narrow_passes(KeyType::I64, &inverted, 8), 2);
        let i32s = |v: &[i32]| -> Vec<u64> {
            v.iter().map(|&x| ((x as u32) ^ (1 << 31)) as u64).collect()
        };
        assert_eq!(narrow_passes(KeyType::I32, &i32s(&[-(1 << 20), 7]), 4), 3);
        assert_eq!(narrow_passes(KeyType::I32, &i32s(&[i32::MAX]), 4), 4);
        // other types keep every pass
        assert_eq!(narrow_passes(KeyType::U32, &[3], 4), 4);
        assert_eq!(narrow_passes(KeyType::F64, &[3], 8), 8);
        // and the passes run: i32 keys of +-1000 take two, the second on the flipped digit
        let keys = [-1000i32, 999, -1, 0, 5, -5, 1000 - 1];
        let (perm, ran) = argsort(&keys, false, 0..32);
        assert_eq!(ran, vec![true, true, false, false]);
        let sorted: Vec<i32> = perm.iter().map(|&i| keys[i as usize]).collect();
        assert_eq!(sorted, vec![-1000, -5, -1, 0, 5, 999, 999]);
    }

    #[test]
    fn passes_skip_and_ranges() {
        assert_eq!(passes(0..32), vec![(0, 8), (8, 8), (16, 8), (24, 8)]);
        assert_eq!(passes(4..21), vec![(4, 8), (12, 8), (20, 1)]);
        // keys that differ only in the lowest digit: the three upper passes are skipped
        let keys: Vec<u32> = (0..300u32).map(|i| 0xabcd_ef00 | (i * 7 % 256)).collect();
        let (perm, ran) = argsort(&keys, false, 0..32);
        assert_eq!(ran, vec![true, false, false, false]);
        let sorted: Vec<u32> = perm.iter().map(|&i| keys[i as usize]).collect();
        assert!(sorted.is_sorted());
        // all keys equal: one pass still runs (identity)
        let (perm, ran) = argsort(&[5u64; 10], false, 0..64);
        assert_eq!(ran.iter().filter(|&&r| r).count(), 1);
        assert_eq!(perm, (0..10).collect::<Vec<u32>>());
        // a range: only bits 8..16 count, ties keep their order
        let keys = [0x0201u32, 0x0102, 0x0203, 0x0104];
        let (perm, _) = argsort(&keys, false, 8..16);
        assert_eq!(perm, vec![1, 3, 0, 2]);
    }
}
