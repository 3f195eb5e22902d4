//! CPU twins of shaders/scan.wgsl and shaders/compact.wgsl: the references their tests use.

use crate::keys::{KeyType, SortKey};
use crate::reference::keys::sortable;
use crate::scan::{Predicate, ScanOp};

/// The scan with the kernel's semantics: wrapping integer adds, f32 adds in f32, in order.
pub fn scan<T: SortKey>(data: &[T], op: ScanOp, inclusive: bool) -> Vec<T> {
    let (_, identity) = op.code(T::TYPE).expect("supported operator");
    scan_from(data, op, inclusive, identity).0
}

/// [`scan`] of a piece of a longer array: `carry` (bits) is what everything before the piece
/// combines to; returns the results and the value through the piece's end.
pub fn scan_from<T: SortKey>(data: &[T], op: ScanOp, inclusive: bool, carry: u32) -> (Vec<T>, u32) {
    let (code, _) = op.code(T::TYPE).expect("supported operator");
    let combine = |a: u32, b: u32| combine_bits(code, a, b);
    let bits: &[u32] = bytemuck::cast_slice(data);
    let mut acc = carry;
    let out: Vec<u32> = bits
        .iter()
        .map(|&x| {
            let before = acc;
            acc = combine(acc, x);
            if inclusive {
                acc
            } else {
                before
            }
        })
        .collect();
    (bytemuck::cast_slice(&out).to_vec(), acc)
}

/// Whether `x` satisfies the predicate, with the kernel's semantics (sort order for pivots).
pub fn holds<T: SortKey>(x: &T, p: &Predicate<T>) -> bool {
    match p {
        Predicate::Below(pivot) => sortable(x, false) < sortable(pivot, false),
        Predicate::AtLeast(pivot) => sortable(x, false) >= sortable(pivot, false),
        Predicate::NonZero => {
            let b = bytemuck::bytes_of(x);
            let v = if T::TYPE.is_wide() {
                u64::from_le_bytes(b.try_into().unwrap())
            } else {
                u32::from_le_bytes(b.try_into().unwrap()) as u64
            };
            let mag = match T::TYPE {
                KeyType::F32 => v & 0x7fff_ffff,
                KeyType::F64 => v & 0x7fff_ffff_ffff_ffff,
                _ => v,
            };
            mag != 0
        }
    }
}

/// One step of a 64-bit scan of `t` (u64, i64, f64) with `op`, on the elements' bits.
pub fn combine64(t: KeyType, op: ScanOp, a: u64, b: u64) -> u64 {
    match (t, op) {
        (KeyType::F64, _) => (f64::from_bits(a) + f64::from_bits(b)).to_bits(),
        (_, ScanOp::Add) => a.wrapping_add(b),
        (_, ScanOp::And) => a & b,
        (_, ScanOp::Or) => a | b,
        (_, ScanOp::Xor) => a ^ b,
        (KeyType::I64, ScanOp::Max) => (a as i64).max(b as i64) as u64,
        (KeyType::I64, _) => (a as i64).min(b as i64) as u64,
        (_, ScanOp::Max) => a.max(b),
        _ => a.min(b),
    }
}

/// The identity of `op` on 64-bit elements of `t`.
pub fn identity64(t: KeyType, op: ScanOp) -> u64 {
    match (t, op) {
        (KeyType::F64, _) | (_, ScanOp::Add | ScanOp::Or | ScanOp::Xor) => 0,
        (KeyType::I64, ScanOp::Max) => i64::MIN as u64,
        (KeyType::I64, ScanOp::Min) => i64::MAX as u64,
        (_, ScanOp::Max) => 0,
        _ => u64::MAX,
    }
}

/// The twin of `shaders/scan64.wgsl`: a sequential scan of 64-bit elements (wrapping integer
/// operators, f64 additions in order).
pub fn scan64<T: SortKey>(data: &[T], op: ScanOp, inclusive: bool) -> Vec<T> {
    scan64_from(data, op, inclusive, identity64(T::TYPE, op)).0
}

