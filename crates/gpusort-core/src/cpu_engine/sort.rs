//! Sorts on the CPU: every key is turned into its sortable word (`reference::keys::encode`: NaNs
//! one largest value, signs and descending order folded into the bits), the words are sorted by
//! a parallel MSD-then-LSD radix sort over the bits that vary (see `radix_sort`), and the keys
//! come back decoded (keys only) or gathered through the permutation (with values or an
//! argsort). Stable throughout, so ties keep their input order.

use std::ops::Range;

use rayon::prelude::*;

use super::{chunk_len, SEQUENTIAL_BELOW};
use crate::cancel::Stop;
use crate::keys::order::{canonical, decode, encode_key, from_words, key_on_bits, sortable};
use crate::keys::{KeyType, SortKey, SortOrder};
use crate::Result;

/// A sortable word: u32 for 32-bit keys and ranges of up to 32 bits, u64 otherwise.
trait Word: Copy + Default + Ord + Send + Sync {
    /// The digit of `mask`'s width at `shift`.
    fn digit(self, shift: u32, mask: usize) -> usize;
    fn bits(self) -> u64;
    fn from_bits(bits: u64) -> Self;
}

impl Word for u32 {
    fn digit(self, shift: u32, mask: usize) -> usize {
        (self >> shift) as usize & mask
    }
    fn bits(self) -> u64 {
        self as u64
    }
    fn from_bits(bits: u64) -> Self {
        bits as u32
    }
}

impl Word for u64 {
    fn digit(self, shift: u32, mask: usize) -> usize {
        (self >> shift) as usize & mask
    }
    fn bits(self) -> u64 {
        self
    }
    fn from_bits(bits: u64) -> Self {
        bits
    }
}

/// A pointer that scatter threads share; each writes only the slots its offsets own.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: used only in `radix_sort`, where every index is written by exactly one thread.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// # Safety
    /// `i` is in bounds of the buffer, and no other thread writes or reads slot `i` meanwhile.
    unsafe fn write(&self, i: usize, v: T) {
        // SAFETY: the caller's promise.
        unsafe { *self.0.add(i) = v };
    }
}

/// Keys a bucket may hold for its last bits to be sorted by LSD passes of its own: about a
/// core's L2 cache with the spare buffer and a payload (8 + 4 bytes a key, twice).
const BUCKET_KEYS: usize = 1 << 16;

/// Bits of varying low digits up to which a keys-only sort counts each value instead of
/// moving keys: a histogram of 2^16 counters stays in cache.
const COUNTING_BITS: u32 = 16;

/// Sort `keys` (the low `bits` bits matter) stably in place, carrying `payload` along.
///
/// MSD first: the 8 bits below the highest bit that varies split the keys into buckets in one
/// stable counting pass into a spare buffer (in parallel chunks), and each bucket still larger
/// than [`BUCKET_KEYS`] is split again by its next 8 bits, until each bucket, small enough for a
/// core's cache, is sorted by LSD passes of up to 12-bit digits over its remaining bits on its
/// own thread. Clustered keys (floats of a few exponents, timestamps with a common high part,
/// small integers) thus cost passes over their varying bits only, never the 8 passes of a
/// 64-bit LSD sort over the whole array. Digits the same in every key of a bucket are skipped;
/// keys-only sorts of at most [`COUNTING_BITS`] varying bits count values instead.
/// Once `stop` is requested no further bucket is split or sorted (the caller drops the result).
fn radix_sort<W: Word>(keys: &mut [W], payload: Option<&mut [u32]>, bits: u32, stop: &Stop) {
    let walk = Walk {
        fit: BUCKET_KEYS,
        stop: stop.clone(),
    };
    msd_sort(keys, payload, bits, &walk)
}

/// How the MSD sort walks its buckets: those of up to `fit` keys are sorted on their own (tests
/// force deep recursion with a small one), and none is started once `stop` is requested.
struct Walk {
    fit: usize,
    stop: Stop,
}

