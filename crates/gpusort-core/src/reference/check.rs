//! The result checks every front end runs on request (the CLI's `--verify`; anyone's): a
//! kernel's output against the reference semantics, failing with
//! [`Error::VerificationFailed`] and a place. Sorts: in order within each segment and a
//! permutation of the input (on part of the key bits: the twin's stable order); scans: the
//! twin's sequential scan, carried from piece to piece, floats within a tolerance of their
//! running magnitude; stencils: the twin's steps within a relative tolerance.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::keys::order::{canonical, fingerprint, sortable};
use crate::keys::{KeyType, SortKey, SortOrder};
use crate::reference::scan::{identity64, scan64_from, scan_from};
use crate::scan::{Predicate, ScanOp};
use crate::stencil::{StencilJob, StencilValue};

/// `$body` with `T` the 32-bit element type of `$key_type` (u32 for any other type).
macro_rules! by_word_type {
    ($key_type:expr, |$t:ident| $body:expr) => {
        match $key_type {
            KeyType::I32 => {
                type $t = i32;
                $body
            }
            KeyType::F32 => {
                type $t = f32;
                $body
            }
            _ => {
                type $t = u32;
                $body
            }
        }
    };
}

/// `output` is `input` sorted in `order`: ordered within each segment, the same keys.
pub fn sorted<T: SortKey>(input: &[T], output: &[T], order: SortOrder) -> Result<()> {
    let fail = |why: String| Err(Error::VerificationFailed(why));
    if input.len() != output.len() {
        return fail(format!("{} keys in, {} out", input.len(), output.len()));
    }
    let seg = order
        .segment_size
        .map(|s| s as usize)
        .unwrap_or(output.len())
        .max(1);
    for (s, chunk) in output.chunks(seg).enumerate() {
        if let Some(i) = chunk
            .windows(2)
            .position(|w| sortable(&w[0], order.descending) > sortable(&w[1], order.descending))
        {
            return fail(format!("out of order at position {}", s * seg + i));
        }
    }
    if fingerprint(input) != fingerprint(output) {
        return fail("the output is not a permutation of the input".into());
    }
    Ok(())
}

/// [`sorted`] for 32-bit words of `key_type`.
pub fn sorted_words(
    key_type: KeyType,
    input: &[u32],
    output: &[u32],
    order: SortOrder,
) -> Result<()> {
    by_word_type!(key_type, |T| sorted::<T>(
        bytemuck::cast_slice(input),
        bytemuck::cast_slice(output),
        order
    ))
}

/// `output` is `input` sorted stably on its sortable key bits `bits` (each segment on its own).
pub fn sorted_on_bits<T: SortKey>(
    input: &[T],
    output: &[T],
    order: SortOrder,
    bits: Range<u32>,
) -> Result<()> {
    let seg = order
        .segment_size
        .map_or(input.len(), |s| s as usize)
        .max(1);
    let same = input.len() == output.len()
        && input
            .chunks(seg)
            .zip(output.chunks(seg))
            .all(|(input, output)| {
                let (perm, _) = super::radix::argsort(input, order.descending, bits.clone());
                perm.iter().zip(output).all(|(&i, o)| {
                    bytemuck::bytes_of(&canonical(&input[i as usize])) == bytemuck::bytes_of(o)
                })
            });
    match same {
        true => Ok(()),
        false => Err(Error::VerificationFailed(
            "the output is not the input in key-bit order".into(),
        )),
    }
}

/// A scan checked piece by piece: the twin's sequential scan carried from piece to piece.
pub struct ScanCheck {
    op: ScanOp,
    inclusive: bool,
    carry: u64,
    /// The running sum of |x| (floats: the tolerance grows with it).
    abs: f64,
}

impl ScanCheck {
    /// A check of a scan of `T` elements with `op` (`op` must apply to `T`).
    pub fn new<T: SortKey>(op: ScanOp, inclusive: bool) -> ScanCheck {
        let carry = if T::TYPE.is_wide() {
            identity64(T::TYPE, op)
        } else {
            op.code(T::TYPE).map_or(0, |c| c.1) as u64
        };
        ScanCheck {
            op,
            inclusive,
            carry,
            abs: 0.0,
        }
    }

