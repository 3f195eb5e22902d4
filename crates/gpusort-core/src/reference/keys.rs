//! CPU twin of shaders/keys.wgsl, and the reference sort every GPU sort is checked against.

use crate::keys::{KeyType, SortKey, SortOrder};

const INF: u32 = u32::MAX;

fn is_nan(t: KeyType, hi: u32, lo: u32) -> bool {
    let mag = hi & 0x7fff_ffff;
    match t {
        KeyType::F32 => mag > 0x7f80_0000,
        KeyType::F64 => mag > 0x7ff0_0000 || (mag == 0x7ff0_0000 && lo != 0),
        _ => false,
    }
}

/// Native (hi, lo) words -> sortable (hi, lo); lo is 0 for 32-bit keys.
pub fn encode(t: KeyType, descending: bool, hi: u32, lo: u32) -> (u32, u32) {
    if is_nan(t, hi, lo) {
        return (INF, if t.is_wide() { INF } else { 0 });
    }
    let (mut h, mut l) = (hi, lo);
    match t {
        KeyType::I32 | KeyType::I64 => h ^= 0x8000_0000,
        KeyType::F32 | KeyType::F64 => {
            if h & 0x8000_0000 != 0 {
                h = !h;
                l = !l;
            } else {
                h ^= 0x8000_0000;
            }
        }
        _ => {}
    }
    if descending {
        h = !h;
        l = !l;
    }
    if !t.is_wide() {
        l = 0;
    }
    (h, l)
}

/// Inverse of [`encode`]; the shared NaN encoding decodes to the canonical quiet NaN.
pub fn decode(t: KeyType, descending: bool, hi: u32, lo: u32) -> (u32, u32) {
    if t.is_float() && hi == INF && (!t.is_wide() || lo == INF) {
        return if t.is_wide() {
            (0x7ff8_0000, 0)
        } else {
            (0x7fc0_0000, 0)
        };
    }
    let (mut h, mut l) = (hi, lo);
    if descending {
        h = !h;
        l = !l;
    }
    match t {
        KeyType::I32 | KeyType::I64 => h ^= 0x8000_0000,
        KeyType::F32 | KeyType::F64 => {
            if h & 0x8000_0000 != 0 {
                h ^= 0x8000_0000;
            } else {
                h = !h;
                l = !l;
            }
        }
        _ => {}
    }
    if !t.is_wide() {
        l = 0;
    }
    (h, l)
}

/// Split one key into its native (hi, lo) words.
pub fn words<T: SortKey>(key: &T) -> (u32, u32) {
    let b = bytemuck::bytes_of(key);
    if T::TYPE.is_wide() {
        let v = u64::from_le_bytes(b.try_into().expect("8-byte key"));
        ((v >> 32) as u32, v as u32)
    } else {
        (u32::from_le_bytes(b.try_into().expect("4-byte key")), 0)
    }
}

/// A key's sortable (hi, lo) words.
pub fn encode_key<T: SortKey>(key: &T, descending: bool) -> (u32, u32) {
    let (hi, lo) = words(key);
    encode(T::TYPE, descending, hi, lo)
}

/// A key's position in the sort order as one u64 (hi word first).
pub fn sortable<T: SortKey>(key: &T, descending: bool) -> u64 {
    let (hi, lo) = words(key);
    let (h, l) = encode(T::TYPE, descending, hi, lo);
    ((h as u64) << 32) | l as u64
}

/// The reference: a stable CPU argsort with gpusort's semantics (segments sorted independently).
pub fn argsort<T: SortKey>(keys: &[T], order: SortOrder) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..keys.len() as u32).collect();
    let seg = order
        .segment_size
        .map(|s| s.max(1) as usize)
        .unwrap_or(keys.len().max(1));
    for chunk in idx.chunks_mut(seg) {
        chunk.sort_by_key(|&i| sortable(&keys[i as usize], order.descending));
    }
    idx
}

/// An order-independent fingerprint of a multiset of keys (NaNs canonical); fingerprints of
/// disjoint parts [`combine`](Fingerprint::combine) into the fingerprint of the whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fingerprint {
    sum: u64,
    xor: u64,
}

