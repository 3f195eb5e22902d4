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
use crate::keys::{SortKey, SortOrder};

/// A sortable word: u32 for 32-bit keys and ranges of up to 32 bits, u64 otherwise.
trait Word: Copy + Default + Ord + Send + Sync {
    fn digit(self, shift: u32) -> usize;
}

impl Word for u32 {
    fn digit(self, shift: u32) -> usize {
        ((self >> shift) & 0xff) as usize
    }
}

impl Word for u64 {
    fn digit(self, shift: u32) -> usize {
        ((self >> shift) & 0xff) as usize
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

/// Sort `words` (the low `bits` bits matter) stably, carrying `payload` along.
fn radix_sort<W: Word>(
    mut words: Vec<W>,
    mut payload: Option<Vec<u32>>,
    bits: u32,
) -> (Vec<W>, Option<Vec<u32>>) {
    let n = words.len();
    if n < SEQUENTIAL_BELOW {
        return match payload {
            None => {
                words.sort_unstable(); // equal words are equal keys: order cannot show
                (words, None)
            }
            Some(p) => {
                let mut pairs: Vec<(W, u32)> = words.into_iter().zip(p).collect();
                pairs.sort_by_key(|&(w, _)| w); // stable
                let (w, p) = pairs.into_iter().unzip();
                (w, Some(p))
            }
        };
    }
    let chunk = chunk_len(n);
    let mut words_to = vec![W::default(); n];
    let mut payload_to = payload.as_ref().map(|_| vec![0u32; n]);
    for shift in (0..bits).step_by(8) {
        let counts: Vec<[usize; 256]> = words
            .par_chunks(chunk)
            .map(|c| {
                let mut h = [0usize; 256];
                for &w in c {
                    h[w.digit(shift)] += 1;
                }
                h
            })
            .collect();
        let mut total = [0usize; 256];
        for h in &counts {
            for (t, c) in total.iter_mut().zip(h) {
                *t += c;
            }
        }
        if total.contains(&n) {
            continue; // every key has this digit: the pass would not move anything
        }
        // where each chunk's keys of each digit go: digits in order, chunks in order within
        // a digit (what keeps the pass stable)
        let mut starts = vec![[0usize; 256]; counts.len()];
        let mut at = 0;
        for d in 0..256 {
            for (s, h) in starts.iter_mut().zip(&counts) {
                s[d] = at;
                at += h[d];
            }
        }
        let (wdst, pdst) = (
            Shared(words_to.as_mut_ptr()),
            payload_to.as_mut().map(|p| Shared(p.as_mut_ptr())),
        );
        let src_payload = payload.as_deref();
        words
            .par_chunks(chunk)
            .zip(starts.into_par_iter())
            .enumerate()
            .for_each(|(c, (ws, mut next))| {
                let ps = src_payload.map(|p| &p[c * chunk..c * chunk + ws.len()]);
                for (i, &w) in ws.iter().enumerate() {
                    let d = w.digit(shift);
                    // SAFETY: `next[d]` walks the range this chunk owns for digit d, which no
                    // other chunk writes; the ranges of all (chunk, digit) pairs tile 0..n.
                    unsafe {
                        wdst.write(next[d], w);
                        if let (Some(pd), Some(ps)) = (&pdst, ps) {
                            pd.write(next[d], ps[i]);
                        }
                    }
                    next[d] += 1;
                }
            });
        std::mem::swap(&mut words, &mut words_to);
        if let (Some(p), Some(q)) = (payload.as_mut(), payload_to.as_mut()) {
            std::mem::swap(p, q);
        }
    }
    (words, payload)
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
        if width <= 32 {
            let w: Vec<u32> = keys.par_iter().map(|k| encode_key(k, desc).0).collect();
            let (w, _) = radix_sort(w, None, 32);
            keys.par_iter_mut().zip(w).for_each(|(k, w)| {
                let (h, l) = decode(T::TYPE, desc, w, 0);
                *k = from_words(h, l);
            });
        } else {
            let w: Vec<u64> = keys.par_iter().map(|k| sortable(k, desc)).collect();
            let (w, _) = radix_sort(w, None, 64);
            keys.par_iter_mut().zip(w).for_each(|(k, w)| {
                let (h, l) = decode(T::TYPE, desc, (w >> 32) as u32, w as u32);
                *k = from_words(h, l);
            });
        }
        return None;
    }
    let index: Vec<u32> = (0..n as u32).collect();
    let perm = if width <= 32 {
        let w: Vec<u32> = keys
            .par_iter()
            .map(|k| match &bits {
                Some(r) => key_on_bits(k, desc, r) as u32,
                None => encode_key(k, desc).0,
            })
            .collect();
        radix_sort(w, Some(index), width).1
    } else {
        let w: Vec<u64> = keys
            .par_iter()
            .map(|k| match &bits {
                Some(r) => key_on_bits(k, desc, r),
                None => sortable(k, desc),
            })
            .collect();
        radix_sort(w, Some(index), width).1
    }
    .expect("the index travels with the keys");
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
