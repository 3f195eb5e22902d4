//! Scans and splits on the CPU, in chunks on all cores: a scan reduces each chunk, combines the
//! chunk totals in order, and scans each chunk from the total before it; a split partitions
//! each chunk stably and concatenates the kept parts, then the rest, in chunk order.

use rayon::prelude::*;

use super::{chunk_len, SEQUENTIAL_BELOW};
use crate::cancel::Stop;
use crate::keys::{KeyType, SortKey};
use crate::reference::scan::{combine64, combine_bits, holds, identity64};
use crate::scan::{Predicate, ScanOp};
use crate::Result;

/// The scan of `data` into `out` (the same length): wrapping integer operators, on all cores;
/// float sums one element after another in the element type, NumPy's `cumsum` order (bit for
/// bit its results, whatever the number of threads; the GPU kernels add in another order). The
/// operator must suit the type ([`ScanOp::code`] for 32-bit types,
/// [`crate::scan::scan64::supports`] for 64-bit ones). Inside [`crate::cancel::watching`], a
/// caller's stop ends it between chunks with `Error::Cancelled` (`out` then partly written).
pub fn scan<T: SortKey>(data: &[T], out: &mut [T], op: ScanOp, inclusive: bool) -> Result<()> {
    let stop = Stop::current();
    assert_eq!(data.len(), out.len(), "a scan writes one result an element");
    let t = T::TYPE;
    if t.is_float() && op == ScanOp::Add {
        use bytemuck::{cast_slice as c, cast_slice_mut as m};
        match t {
            KeyType::F32 => add_in_order::<f32>(c(data), m(out), inclusive, &stop),
            _ => add_in_order::<f64>(c(data), m(out), inclusive, &stop),
        }
        return stop.check();
    }
    if op == ScanOp::Add {
        // integer sums (wrapping) without the operator chosen per element
        use bytemuck::{cast_slice as c, cast_slice_mut as m};
        match t {
            KeyType::U64 | KeyType::I64 => scan_chunks(
                c(data),
                m(out),
                0,
                |x: u64| x,
                u64::wrapping_add,
                |src, dst, carry| super::simd::sum_u64(src, dst, carry, inclusive),
                &stop,
            ),
            _ => scan_words::<u32, u32>(
                c(data),
                m(out),
                0,
                |x| x,
                u32::wrapping_add,
                inclusive,
                &stop,
            ),
        }
        return stop.check();
    }
    if t.is_wide() {
        assert!(
            crate::scan::scan64::supports(t, op),
            "an operator the type supports"
        );
        scan_words::<u64, u64>(
            bytemuck::cast_slice(data),
            bytemuck::cast_slice_mut(out),
            identity64(t, op),
            |x| x,
            |a, b| combine64(t, op, a, b),
            inclusive,
            &stop,
        );
    } else {
        let (code, identity) = op.code(t).expect("an operator the type supports");
        scan_words::<u32, u32>(
            bytemuck::cast_slice(data),
            bytemuck::cast_slice_mut(out),
            identity,
            |x| x,
            |a, b| combine_bits(code, a, b),
            inclusive,
            &stop,
        );
    }
    stop.check()
}

/// A float sum scan in order, as NumPy's `cumsum` adds: from -0.0 (so the first result is the
/// first element bit for bit, as NumPy copies it), one element after another: on one core, and
/// faster than `np.cumsum` there (docs/BENCHMARKS.md). The stop is checked every 2^16 elements.
fn add_in_order<F: Copy + std::ops::Add<Output = F> + From<i8> + std::ops::Neg<Output = F>>(
    data: &[F],
    out: &mut [F],
    inclusive: bool,
    stop: &Stop,
) {
    let mut acc = -F::from(0);
    for (src, dst) in data.chunks(1 << 16).zip(out.chunks_mut(1 << 16)) {
        if stop.requested() {
            return;
        }
        if inclusive {
            for (d, &x) in dst.iter_mut().zip(src) {
                acc = acc + x;
                *d = acc;
            }
        } else {
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = acc;
                acc = acc + x;
            }
        }
    }
    // an exclusive scan starts from the sum's identity, +0.0 (then each sum before an element,
    // as NumPy's cumsum shifted by one gives it)
    if let (false, Some(first)) = (inclusive, out.first_mut()) {
        *first = F::from(0);
    }
}

/// The sum scan of 32-bit integers into 64 bits (NumPy's `cumsum` widens them): `widen` each
/// element as it is read, adding with wrap-around, on all cores, straight into `out` (the same
/// length). A caller's stop ends it between chunks as it ends [`scan`].
pub fn sum_widened<S: SortKey, T: SortKey>(
    data: &[S],
    out: &mut [T],
    inclusive: bool,
    widen: impl Fn(S) -> T + Sync,
    add: impl Fn(T, T) -> T + Sync,
) -> Result<()> {
    assert_eq!(data.len(), out.len(), "a scan writes one result an element");
    let stop = Stop::current();
    scan_words(data, out, T::zeroed(), widen, add, inclusive, &stop);
    stop.check()
}