/// [`radix_sort`] with the walk given.
fn msd_sort<W: Word>(keys: &mut [W], payload: Option<&mut [u32]>, bits: u32, walk: &Walk) {
    let n = keys.len();
    if n < SEQUENTIAL_BELOW {
        match payload {
            None => keys.sort_unstable(), // equal words are equal keys: order cannot show
            Some(p) => {
                let mut pairs: Vec<(W, u32)> =
                    keys.iter().copied().zip(p.iter().copied()).collect();
                pairs.sort_by_key(|&(w, _)| w); // stable
                for ((k, v), (wk, pv)) in pairs.into_iter().zip(keys.iter_mut().zip(p.iter_mut())) {
                    (*wk, *pv) = (k, v);
                }
            }
        }
        return;
    }
    // ordered input costs one read: in order already, or strictly the reverse (no ties, so
    // reversing keeps a stable order)
    if keys.par_windows(2).all(|w| w[0] <= w[1]) {
        return;
    }
    if keys.par_windows(2).all(|w| w[0] > w[1]) {
        keys.reverse();
        if let Some(p) = payload {
            p.reverse();
        }
        return;
    }
    if walk.stop.requested() {
        return;
    }
    let varying = varying_bits(keys).min(bits);
    if payload.is_none() && varying <= COUNTING_BITS {
        counting_sort(keys, varying);
        return;
    }
    let mut spare = vec![W::default(); n];
    let mut spare_payload = payload.as_ref().map(|_| vec![0u32; n]);
    msd(
        keys,
        &mut spare,
        payload,
        spare_payload.as_deref_mut(),
        varying,
        true,
        walk,
    );
}

/// The number of low bits in which some key differs from the first (0: all equal).
fn varying_bits<W: Word>(keys: &[W]) -> u32 {
    let Some(&first) = keys.first() else {
        return 0;
    };
    let diff = keys
        .par_chunks(chunk_len(keys.len()))
        .map(|c| c.iter().fold(0u64, |acc, &w| acc | w.bits() ^ first.bits()))
        .reduce(|| 0, |a, b| a | b);
    64 - diff.leading_zeros()
}

/// A keys-only sort of keys that differ in their low `bits` bits only (at most
/// [`COUNTING_BITS`]): count each value, then write each value as often as it came. Equal
/// words are equal keys, so no order of ties can show.
fn counting_sort<W: Word>(keys: &mut [W], bits: u32) {
    let high = keys[0].bits() & !((1u64 << bits) - 1);
    let mask = (1usize << bits) - 1;
    let counts = keys
        .par_chunks(chunk_len(keys.len()))
        .map(|c| {
            let mut h = vec![0usize; mask + 1];
            for &w in c {
                h[w.bits() as usize & mask] += 1;
            }
            h
        })
        .reduce(
            || vec![0usize; mask + 1],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            },
        );
    // where each value's run starts; each thread fills a piece of the output from the run it
    // starts in
    let mut runs: Vec<(usize, W)> = Vec::new();
    let mut at = 0;
    for (v, &c) in counts.iter().enumerate() {
        if c > 0 {
            runs.push((at, W::from_bits(high | v as u64)));
            at += c;
        }
    }
    let n = keys.len();
    let piece = chunk_len(n);
    keys.par_chunks_mut(piece).enumerate().for_each(|(c, out)| {
        let base = c * piece;
        let mut r = runs.partition_point(|&(start, _)| start <= base) - 1;
        let mut at = 0;
        while at < out.len() {
            let end = runs.get(r + 1).map_or(n, |&(start, _)| start);
            let stop = (end - base).min(out.len());
            out[at..stop].fill(runs[r].1);
            (at, r) = (stop, r + 1);
        }
    });
}