/// [`scan64`] of a piece of a longer array: `carry` (bits) is what everything before the piece
/// combines to; returns the results and the value through the piece's end.
pub fn scan64_from<T: SortKey>(
    data: &[T],
    op: ScanOp,
    inclusive: bool,
    carry: u64,
) -> (Vec<T>, u64) {
    let t = T::TYPE;
    let mut acc = carry;
    let out: Vec<u64> = bytemuck::cast_slice::<T, u64>(data)
        .iter()
        .map(|&x| {
            let before = acc;
            acc = combine64(t, op, acc, x);
            if inclusive {
                acc
            } else {
                before
            }
        })
        .collect();
    (bytemuck::cast_slice(&out).to_vec(), acc)
}

/// One step of a scan on 32-bit words: operator `code` of [`ScanOp::code`] applied to `a`, `b`.
pub fn combine_bits(code: u32, a: u32, b: u32) -> u32 {
    match code {
        1 => (f32::from_bits(a) + f32::from_bits(b)).to_bits(),
        2 => a.max(b),
        3 => a.min(b),
        4 => (a as i32).max(b as i32) as u32,
        5 => (a as i32).min(b as i32) as u32,
        6 => a & b,
        7 => a | b,
        8 => a ^ b,
        _ => a.wrapping_add(b),
    }
}

/// Stable partition: (elements, payload, split index).
pub fn partition<T: SortKey>(
    data: &[T],
    payload: Option<&[u32]>,
    p: &Predicate<T>,
) -> (Vec<T>, Option<Vec<u32>>, usize) {
    let idx: Vec<usize> = (0..data.len())
        .filter(|&i| holds(&data[i], p))
        .chain((0..data.len()).filter(|&i| !holds(&data[i], p)))
        .collect();
    let split = data.iter().filter(|x| holds(*x, p)).count();
    (
        idx.iter().map(|&i| data[i]).collect(),
        payload.map(|pl| idx.iter().map(|&i| pl[i]).collect()),
        split,
    )
}

/// Compaction: the kept elements in order, with their payload.
pub fn compact<T: SortKey>(
    data: &[T],
    payload: Option<&[u32]>,
    p: &Predicate<T>,
) -> (Vec<T>, Option<Vec<u32>>) {
    let (v, pl, split) = partition(data, payload, p);
    (v[..split].to_vec(), pl.map(|x| x[..split].to_vec()))
}

/// Ballot mask of lanes below `lane`, as the four words of a WGSL vec4 ballot: the twin of
/// `lanes_below` in wgscan_subgroup.wgsl (tested here for every subgroup size up to 128).
pub fn lanes_below(lane: u32) -> [u32; 4] {
    let mut m = [0u32; 4];
    for (w, word) in m.iter_mut().enumerate() {
        let lo = w as u32 * 32;
        if lane >= lo + 32 {
            *word = u32::MAX;
        } else if lane > lo {
            *word = (1u32 << (lane - lo)) - 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_example() {
        let v = [3u32, 1, 7, 0, 4, 1, 6, 3];
        assert_eq!(
            scan(&v, ScanOp::Add, false),
            vec![0, 3, 4, 11, 11, 15, 16, 22]
        );
        assert_eq!(
            scan(&v, ScanOp::Add, true),
            vec![3, 4, 11, 11, 15, 16, 22, 25]
        );
    }

    #[test]
    fn ballot_masks_cover_every_subgroup_size() {
        for size in [4u32, 8, 16, 32, 64, 128] {
            for lane in 0..size {
                let m = lanes_below(lane);
                let ones: u32 = m.iter().map(|w| w.count_ones()).sum();
                assert_eq!(ones, lane, "size {size} lane {lane}");
                // PSCAN of a predicate that holds on every lane = lane index
                let ballot = [u32::MAX; 4];
                let count: u32 = ballot
                    .iter()
                    .zip(m)
                    .map(|(b, m)| (b & m).count_ones())
                    .sum();
                assert_eq!(count, lane);
            }
        }
    }

    #[test]
    fn partition_is_stable() {
        let v = [5i32, -1, 3, -2, 0, 7];
        let (out, _, split) = partition(&v, None, &Predicate::Below(1));
        assert_eq!(out, vec![-1, -2, 0, 5, 3, 7]);
        assert_eq!(split, 3);
        assert_eq!(
            compact(&[0.0f32, -0.0, 1.0, f32::NAN], None, &Predicate::NonZero)
                .0
                .len(),
            2
        );
    }
}