/// A chunked scan of `data` into `out`: each chunk's total (elements `widen`ed as they are read),
/// the carries before each chunk in order, then each chunk from its carry. Callers pass the
/// operator as a function of its own (a sum's `wrapping_add`), so the loops know it at compile
/// time.
fn scan_words<S: Copy + Sync, T: Copy + Send + Sync>(
    data: &[S],
    out: &mut [T],
    identity: T,
    widen: impl Fn(S) -> T + Sync,
    combine: impl Fn(T, T) -> T + Sync,
    inclusive: bool,
    stop: &Stop,
) {
    let scan =
        |src: &[S], dst: &mut [T], carry| scan_chunk(src, dst, carry, &widen, &combine, inclusive);
    scan_chunks(data, out, identity, &widen, &combine, scan, stop)
}

/// [`scan_words`] with each chunk scanned by `scan(src, dst, carry)`, which returns the carry
/// after the chunk.
fn scan_chunks<S: Copy + Sync, T: Copy + Send + Sync>(
    data: &[S],
    out: &mut [T],
    identity: T,
    widen: impl Fn(S) -> T + Sync,
    combine: impl Fn(T, T) -> T + Sync,
    scan: impl Fn(&[S], &mut [T], T) -> T + Sync,
    stop: &Stop,
) {
    if one_pass(data.len()) {
        let mut acc = identity;
        for (src, dst) in data.chunks(1 << 16).zip(out.chunks_mut(1 << 16)) {
            if stop.requested() {
                return;
            }
            acc = scan(src, dst, acc);
        }
        return;
    }
    let chunk = chunk_len(data.len());
    let totals: Vec<T> = data
        .par_chunks(chunk)
        .map(|c| match stop.requested() {
            true => identity,
            false => c.iter().fold(identity, |a, &x| combine(a, widen(x))),
        })
        .collect();
    let mut carries = Vec::with_capacity(totals.len());
    let mut acc = identity;
    for t in totals {
        carries.push(acc);
        acc = combine(acc, t);
    }
    data.par_chunks(chunk)
        .zip(out.par_chunks_mut(chunk))
        .zip(carries)
        .for_each(|((src, dst), carry)| {
            if stop.requested() {
                return;
            }
            scan(src, dst, carry);
        });
}

/// Whether a scan of `n` elements runs as one pass on the calling thread, no other thread taking
/// part (a front end may then run it where it is instead of handing it to a pool).
pub fn scan_in_one_pass(n: usize) -> bool {
    one_pass(n)
}

/// Whether a scan of `n` elements runs as one pass on the calling thread: the parallel scan
/// reads its input twice (the chunks' totals, then the scan), so it needs more than two threads
/// to win (docs/BENCHMARKS.md, "The Python package without a GPU").
fn one_pass(n: usize) -> bool {
    n < SEQUENTIAL_BELOW || rayon::current_num_threads() <= 2
}

/// `src` scanned into `dst` from `carry`; returns the carry after it.
fn scan_chunk<S: Copy, T: Copy>(
    src: &[S],
    dst: &mut [T],
    carry: T,
    widen: &impl Fn(S) -> T,
    combine: &impl Fn(T, T) -> T,
    inclusive: bool,
) -> T {
    let mut acc = carry;
    if inclusive {
        for (d, &x) in dst.iter_mut().zip(src) {
            acc = combine(acc, widen(x));
            *d = acc;
        }
    } else {
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = acc;
            acc = combine(acc, widen(x));
        }
    }
    acc
}

/// Stable split of `data` (and its `payload`) by `p`: the elements that hold it first, then,
/// with `keep_rest`, the others, both in input order. Returns (elements, payload, how many hold);
/// a caller's stop ends it between chunks as it ends [`scan`].
pub fn split<T: SortKey>(
    data: &[T],
    payload: Option<&[u32]>,
    p: &Predicate<T>,
    keep_rest: bool,
) -> Result<(Vec<T>, Option<Vec<u32>>, usize)> {
    type Part<T> = (Vec<T>, Vec<u32>, Vec<T>, Vec<u32>);
    let stop = Stop::current();
    let chunk = chunk_len(data.len());
    let parts: Vec<Part<T>> = data
        .par_chunks(chunk)
        .enumerate()
        .map(|(c, xs)| {
            let pl = payload.map(|pl| &pl[c * chunk..c * chunk + xs.len()]);
            let mut part: Part<T> = Default::default();
            if stop.requested() {
                return part;
            }
            for (i, x) in xs.iter().enumerate() {
                let (e, v) = if holds(x, p) {
                    (&mut part.0, &mut part.1)
                } else if keep_rest {
                    (&mut part.2, &mut part.3)
                } else {
                    continue;
                };
                e.push(*x);
                if let Some(pl) = pl {
                    v.push(pl[i]);
                }
            }
            part
        })
        .collect();
    stop.check()?;
    let kept: usize = parts.iter().map(|p| p.0.len()).sum();
    let mut elements = Vec::with_capacity(if keep_rest { data.len() } else { kept });
    let mut moved = payload.map(|_| Vec::with_capacity(elements.capacity()));
    for part in parts.iter() {
        elements.extend_from_slice(&part.0);
        if let Some(m) = moved.as_mut() {
            m.extend_from_slice(&part.1);
        }
    }
    for part in parts.iter() {
        elements.extend_from_slice(&part.2);
        if let Some(m) = moved.as_mut() {
            m.extend_from_slice(&part.3);
        }
    }
    Ok((elements, moved, kept))
}
