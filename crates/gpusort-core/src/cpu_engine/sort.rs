//! Sorts on the CPU: every key is turned into its sortable word (`cpu::keys::encode`: NaNs
//! one largest value, signs and descending order folded into the bits), the words are sorted by
//! a parallel LSD radix sort (8-bit digits, a digit the same in every key skipped), and the keys
//! come back decoded (keys only) or gathered through the permutation (with values or an
//! argsort). Stable throughout, so ties keep their input order.

use std::ops::Range;

use rayon::prelude::*;

use super::{chunk_len, SEQUENTIAL_BELOW};
use crate::cpu::keys::{canonical, decode, encode_key, from_words, sortable};
use crate::cpu::radix::key_on_bits;
use crate::keys::{KeyType, SortKey, SortOrder};

/// A sortable word: u32 for 32-bit keys and ranges of up to 32 bits, u64 otherwise.
trait Word: Copy + Default + Ord + Send + Sync {
    /// The digit of `mask`'s width at `shift`.
    fn digit(self, shift: u32, mask: usize) -> usize;
}

impl Word for u32 {
    fn digit(self, shift: u32, mask: usize) -> usize {
        (self >> shift) as usize & mask
    }
}

impl Word for u64 {
    fn digit(self, shift: u32, mask: usize) -> usize {
        (self >> shift) as usize & mask
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

/// Sort `keys` (the low `bits` bits matter) stably in place, carrying `payload` along.
///
/// The top 8 bits that vary split the keys into 256 buckets in one parallel, stable counting
/// pass into a spare buffer; each bucket, small enough for a core's cache, is then sorted back
/// into place by LSD passes of up to 12-bit digits over its lower bits on its own thread. Where
/// one bucket would hold most keys (skewed keys), parallel 8-bit LSD passes over the whole array
/// run instead. Digits the same in every key are skipped either way.
fn radix_sort<W: Word>(keys: &mut [W], mut payload: Option<&mut [u32]>, mut bits: u32) {
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
    let chunk = chunk_len(n);
    // the highest 8 bits that vary
    let (top, counts) = loop {
        if bits == 0 {
            return; // every key the same
        }
        let top = bits.saturating_sub(8);
        let counts = chunk_counts(keys, top, 0xff, chunk);
        if !total(&counts).contains(&n) {
            break (top, counts);
        }
        bits = top;
    };
    let mut spare = vec![W::default(); n];
    let mut spare_payload = payload.as_ref().map(|_| vec![0u32; n]);
    let buckets = total(&counts);
    if buckets.iter().any(|&c| c > n / 4) {
        // skewed: whole-array passes, lowest digit first, ending with the top one counted above
        let mut in_keys = true;
        for shift in (0..top).step_by(8) {
            let (src, dst) = if in_keys {
                (&*keys, &mut spare[..])
            } else {
                (&spare[..], &mut *keys)
            };
            let counts = chunk_counts(src, shift, 0xff, chunk);
            if total(&counts).contains(&n) {
                continue;
            }
            let (ps, pd) = payload_pair(
                payload.as_deref_mut(),
                spare_payload.as_deref_mut(),
                in_keys,
            );
            scatter(src, dst, ps, pd, shift, counts, chunk);
            in_keys = !in_keys;
        }
        let (src, dst) = if in_keys {
            (&*keys, &mut spare[..])
        } else {
            (&spare[..], &mut *keys)
        };
        let counts = chunk_counts(src, top, 0xff, chunk);
        let (ps, pd) = payload_pair(
            payload.as_deref_mut(),
            spare_payload.as_deref_mut(),
            in_keys,
        );
        scatter(src, dst, ps, pd, top, counts, chunk);
        if in_keys {
            keys.copy_from_slice(&spare);
            if let (Some(p), Some(q)) = (payload, spare_payload) {
                p.copy_from_slice(&q);
            }
        }
        return;
    }
    let ps = payload.as_deref();
    scatter(
        keys,
        &mut spare,
        ps,
        spare_payload.as_deref_mut(),
        top,
        counts,
        chunk,
    );
    // each bucket sorted on its lower bits from the spare buffer back into place
    let mut jobs = Vec::with_capacity(256);
    {
        let (mut w, mut t) = (&mut spare[..], &mut *keys);
        let (mut p, mut q) = (spare_payload.as_deref_mut(), payload);
        for &c in buckets.iter() {
            let (wb, wr) = w.split_at_mut(c);
            let (tb, tr) = t.split_at_mut(c);
            let (pb, pr) = split_opt(p, c);
            let (qb, qr) = split_opt(q, c);
            if c > 0 {
                jobs.push((wb, tb, pb, qb));
            }
            (w, t, p, q) = (wr, tr, pr, qr);
        }
    }
    jobs.into_par_iter()
        .for_each(|(w, t, p, q)| sort_bucket(w, t, p, q, top));
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

/// The payload's source and destination for a pass from keys (`from_keys`) or from the spare.
fn payload_pair<'a>(
    p: Option<&'a mut [u32]>,
    q: Option<&'a mut [u32]>,
    from_keys: bool,
) -> (Option<&'a [u32]>, Option<&'a mut [u32]>) {
    match (p, q) {
        (Some(p), Some(q)) if from_keys => (Some(p), Some(q)),
        (Some(p), Some(q)) => (Some(q), Some(p)),
        _ => (None, None),
    }
}

/// Per-chunk counts of the 8-bit digit at `shift`.
fn chunk_counts<W: Word>(keys: &[W], shift: u32, mask: usize, chunk: usize) -> Vec<[usize; 256]> {
    keys.par_chunks(chunk)
        .map(|c| {
            let mut h = [0usize; 256];
            for &w in c {
                h[w.digit(shift, mask)] += 1;
            }
            h
        })
        .collect()
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
/// chunks, with the chunks' `counts`.
fn scatter<W: Word>(
    src: &[W],
    dst: &mut [W],
    psrc: Option<&[u32]>,
    pdst: Option<&mut [u32]>,
    shift: u32,
    counts: Vec<[usize; 256]>,
    chunk: usize,
) {
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

/// Sort one bucket stably by its low `bits` bits, from `w` (and `p`) into `t` (and `q`), in
/// LSD passes of equal digits of at most 12 bits.
fn sort_bucket<W: Word>(
    w: &mut [W],
    t: &mut [W],
    mut p: Option<&mut [u32]>,
    mut q: Option<&mut [u32]>,
    bits: u32,
) {
    let n = w.len();
    if n <= 64 || bits == 0 {
        match (p.as_deref_mut(), q.as_deref_mut()) {
            (Some(p), Some(q)) => {
                let mut pairs: Vec<(W, u32)> = w.iter().copied().zip(p.iter().copied()).collect();
                pairs.sort_by_key(|&(k, _)| k); // stable
                for ((k, v), (wk, pv)) in pairs.into_iter().zip(t.iter_mut().zip(q.iter_mut())) {
                    (*wk, *pv) = (k, v);
                }
            }
            _ => {
                t.copy_from_slice(w);
                t.sort_unstable();
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
    if in_w {
        t.copy_from_slice(w);
        if let (Some(p), Some(q)) = (p, q) {
            q.copy_from_slice(p);
        }
    }
}

/// Sort `keys` in gpusort's order (stable; NaNs last and canonical), carrying `values`;
/// returns the permutation (input position of each output) when `want_permutation`. Segments
/// of `order.segment_size` keys are sorted on their own; `bits` sorts on that range of the
/// sortable key only (CUB's begin_bit/end_bit), keeping ties in input order.
pub fn sort<T: SortKey>(
    keys: &mut [T],
    values: Option<&mut [u32]>,
    want_permutation: bool,
    order: SortOrder,
    bits: Option<Range<u32>>,
) -> Option<Vec<u32>> {
    let n = keys.len();
    let desc = order.descending;
    let carried = values.is_some() || want_permutation;
    if let Some(seg) = order
        .segment_size
        .map(|s| s.max(1) as usize)
        .filter(|&s| s < n)
    {
        return segmented(keys, values, want_permutation, desc, seg, bits);
    }
    let width = match &bits {
        Some(r) => r.end.saturating_sub(r.start),
        None => 8 * T::TYPE.size() as u32,
    };
    if !carried && bits.is_none() {
        // keys only, every bit: sort the words themselves and decode them back
        if T::TYPE == KeyType::U32 && !desc {
            // the sortable word is the key itself
            radix_sort(bytemuck::cast_slice_mut::<T, u32>(keys), None, 32);
        } else if width <= 32 {
            let mut w: Vec<u32> = keys.par_iter().map(|k| encode_key(k, desc).0).collect();
            radix_sort(&mut w, None, 32);
            keys.par_iter_mut().zip(w).for_each(|(k, w)| {
                let (h, l) = decode(T::TYPE, desc, w, 0);
                *k = from_words(h, l);
            });
        } else {
            let mut w: Vec<u64> = keys.par_iter().map(|k| sortable(k, desc)).collect();
            radix_sort(&mut w, None, 64);
            keys.par_iter_mut().zip(w).for_each(|(k, w)| {
                let (h, l) = decode(T::TYPE, desc, (w >> 32) as u32, w as u32);
                *k = from_words(h, l);
            });
        }
        return None;
    }
    let mut perm: Vec<u32> = (0..n as u32).collect();
    if width <= 32 {
        let mut w: Vec<u32> = keys
            .par_iter()
            .map(|k| match &bits {
                Some(r) => key_on_bits(k, desc, r) as u32,
                None => encode_key(k, desc).0,
            })
            .collect();
        radix_sort(&mut w, Some(&mut perm), width);
    } else {
        let mut w: Vec<u64> = keys
            .par_iter()
            .map(|k| match &bits {
                Some(r) => key_on_bits(k, desc, r),
                None => sortable(k, desc),
            })
            .collect();
        radix_sort(&mut w, Some(&mut perm), width);
    }
    gather(keys, values, &perm);
    want_permutation.then_some(perm)
}

/// Segments sorted on their own, in parallel: each by a stable comparison sort of its indices.
fn segmented<T: SortKey>(
    keys: &mut [T],
    values: Option<&mut [u32]>,
    want_permutation: bool,
    desc: bool,
    seg: usize,
    bits: Option<Range<u32>>,
) -> Option<Vec<u32>> {
    let words: Vec<u64> = keys
        .par_iter()
        .map(|k| match &bits {
            Some(r) => key_on_bits(k, desc, r),
            None => sortable(k, desc),
        })
        .collect();
    let mut perm: Vec<u32> = (0..keys.len() as u32).collect();
    perm.par_chunks_mut(seg)
        .for_each(|c| c.sort_by_key(|&i| words[i as usize]));
    gather(keys, values, &perm);
    want_permutation.then_some(perm)
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