impl Fingerprint {
    pub fn combine(self, other: Fingerprint) -> Fingerprint {
        Fingerprint {
            sum: self.sum.wrapping_add(other.sum),
            xor: self.xor ^ other.xor,
        }
    }
}

/// The [`Fingerprint`] of `keys`.
pub fn fingerprint<T: SortKey>(keys: &[T]) -> Fingerprint {
    keys.iter().fold(Fingerprint::default(), |f, k| {
        let (hi, lo) = words(&canonical(k));
        let x = ((hi as u64) << 32 | lo as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        f.combine(Fingerprint {
            sum: x ^ (x >> 29),
            xor: x.rotate_left(17),
        })
    })
}

/// Canonical form of a key for comparing results: NaNs collapse to the canonical NaN.
pub fn canonical<T: SortKey>(key: &T) -> T {
    let (hi, lo) = words(key);
    let (h, l) = decode(
        T::TYPE,
        false,
        encode(T::TYPE, false, hi, lo).0,
        encode(T::TYPE, false, hi, lo).1,
    );
    from_words::<T>(h, l)
}

pub fn from_words<T: SortKey>(hi: u32, lo: u32) -> T {
    if T::TYPE.is_wide() {
        bytemuck::cast_slice::<u64, T>(&[((hi as u64) << 32) | lo as u64])[0]
    } else {
        bytemuck::cast_slice::<u32, T>(&[hi])[0]
    }
}

/// The reference sort: keys in gpusort's order, NaNs canonical.
pub fn sorted<T: SortKey>(keys: &[T], order: SortOrder) -> Vec<T> {
    argsort(keys, order)
        .into_iter()
        .map(|i| canonical(&keys[i as usize]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_every_type() {
        let samples: [u64; 9] = [
            0,
            1,
            0x8000_0000,
            0x7fff_ffff,
            0xffff_ffff,
            0x8000_0000_0000_0000,
            0x7ff0_0000_0000_0000,
            0x0000_0001_0000_0000,
            u64::MAX - 5,
        ];
        for t in KeyType::ALL {
            for desc in [false, true] {
                for &s in &samples {
                    let (hi, lo) = if t.is_wide() {
                        ((s >> 32) as u32, s as u32)
                    } else {
                        (s as u32, 0)
                    };
                    if is_nan(t, hi, lo) {
                        continue;
                    }
                    let (h, l) = encode(t, desc, hi, lo);
                    assert_eq!(decode(t, desc, h, l), (hi, lo), "{t} desc={desc} {s:#x}");
                }
            }
        }
    }

    #[test]
    fn float_order_is_total_with_nan_last_both_ways() {
        let v = [
            f32::NAN,
            1.0,
            -0.0,
            0.0,
            f32::NEG_INFINITY,
            f32::INFINITY,
            -f32::NAN,
            -1.0,
            f32::MIN_POSITIVE / 2.0,
        ];
        let up = sorted(&v, SortOrder::default());
        assert_eq!(
            &up[..7].iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            &[
                f32::NEG_INFINITY,
                -1.0,
                -0.0,
                0.0,
                f32::MIN_POSITIVE / 2.0,
                1.0,
                f32::INFINITY
            ]
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>()
        );
        assert!(up[7].is_nan() && up[8].is_nan());
        let down = sorted(
            &v,
            SortOrder {
                descending: true,
                segment_size: None,
            },
        );
        assert_eq!(down[0], f32::INFINITY);
        assert_eq!(down[3].to_bits(), 0.0f32.to_bits());
        assert_eq!(down[4].to_bits(), (-0.0f32).to_bits());
        assert!(down[7].is_nan() && down[8].is_nan());
    }

    #[test]
    fn signed_order() {
        let v = [3i64, -1, i64::MIN, i64::MAX, 0];
        assert_eq!(
            sorted(&v, SortOrder::default()),
            vec![i64::MIN, -1, 0, 3, i64::MAX]
        );
    }
}
