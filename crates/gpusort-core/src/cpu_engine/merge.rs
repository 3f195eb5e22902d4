//! Two sorted runs into one, on all cores: what a caller that sorts parts of an array with a
//! faster sort of its own (the Python package: NumPy's sort on each core's part where the engine
//! has few threads) needs to finish.

use rayon::prelude::*;

use super::SEQUENTIAL_BELOW;
use crate::cancel::Stop;
use crate::error::{Error, Result};
use crate::keys::{KeyType, SortKey};

/// `a` and `b`, each sorted ascending in NumPy's order (numbers by value, -0.0 and +0.0 equal;
/// NaNs last), merged into `out` (`a.len() + b.len()` keys) in that order: stable, `a`'s key
/// first among equal ones (and `a`'s NaNs before `b`'s). Keys are copied bit for bit (NaN
/// payloads kept). A caller's stop ends it with `Error::Cancelled`, `out` then partly written.
pub fn merge<T: SortKey>(a: &[T], b: &[T], out: &mut [T]) -> Result<()> {
    if out.len() != a.len() + b.len() {
        return Err(Error::InvalidInput(format!(
            "merge: {} + {} keys into {}",
            a.len(),
            b.len(),
            out.len()
        )));
    }
    let stop = Stop::current();
    use bytemuck::{cast_slice as c, cast_slice_mut as m};
    match T::TYPE {
        KeyType::U32 => merge_as::<u32>(c(a), c(b), m(out), &stop),
        KeyType::I32 => merge_as::<i32>(c(a), c(b), m(out), &stop),
        KeyType::F32 => merge_as::<f32>(c(a), c(b), m(out), &stop),
        KeyType::U64 => merge_as::<u64>(c(a), c(b), m(out), &stop),
        KeyType::I64 => merge_as::<i64>(c(a), c(b), m(out), &stop),
        KeyType::F64 => merge_as::<f64>(c(a), c(b), m(out), &stop),
    }
}

/// [`merge`] on the keys' own type: floats' NaNs (at the end of each run) are set aside, so the
/// rest merge on the type's own `<`, which holds -0.0 and +0.0 equal.
fn merge_as<K: Copy + PartialOrd + Send + Sync + IsNan>(
    a: &[K],
    b: &[K],
    out: &mut [K],
    stop: &Stop,
) -> Result<()> {
    let (a, a_nan) = a.split_at(a.partition_point(|k| !k.is_nan()));
    let (b, b_nan) = b.split_at(b.partition_point(|k| !k.is_nan()));
    let (out, nan_out) = out.split_at_mut(a.len() + b.len());
    nan_out[..a_nan.len()].copy_from_slice(a_nan);
    nan_out[a_nan.len()..].copy_from_slice(b_nan);
    // pieces of the output, each merged on its own from where the merge path crosses its start
    let piece = (out.len() / (4 * rayon::current_num_threads()).max(1)).max(SEQUENTIAL_BELOW);
    out.par_chunks_mut(piece)
        .enumerate()
        .try_for_each(|(k, dst)| {
            stop.check()?;
            let start = k * piece;
            let i = crossing(a, b, start);
            let i_end = crossing(a, b, start + dst.len());
            merge_into(&a[i..i_end], &b[start - i..start + dst.len() - i_end], dst);
            Ok(())
        })
}

/// NaN-ness, for the key types that have it.
trait IsNan {
    fn is_nan(&self) -> bool;
}

macro_rules! never_nan {
    ($($t:ty),*) => { $(impl IsNan for $t { fn is_nan(&self) -> bool { false } })* };
}
never_nan!(u32, i32, u64, i64);

impl IsNan for f32 {
    fn is_nan(&self) -> bool {
        f32::is_nan(*self)
    }
}

impl IsNan for f64 {
    fn is_nan(&self) -> bool {
        f64::is_nan(*self)
    }
}

/// Keys of `a` among the first `d` of the merged output (the merge path's crossing of diagonal
/// `d`): the smallest i with a[i] after b[d - i - 1], so that equal keys come from `a` first.
fn crossing<K: Copy + PartialOrd>(a: &[K], b: &[K], d: usize) -> usize {
    let (mut lo, mut hi) = (d.saturating_sub(b.len()), d.min(a.len()));
    while lo < hi {
        let mid = (lo + hi) / 2;
        if b[d - mid - 1] < a[mid] {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// The sequential merge of `a` and `b` into `out` (exactly their length), `a` first on ties.
fn merge_into<K: Copy + PartialOrd>(a: &[K], b: &[K], out: &mut [K]) {
    let (mut i, mut j, mut o) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        // a select rather than a branch: the next key's side is unpredictable
        let take_b = y < x;
        out[o] = if take_b { y } else { x };
        j += take_b as usize;
        i += !take_b as usize;
        o += 1;
    }
    out[o..o + a.len() - i].copy_from_slice(&a[i..]);
    out[o + a.len() - i..].copy_from_slice(&b[j..]);
}