/// Sort `a` (and `pa`) stably on their low `bits` bits, with `b` (and `pb`) as the spare; the
/// result lands in `a` if `into_a`, else in `b`.
fn msd<W: Word>(
    a: &mut [W],
    b: &mut [W],
    pa: Option<&mut [u32]>,
    mut pb: Option<&mut [u32]>,
    mut bits: u32,
    into_a: bool,
    walk: &Walk,
) {
    if walk.stop.requested() {
        return;
    }
    let n = a.len();
    if n <= walk.fit || bits <= 12 {
        sort_bucket(a, b, pa, pb, bits, !into_a);
        return;
    }
    // the highest 8 bits that vary in this bucket
    let chunk = if n >= 1 << 20 { chunk_len(n) } else { n };
    let (top, counts) = loop {
        if bits == 0 {
            // every key the same: already in order
            if !into_a {
                b.copy_from_slice(a);
                if let (Some(p), Some(q)) = (pa, pb) {
                    q.copy_from_slice(p);
                }
            }
            return;
        }
        let top = bits.saturating_sub(8);
        let counts = chunk_counts(a, top, 0xff, chunk);
        if !total(&counts.counts).contains(&n) {
            break (top, counts);
        }
        bits = top;
    };
    let buckets = total(&counts.counts);
    scatter(
        a,
        b,
        pa.as_deref(),
        pb.as_deref_mut(),
        top,
        counts,
        &walk.stop,
    );
    // each bucket sorted on its lower bits, from `b` now, landing where this call's result goes
    let mut jobs = Vec::with_capacity(256);
    {
        let (mut w, mut t) = (b, a);
        let (mut p, mut q) = (pb, pa);
        for &c in buckets.iter() {
            let (wb, wr) = w.split_at_mut(c);
            let (tb, tr) = t.split_at_mut(c);
            let (pbk, pr) = split_opt(p, c);
            let (qbk, qr) = split_opt(q, c);
            if c > 0 {
                jobs.push((wb, tb, pbk, qbk));
            }
            (w, t, p, q) = (wr, tr, pr, qr);
        }
    }
    jobs.into_par_iter()
        .for_each(|(w, t, p, q)| msd(w, t, p, q, top, !into_a, walk));
}

fn split_opt(s: Option<&mut [u32]>, at: usize) -> (Option<&mut [u32]>, Option<&mut [u32]>) {
    match s {
        Some(s) => {
            let (a, b) = s.split_at_mut(at);
            (Some(a), Some(b))
        }
        None => (None, None),
    }
}

/// The counts of a digit in each chunk of `chunk` keys.
struct ChunkCounts {
    chunk: usize,
    counts: Vec<[usize; 256]>,
}

/// Per-chunk counts of the 8-bit digit at `shift`.
fn chunk_counts<W: Word>(keys: &[W], shift: u32, mask: usize, chunk: usize) -> ChunkCounts {
    let counts = keys
        .par_chunks(chunk)
        .map(|c| {
            let mut h = [0usize; 256];
            for &w in c {
                h[w.digit(shift, mask)] += 1;
            }
            h
        })
        .collect();
    ChunkCounts { chunk, counts }
}

fn total(counts: &[[usize; 256]]) -> [usize; 256] {
    let mut t = [0usize; 256];
    for h in counts {
        for (a, b) in t.iter_mut().zip(h) {
            *a += b;
        }
    }
    t
}

/// One stable counting pass on the 8-bit digit at `shift` from `src` to `dst`, in parallel
/// chunks, with the chunks' `counts`; it stops part way (`dst` then incomplete) once `stop` is
/// requested.
fn scatter<W: Word>(
    src: &[W],
    dst: &mut [W],
    psrc: Option<&[u32]>,
    pdst: Option<&mut [u32]>,
    shift: u32,
    counts: ChunkCounts,
    stop: &Stop,
) {
    let ChunkCounts { chunk, counts } = counts;
    // where each chunk's keys of each digit go: digits in order, chunks in order within a
    // digit (what keeps the pass stable)
    let mut starts = vec![[0usize; 256]; counts.len()];
    let mut at = 0;
    for d in 0..256 {
        for (s, h) in starts.iter_mut().zip(&counts) {
            s[d] = at;
            at += h[d];
        }
    }
    let wdst = Shared(dst.as_mut_ptr());
    let pdst = pdst.map(|p| Shared(p.as_mut_ptr()));
    src.par_chunks(chunk)
        .zip(starts.into_par_iter())
        .enumerate()
        .for_each(|(c, (ws, mut next))| {
            let ps = psrc.map(|p| &p[c * chunk..c * chunk + ws.len()]);
            for (i, &w) in ws.iter().enumerate() {
                // the caller's stop, a few times a millisecond
                if i % (1 << 16) == 0 && stop.requested() {
                    return;
                }
                let d = w.digit(shift, 0xff);
                // SAFETY: `next[d]` walks the range this chunk owns for digit d, which no other
                // chunk writes; the ranges of all (chunk, digit) pairs tile 0..n, and `dst` and
                // `pdst` have n slots.
                unsafe {
                    wdst.write(next[d], w);
                    if let (Some(pd), Some(ps)) = (&pdst, ps) {
                        pd.write(next[d], ps[i]);
                    }
                }
                next[d] += 1;
            }
        });
}