    /// The twin's results for `data`, from the carry so far.
    fn want<T: SortKey>(&mut self, data: &[T]) -> Vec<T> {
        if T::TYPE.is_wide() {
            let (want, carry) = scan64_from(data, self.op, self.inclusive, self.carry);
            self.carry = carry;
            want
        } else {
            let (want, carry) = scan_from(data, self.op, self.inclusive, self.carry as u32);
            self.carry = carry as u64;
            want
        }
    }

    /// Check `got`, the scan of the elements `data` that start at element `at` (the pieces in
    /// order). Floats: their additions may run in another order, so each result is compared
    /// within a tolerance of the running sum of |x| (1e-5 of it for f32, 1e-12 for f64).
    pub fn check<T: SortKey>(&mut self, data: &[T], got: &[T], at: usize) -> Result<()> {
        let want = self.want(data);
        let fail = |i: usize| Err(Error::VerificationFailed(format!("element {}", at + i)));
        if got.len() != want.len() {
            return fail(got.len().min(want.len()));
        }
        if T::TYPE.is_float() {
            let as_f64 = |v: &[T]| -> Vec<f64> {
                match T::TYPE {
                    KeyType::F32 => bytemuck::cast_slice::<T, f32>(v)
                        .iter()
                        .map(|&x| x as f64)
                        .collect(),
                    _ => bytemuck::cast_slice::<T, f64>(v).to_vec(),
                }
            };
            let (x, g, w) = (as_f64(data), as_f64(got), as_f64(&want));
            let rel = if T::TYPE == KeyType::F32 { 1e-5 } else { 1e-12 };
            for i in 0..x.len() {
                self.abs += x[i].abs();
                let tol = rel * self.abs + rel / 10.0;
                if !((g[i] - w[i]).abs() <= tol || (g[i].is_nan() && w[i].is_nan()) || g[i] == w[i])
                {
                    return fail(i);
                }
            }
            return Ok(());
        }
        let (g, w) = (
            bytemuck::cast_slice::<T, u8>(got),
            bytemuck::cast_slice::<T, u8>(&want),
        );
        let size = T::TYPE.size();
        match g.chunks(size).zip(w.chunks(size)).position(|(a, b)| a != b) {
            Some(i) => fail(i),
            None => Ok(()),
        }
    }
}

/// A whole scan of `data` checked at once.
pub fn scanned<T: SortKey>(data: &[T], got: &[T], op: ScanOp, inclusive: bool) -> Result<()> {
    ScanCheck::new::<T>(op, inclusive).check(data, got, 0)
}

/// [`scanned`] for 32-bit words of `key_type`.
pub fn scanned_words(
    key_type: KeyType,
    data: &[u32],
    got: &[u32],
    op: ScanOp,
    inclusive: bool,
) -> Result<()> {
    by_word_type!(key_type, |T| scanned::<T>(
        bytemuck::cast_slice(data),
        bytemuck::cast_slice(got),
        op,
        inclusive
    ))
}

/// One chunk of a split's results: the matching elements, and (a partition) the others, each
/// with its payload where there is one.
pub struct SplitParts<'a, T> {
    pub kept: &'a [T],
    pub others: Option<&'a [T]>,
    pub values: Option<&'a [u32]>,
    pub values_others: Option<&'a [u32]>,
}

impl<'a, T> SplitParts<'a, T> {
    /// A chunk whose first `kept` elements (and payload words) matched; the rest are the others,
    /// checked only for a partition (`rest`).
    pub fn of(elements: &'a [T], payload: Option<&'a [u32]>, kept: usize, rest: bool) -> Self {
        let (matched, others) = elements.split_at(kept);
        let payload = payload.map(|p| p.split_at(kept));
        SplitParts {
            kept: matched,
            others: rest.then_some(others),
            values: payload.map(|p| p.0),
            values_others: payload.filter(|_| rest).map(|p| p.1),
        }
    }
}

