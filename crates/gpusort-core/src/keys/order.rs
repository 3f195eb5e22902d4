//! The sort order of every key type as words (the kernels' common/keyorder.wgsl is its GPU
//! side): encode and decode, the sortable value, canonical NaNs, fingerprints. Shared by the
//! engines, the external sort and the CPU twins (`reference`), so none imports another for it.

use std::ops::Range;

use super::{KeyType, SortKey};

const INF: u32 = u32::MAX;

pub(crate) fn is_nan(t: KeyType, hi: u32, lo: u32) -> bool {
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

/// The sortable value of a key as the radix sort sees it: the one word of a 32-bit key in the
/// low bits, the (hi, lo) words of a 64-bit key as one u64.
pub fn sortable_bits<T: SortKey>(key: &T, descending: bool) -> u64 {
    let s = sortable(key, descending);
    if T::TYPE.is_wide() {
        s
    } else {
        s >> 32
    }
}

/// What a sort on `bits` compares: those bits of the sortable value, shifted down.
pub fn key_on_bits<T: SortKey>(key: &T, descending: bool, bits: &Range<u32>) -> u64 {
    let v = sortable_bits(key, descending) >> bits.start;
    match bits.end - bits.start {
        w if w >= 64 => v,
        w => v & ((1u64 << w) - 1),
    }
}