/// Sort one bucket stably by its low `bits` bits, from `w` (and `p`), in LSD passes of equal
/// digits of at most 12 bits; the result lands in `t` (and `q`) if `into_t`, else back in `w`.
fn sort_bucket<W: Word>(
    w: &mut [W],
    t: &mut [W],
    mut p: Option<&mut [u32]>,
    mut q: Option<&mut [u32]>,
    bits: u32,
    into_t: bool,
) {
    let n = w.len();
    if n <= 64 || bits == 0 {
        match (p.as_deref_mut(), q.as_deref_mut()) {
            (Some(p), Some(q)) => {
                let mut pairs: Vec<(W, u32)> = w.iter().copied().zip(p.iter().copied()).collect();
                pairs.sort_by_key(|&(k, _)| k); // stable
                let (dk, dv) = if into_t { (t, q) } else { (w, p) };
                for ((k, v), (wk, pv)) in pairs.into_iter().zip(dk.iter_mut().zip(dv.iter_mut())) {
                    (*wk, *pv) = (k, v);
                }
            }
            _ => {
                let d = if into_t {
                    t.copy_from_slice(w);
                    t
                } else {
                    w
                };
                d.sort_unstable();
            }
        }
        return;
    }
    let passes = bits.div_ceil(12);
    let width = bits.div_ceil(passes);
    let mask = (1usize << width) - 1;
    let mut hist = vec![0u32; (passes as usize) << width];
    for &k in w.iter() {
        for pass in 0..passes {
            hist[((pass as usize) << width) + k.digit(pass * width, mask)] += 1;
        }
    }
    let mut in_w = true;
    for pass in 0..passes {
        let h = &mut hist[(pass as usize) << width..((pass as usize) + 1) << width];
        if h.contains(&(n as u32)) {
            continue;
        }
        let mut at = 0u32;
        for c in h.iter_mut() {
            (*c, at) = (at, at + *c);
        }
        let shift = pass * width;
        let (src, dst): (&[W], &mut [W]) = if in_w { (&*w, &mut *t) } else { (&*t, &mut *w) };
        match (p.as_deref_mut(), q.as_deref_mut()) {
            (Some(pw), Some(qt)) => {
                let (ps, pd): (&[u32], &mut [u32]) = if in_w { (pw, qt) } else { (qt, pw) };
                for (&k, &v) in src.iter().zip(ps) {
                    let d = k.digit(shift, mask);
                    dst[h[d] as usize] = k;
                    pd[h[d] as usize] = v;
                    h[d] += 1;
                }
            }
            _ => {
                for &k in src {
                    let d = k.digit(shift, mask);
                    dst[h[d] as usize] = k;
                    h[d] += 1;
                }
            }
        }
        in_w = !in_w;
    }
    if in_w && into_t {
        t.copy_from_slice(w);
        if let (Some(p), Some(q)) = (p, q) {
            q.copy_from_slice(p);
        }
    } else if !in_w && !into_t {
        w.copy_from_slice(t);
        if let (Some(p), Some(q)) = (p, q) {
            p.copy_from_slice(q);
        }
    }
}

