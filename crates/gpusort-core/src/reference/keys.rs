//! CPU twin of shaders/keys.wgsl, and the reference sort every GPU sort is checked against;
//! the key order itself lives in `crate::keys::order` (re-exported here).

pub use crate::keys::order::*;
use crate::keys::{SortKey, SortOrder};

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
    use crate::keys::order::is_nan;
    use crate::keys::KeyType;

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