/// A chunk of a split (compaction: the matching elements; partition: the others too) of the
/// elements `range` of `data` (with `values`, their payload): the twin's stable partition of the
/// same range, part for part.
pub fn split<T: SortKey>(
    data: &[T],
    values: Option<&[u32]>,
    pred: &Predicate<T>,
    range: Range<usize>,
    got: SplitParts<'_, T>,
) -> Result<()> {
    let vin = values.map(|v| &v[range.clone()]);
    let (want, wvals, wsplit) = super::scan::partition(&data[range.clone()], vin, pred);
    let same =
        |a: &[T], b: &[T]| bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b);
    let wvals = wvals.as_deref();
    let agree = got.kept.len() == wsplit
        && same(got.kept, &want[..wsplit])
        && got.others.is_none_or(|o| same(o, &want[wsplit..]))
        && got.values == wvals.map(|v| &v[..wsplit])
        && got
            .values_others
            .is_none_or(|v| Some(v) == wvals.map(|w| &w[wsplit..]));
    match agree {
        true => Ok(()),
        false => Err(Error::VerificationFailed(format!(
            "the split of elements {}..{} differs from the CPU's",
            range.start, range.end
        ))),
    }
}

/// `got` is `job` run on `grid` by the twin, each cell within 1e-5 (f32) or 1e-12 (f64) of it,
/// relative to the larger of its magnitude and one (the kernels may sum taps in another order).
pub fn stenciled<T: StencilValue + Into<f64>>(
    job: &StencilJob,
    grid: &[T],
    got: &[T],
) -> Result<()> {
    let want = super::stencil::run(
        grid,
        job.shape,
        &job.stencil,
        job.boundary,
        job.cval,
        job.steps,
    );
    let tol = if T::TYPE == KeyType::F64 { 1e-12 } else { 1e-5 };
    if got.len() != want.len() {
        return Err(Error::VerificationFailed(format!(
            "{} cells out, {} expected",
            got.len(),
            want.len()
        )));
    }
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let (g, w): (f64, f64) = (g.into(), w.into());
        let same = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * w.abs().max(1.0);
        if !same {
            return Err(Error::VerificationFailed(format!(
                "cell {i}: GPU {g}, CPU {w} (please report this)"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_are_checked_for_order_and_keys() {
        let order = SortOrder::default();
        assert!(sorted(&[3u32, 1, 2], &[1, 2, 3], order).is_ok());
        assert!(sorted(&[3u32, 1, 2], &[1, 3, 2], order).is_err());
        assert!(sorted(&[3u32, 1, 2], &[1, 2, 2], order).is_err());
        assert!(sorted(&[3u32, 1], &[1, 2, 3], order).is_err());
        let rows = SortOrder {
            descending: false,
            segment_size: Some(2),
        };
        assert!(sorted(&[2u32, 1, 9, 3], &[1, 2, 3, 9], rows).is_ok());
        assert!(sorted_words(
            KeyType::F32,
            &[(-1.0f32).to_bits(), 0],
            &[(-1.0f32).to_bits(), 0],
            order
        )
        .is_ok());
        assert!(sorted_on_bits(&[0x12u32, 0x21], &[0x21, 0x12], order, 0..4).is_ok());
        assert!(sorted_on_bits(&[0x12u32, 0x21], &[0x12, 0x21], order, 0..4).is_err());
    }

    #[test]
    fn scans_are_checked_across_pieces() {
        let data = [1u32, 2, 3, 4];
        let mut c = ScanCheck::new::<u32>(ScanOp::Add, true);
        assert!(c.check(&data[..2], &[1, 3], 0).is_ok());
        assert!(c.check(&data[2..], &[6, 10], 2).is_ok());
        let e = scanned(&data, &[1, 3, 6, 11], ScanOp::Add, true).unwrap_err();
        assert!(e.to_string().contains("element 3"), "{e}");
        let f = [0.1f32; 1000];
        let sums: Vec<f32> = (1..=1000).map(|i| i as f32 * 0.1).collect();
        assert!(scanned(&f, &sums, ScanOp::Add, true).is_ok());
    }
}