/// Sort `keys` in gpusort's order (stable; NaNs last and canonical), carrying `values`;
/// returns the permutation (input position of each output) when `want_permutation`. Segments
/// of `order.segment_size` keys are sorted on their own; `bits` sorts on that range of the
/// sortable key only (CUB's begin_bit/end_bit), keeping ties in input order.
///
/// Inside [`crate::cancel::watching`], a caller's stop ends it early with `Error::Cancelled`,
/// `keys` and `values` then in no particular order.
pub fn sort<T: SortKey>(
    keys: &mut [T],
    values: Option<&mut [u32]>,
    want_permutation: bool,
    order: SortOrder,
    bits: Option<Range<u32>>,
) -> Result<Option<Vec<u32>>> {
    let stop = Stop::current();
    let desc = order.descending;
    let whole = order
        .segment_size
        .is_none_or(|s| s.max(1) as usize >= keys.len());
    if whole && values.is_none() && !want_permutation && bits.is_none() {
        // keys only, every bit: sort the words themselves and decode them back
        if T::TYPE == KeyType::U32 && !desc {
            // the sortable word is the key itself
            radix_sort(bytemuck::cast_slice_mut::<T, u32>(keys), None, 32, &stop);
        } else if T::TYPE.size() == 4 {
            let mut w = map_words(keys, &stop, |k| encode_key(k, desc).0);
            radix_sort(&mut w, None, 32, &stop);
            stop.check()?;
            keys.par_iter_mut().zip(w).for_each(|(k, w)| {
                let (h, l) = decode(T::TYPE, desc, w, 0);
                *k = from_words(h, l);
            });
        } else {
            let mut w = map_words(keys, &stop, |k| sortable(k, desc));
            radix_sort(&mut w, None, 64, &stop);
            stop.check()?;
            keys.par_iter_mut().zip(w).for_each(|(k, w)| {
                let (h, l) = decode(T::TYPE, desc, (w >> 32) as u32, w as u32);
                *k = from_words(h, l);
            });
        }
        stop.check()?;
        return Ok(None);
    }
    let perm = argsort(keys, order, bits)?;
    gather(keys, values, &perm);
    Ok(want_permutation.then_some(perm))
}

/// The permutation that sorts `keys` in gpusort's order (the input position of each output,
/// stable), as [`sort`] returns it, without moving the keys: NumPy's `argsort`. A caller's stop
/// ends it as it ends [`sort`].
pub fn argsort<T: SortKey>(
    keys: &[T],
    order: SortOrder,
    bits: Option<Range<u32>>,
) -> Result<Vec<u32>> {
    let stop = Stop::current();
    let n = keys.len();
    let desc = order.descending;
    if let Some(seg) = order
        .segment_size
        .map(|s| s.max(1) as usize)
        .filter(|&s| s < n)
    {
        let perm = segment_permutation(keys, desc, seg, bits, &stop);
        stop.check()?;
        return Ok(perm);
    }
    let width = match &bits {
        Some(r) => r.end.saturating_sub(r.start),
        None => 8 * T::TYPE.size() as u32,
    };
    let perm = permutation(keys, desc, bits.as_ref(), width, &stop);
    stop.check()?;
    Ok(perm)
}

/// The stable sorting permutation of `keys` by their sortable words (on `bits` if given, which
/// span `width` bits).
fn permutation<T: SortKey>(
    keys: &[T],
    desc: bool,
    bits: Option<&Range<u32>>,
    width: u32,
    stop: &Stop,
) -> Vec<u32> {
    let mut perm: Vec<u32> = (0..keys.len() as u32).into_par_iter().collect();
    if width <= 32 {
        let mut w = map_words(keys, stop, |k| match bits {
            Some(r) => key_on_bits(k, desc, r) as u32,
            None => encode_key(k, desc).0,
        });
        radix_sort(&mut w, Some(&mut perm), width, stop);
    } else {
        let mut w = map_words(keys, stop, |k| match bits {
            Some(r) => key_on_bits(k, desc, r),
            None => sortable(k, desc),
        });
        radix_sort(&mut w, Some(&mut perm), width, stop);
    }
    perm
}

/// `word(k)` of every key, in parallel pieces; pieces not yet begun when `stop` is requested
/// are left at zero (the caller drops the result).
fn map_words<T: SortKey, W: Copy + Default + Send + Sync>(
    keys: &[T],
    stop: &Stop,
    word: impl Fn(&T) -> W + Sync,
) -> Vec<W> {
    const PIECE: usize = 1 << 16;
    let mut words = vec![W::default(); keys.len()];
    words
        .par_chunks_mut(PIECE)
        .zip(keys.par_chunks(PIECE))
        .for_each(|(w, k)| {
            if !stop.requested() {
                for (w, k) in w.iter_mut().zip(k) {
                    *w = word(k);
                }
            }
        });
    words
}

