//! An array split around a pivot into a low and a high half, on all cores: what a caller that
//! sorts each half with a faster sort of its own (the Python package: NumPy's sort of each half
//! on a thread of its own, where the engine has few threads) needs first. Unlike sorted parts
//! merged afterwards, the halves need nothing after their sorts.

use std::cmp::Ordering;

use rayon::prelude::*;

use super::simd::{self, Order, Word};
use crate::cancel::Stop;
use crate::error::{Error, Result};
use crate::keys::{KeyType, SortKey};

/// Keys in the sample the pivot is the median of: enough for halves within a few percent.
const SAMPLE: usize = 1023;

/// `keys` into `out` (the same length) as three runs in NumPy's order around a pivot (the
/// median of an evenly spaced sample of the keys that are not NaN): the keys below it, in any
/// order; then the keys equal to it, each written as the pivot itself (for floats -0.0 and +0.0
/// are equal, so a zero pivot writes every zero with its own sign); then the keys above it and
/// the NaNs, in any order, bit for bit. Returns where the equal keys start and end, or `None`
/// (`out` untouched) where one half would hold more than three quarters of the keys, or no key
/// is a number: a sort of the whole is the better plan there. A caller's stop ends it with
/// `Error::Cancelled`, `out` then partly written.
pub fn split_halves<T: SortKey>(keys: &[T], out: &mut [T]) -> Result<Option<(usize, usize)>> {
    if out.len() != keys.len() {
        return Err(Error::InvalidInput(format!(
            "split_halves: {} keys into {}",
            keys.len(),
            out.len()
        )));
    }
    use bytemuck::{cast_slice as c, cast_slice_mut as m};
    match T::TYPE {
        KeyType::U32 => halves_as::<u32, u32>(c(keys), m(out), Order::Unsigned),
        KeyType::I32 => halves_as::<i32, u32>(c(keys), m(out), Order::Signed),
        KeyType::F32 => halves_as::<f32, u32>(c(keys), m(out), Order::Float),
        KeyType::U64 => halves_as::<u64, u64>(c(keys), m(out), Order::Unsigned),
        KeyType::I64 => halves_as::<i64, u64>(c(keys), m(out), Order::Signed),
        KeyType::F64 => halves_as::<f64, u64>(c(keys), m(out), Order::Float),
    }
}

/// [`split_halves`] on the keys' own type, whose `<` holds -0.0 and +0.0 equal and puts a NaN
/// neither below nor equal to any pivot (so above it); the same order on their bits `W` in
/// AVX-512 registers where the CPU has them (cpu_engine/simd.rs).
fn halves_as<K: bytemuck::Pod + PartialOrd + Send + Sync, W: Word + bytemuck::Pod + Send + Sync>(
    keys: &[K],
    out: &mut [K],
    order: Order,
) -> Result<Option<(usize, usize)>> {
    use bytemuck::{cast, cast_slice as c, cast_slice_mut as m};
    let stop = Stop::current();
    let Some(pivot) = median_of_sample(keys) else {
        return Ok(None);
    };
    let piece = keys.len().div_ceil(rayon::current_num_threads()).max(1);
    // (below, above) of each piece
    let counts: Vec<(usize, usize)> = keys
        .par_chunks(piece)
        .map(|part| {
            stop.check()?;
            if let Some(counts) = simd::count_around::<W>(c(part), cast(pivot), order) {
                return Ok(counts);
            }
            let (mut below, mut at_most) = (0usize, 0usize);
            for &x in part {
                below += (x < pivot) as usize;
                at_most += (x <= pivot) as usize;
            }
            Ok((below, part.len() - at_most))
        })
        .collect::<Result<_>>()?;
    let below: usize = counts.iter().map(|c| c.0).sum();
    let above: usize = counts.iter().map(|c| c.1).sum();
    if 4 * below.max(above) > 3 * keys.len() {
        return Ok(None);
    }
    let (low, rest) = out.split_at_mut(below);
    let (equal, mut high) = rest.split_at_mut(keys.len() - below - above);
    equal.fill(pivot);
    // each piece's keys below go after the pieces' before it; its keys above fill the high run
    // from its end backwards, so the pieces' runs meet without a gap
    let mut low = low;
    let mut runs = Vec::with_capacity(counts.len());
    for &(b, a) in &counts {
        let (l, rest_low) = std::mem::take(&mut low).split_at_mut(b);
        let at = high.len() - a;
        let (rest_high, h) = std::mem::take(&mut high).split_at_mut(at);
        runs.push((l, h));
        low = rest_low;
        high = rest_high;
    }
    keys.par_chunks(piece)
        .zip(runs)
        .try_for_each(|(part, (l, h))| -> Result<()> {
            stop.check()?;
            if !simd::split_around::<W>(c(part), cast(pivot), order, m(l), m(h)) {
                split_piece(part, pivot, l, h);
            }
            Ok(())
        })?;
    Ok(Some((below, keys.len() - above)))
}

/// The median of up to [`SAMPLE`] evenly spaced keys that are not NaN.
fn median_of_sample<K: Copy + PartialOrd>(keys: &[K]) -> Option<K> {
    let step = (keys.len() / SAMPLE).max(1);
    let mut sample: Vec<K> = keys
        .iter()
        .step_by(step)
        .copied()
        .filter(|k| k.partial_cmp(k).is_some())
        .collect();
    if sample.is_empty() {
        return None;
    }
    let mid = sample.len() / 2;
    // (no NaN is left to compare unordered)
    sample.select_nth_unstable_by(mid, |a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
    Some(sample[mid])
}

/// One piece: its keys below `pivot` into `low` from the front, its keys above (NaNs too) into
/// `high` from the back, each run exactly as long as the piece's count of them. Every key is
/// stored at both runs' cursors and only the cursor of its own run moves on (no branch on the
/// key: which side a key takes is unpredictable); a store is skipped only once its run is full.
fn split_piece<K: Copy + PartialOrd>(part: &[K], pivot: K, low: &mut [K], high: &mut [K]) {
    let (mut i, mut j) = (0usize, high.len());
    for &x in part {
        if i < low.len() {
            low[i] = x;
        }
        if j > 0 {
            high[j - 1] = x;
        }
        // "not at most the pivot": a NaN too (partial_cmp's match measured 2-4x slower for floats)
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        let above = !(x <= pivot);
        i += (x < pivot) as usize;
        j -= above as usize;
    }
}