/// The permutation that sorts each segment of `seg` keys on its own: each by a stable
/// comparison sort of its indices, in parallel.
fn segment_permutation<T: SortKey>(
    keys: &[T],
    desc: bool,
    seg: usize,
    bits: Option<Range<u32>>,
    stop: &Stop,
) -> Vec<u32> {
    let words = map_words(keys, stop, |k| match &bits {
        Some(r) => key_on_bits(k, desc, r),
        None => sortable(k, desc),
    });
    let mut perm: Vec<u32> = (0..keys.len() as u32).collect();
    perm.par_chunks_mut(seg).for_each(|c| {
        if !stop.requested() {
            c.sort_by_key(|&i| words[i as usize])
        }
    });
    perm
}

/// Put `keys` (NaNs canonical) and `values` in the order `perm` gives.
fn gather<T: SortKey>(keys: &mut [T], values: Option<&mut [u32]>, perm: &[u32]) {
    let sorted: Vec<T> = perm
        .par_iter()
        .map(|&i| canonical(&keys[i as usize]))
        .collect();
    keys.copy_from_slice(&sorted);
    if let Some(v) = values {
        let moved: Vec<u32> = perm.par_iter().map(|&i| v[i as usize]).collect();
        v.copy_from_slice(&moved);
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    /// Key sets whose varying bits sit anywhere: uniform, a few high bits, a narrow low range,
    /// a common high part (timestamps), one heavy value among others, all equal.
    fn key_sets(n: usize, seed: u64) -> Vec<(&'static str, Vec<u64>)> {
        let mut r = rand::rngs::StdRng::seed_from_u64(seed);
        let mut sets = vec![
            ("uniform", (0..n).map(|_| r.random()).collect()),
            (
                "high bits",
                (0..n).map(|_| r.random_range(0..5u64) << 59).collect(),
            ),
            ("small", (0..n).map(|_| r.random_range(0..1000)).collect()),
            (
                "timestamps",
                (0..n)
                    .map(|_| 0x0006_0a00_0000_0000 + r.random_range(0..1u64 << 45))
                    .collect(),
            ),
            (
                "heavy",
                (0..n)
                    .map(|i| if i % 10 == 0 { r.random() } else { 1 << 40 })
                    .collect(),
            ),
            ("equal", vec![0xdead_beef; n]),
        ];
        sets.push((
            "wide small",
            (0..n).map(|_| r.random_range(0..1 << 20)).collect(),
        ));
        sets
    }

    /// The MSD recursion with tiny buckets (deep levels, every bucket size) and the counting
    /// sort against a stable comparison sort, 64- and 32-bit words, with and without payload.
    #[test]
    fn every_level_of_the_msd_sort_is_stable_and_ordered() {
        for n in [SEQUENTIAL_BELOW + 3, 100_000] {
            for (name, words) in key_sets(n, n as u64) {
                let mut want: Vec<(u64, u32)> = words.iter().copied().zip(0..).collect();
                want.sort_by_key(|&(w, _)| w);
                for fit in [64, 5000, BUCKET_KEYS] {
                    let walk = Walk {
                        fit,
                        stop: Stop::default(),
                    };
                    let mut keys = words.clone();
                    let mut perm: Vec<u32> = (0..n as u32).collect();
                    msd_sort(&mut keys, Some(&mut perm), 64, &walk);
                    let got: Vec<(u64, u32)> = keys.into_iter().zip(perm).collect();
                    assert!(got == want, "{name} n={n} fit={fit}: with payload");
                    let mut keys = words.clone();
                    msd_sort(&mut keys, None, 64, &walk);
                    assert!(
                        keys.iter().eq(want.iter().map(|(w, _)| w)),
                        "{name} n={n} fit={fit}: keys only"
                    );
                    // the low 32 bits as 32-bit words
                    let low: Vec<u32> = words.iter().map(|&w| w as u32).collect();
                    let mut want32: Vec<(u32, u32)> = low.iter().copied().zip(0..).collect();
                    want32.sort_by_key(|&(w, _)| w);
                    let mut keys = low.clone();
                    let mut perm: Vec<u32> = (0..n as u32).collect();
                    msd_sort(&mut keys, Some(&mut perm), 32, &walk);
                    let got: Vec<(u32, u32)> = keys.into_iter().zip(perm).collect();
                    assert!(got == want32, "{name} n={n} fit={fit}: 32-bit words");
                }
            }
        }
    }
}
