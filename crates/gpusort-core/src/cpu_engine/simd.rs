//! The CPU engine's one native escape: AVX-512 registers where the CPU has them, for the 64-bit
//! integer sum scan (eight sums at a time instead of one) and for the split of keys around a
//! pivot (sixteen or eight keys compared and packed at a time; docs/BENCHMARKS.md, "The Python
//! package without a GPU"). Elsewhere the callers' plain loops answer, with the same results.

/// `src` sum-scanned (wrapping) into `dst` of the same length, starting from `carry`: inclusive,
/// or each element's sum before it. Returns the sum through the last element.
pub(super) fn sum_u64(src: &[u64], dst: &mut [u64], carry: u64, inclusive: bool) -> u64 {
    assert_eq!(src.len(), dst.len(), "a scan writes one result an element");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked on the line above: the one requirement of the
        // function's target feature), and the function reads `src` and writes `dst` only below
        // their common length (asserted above).
        return unsafe { avx512::sum_u64(src, dst, carry, inclusive) };
    }
    sum_u64_plain(src, dst, carry, inclusive)
}

/// [`sum_u64`] one element at a time (also its tail).
pub(super) fn sum_u64_plain(src: &[u64], dst: &mut [u64], carry: u64, inclusive: bool) -> u64 {
    let mut acc = carry;
    for (d, &x) in dst.iter_mut().zip(src) {
        let before = acc;
        acc = acc.wrapping_add(x);
        *d = if inclusive { acc } else { before };
    }
    acc
}

/// How keys of 32 or 64 bits compare, as their type's `<` does: unsigned, two's complement, or
/// IEEE (-0.0 equal to +0.0; a NaN neither below nor equal to anything, so above).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Order {
    Unsigned,
    Signed,
    Float,
}

/// The keys' counts below `pivot` and above it (NaNs above), each key's bits in `keys` (u32 or
/// u64 words); `None` where the CPU lacks AVX-512 (the caller counts).
pub(super) fn count_around<W: Word>(keys: &[W], pivot: W, order: Order) -> Option<(usize, usize)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked on the line above); the function only reads
        // `keys`.
        return Some(unsafe { W::count_avx512(keys, pivot, order) });
    }
    let _ = (keys, pivot, order);
    None
}

/// The keys below `pivot` into `low` and those above it into `high` (each in any order, and
/// exactly as long as [`count_around`] counted them); the keys equal to it are left out. `false`
/// (nothing written) where the CPU lacks AVX-512.
pub(super) fn split_around<W: Word>(
    keys: &[W],
    pivot: W,
    order: Order,
    low: &mut [W],
    high: &mut [W],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked on the line above); the function writes `low`
        // and `high` only below their lengths, checked before each store.
        unsafe { W::split_avx512(keys, pivot, order, low, high) };
        return true;
    }
    let _ = (keys, pivot, order, low, high);
    false
}

/// A key's bits: u32 (sixteen a register) or u64 (eight).
pub(super) trait Word: Copy {
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    unsafe fn count_avx512(keys: &[Self], pivot: Self, order: Order) -> (usize, usize);
    /// # Safety
    /// The CPU must have AVX-512F.
    #[cfg(target_arch = "x86_64")]
    unsafe fn split_avx512(
        keys: &[Self],
        pivot: Self,
        order: Order,
        low: &mut [Self],
        high: &mut [Self],
    );
    /// Below and above `pivot`, one key (the vectors' tails).
    fn below_above(self, pivot: Self, order: Order) -> (bool, bool);
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{__m512i, __mmask16, __mmask8};

macro_rules! word {
    ($w:ty, $i:ty, $f:ty, $lanes:expr, $mask:ty, $masks:ident, $set1:ident, $load:ident,
     $compress:ident, $store:ident, $ltu:ident, $gtu:ident, $lti:ident, $gti:ident, $cast:ident,
     $cmpf:ident) => {
        /// The lanes of `v` below `p` and above it, in `order`.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f")]
        #[inline]
        fn $masks(v: __m512i, p: __m512i, order: Order) -> ($mask, $mask) {
            use std::arch::x86_64::*;
            match order {
                Order::Unsigned => ($ltu(v, p), $gtu(v, p)),
                Order::Signed => ($lti(v, p), $gti(v, p)),
                Order::Float => {
                    let (vf, pf) = ($cast(v), $cast(p));
                    ($cmpf::<_CMP_LT_OQ>(vf, pf), !$cmpf::<_CMP_LE_OQ>(vf, pf))
                }
            }
        }

        impl Word for $w {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f")]
            unsafe fn count_avx512(keys: &[$w], pivot: $w, order: Order) -> (usize, usize) {
                use std::arch::x86_64::*;
                let p = $set1(pivot as $i);
                let (mut below, mut above) = (0usize, 0usize);
                let vectors = keys.len() / $lanes;
                for k in 0..vectors {
                    // SAFETY: (k + 1) * lanes <= keys.len()
                    let v = unsafe { $load(keys.as_ptr().add(k * $lanes).cast()) };
                    let (lt, gt) = $masks(v, p, order);
                    below += lt.count_ones() as usize;
                    above += gt.count_ones() as usize;
                }
                for &x in &keys[vectors * $lanes..] {
                    let (b, a) = x.below_above(pivot, order);
                    below += b as usize;
                    above += a as usize;
                }
                (below, above)
            }

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f")]
            unsafe fn split_avx512(
                keys: &[$w],
                pivot: $w,
                order: Order,
                low: &mut [$w],
                high: &mut [$w],
            ) {
                use std::arch::x86_64::*;
                let p = $set1(pivot as $i);
                let (mut l, mut h) = (0usize, 0usize);
                let vectors = keys.len() / $lanes;
                for k in 0..vectors {
                    // SAFETY: (k + 1) * lanes <= keys.len()
                    let v = unsafe { $load(keys.as_ptr().add(k * $lanes).cast()) };
                    let (lt, gt) = $masks(v, p, order);
                    let (nl, nh) = (lt.count_ones() as usize, gt.count_ones() as usize);
                    // the packed keys' first nl (nh) lanes: stores of those lanes alone
                    assert!(
                        l + nl <= low.len() && h + nh <= high.len(),
                        "split counts differ"
                    );
                    let first = |n: usize| ((1u32 << n) - 1) as $mask;
                    // SAFETY: lanes [0, nl) land on low[l..l + nl] and [0, nh) on
                    // high[h..h + nh], within the slices (asserted above)
                    unsafe {
                        $store(low.as_mut_ptr().add(l).cast(), first(nl), $compress(lt, v));
                        $store(high.as_mut_ptr().add(h).cast(), first(nh), $compress(gt, v));
                    }
                    l += nl;
                    h += nh;
                }
                for &x in &keys[vectors * $lanes..] {
                    let (b, a) = x.below_above(pivot, order);
                    if b {
                        low[l] = x;
                        l += 1;
                    } else if a {
                        high[h] = x;
                        h += 1;
                    }
                }
            }

            fn below_above(self, pivot: $w, order: Order) -> (bool, bool) {
                match order {
                    Order::Unsigned => (self < pivot, self > pivot),
                    Order::Signed => ((self as $i) < (pivot as $i), (self as $i) > (pivot as $i)),
                    Order::Float => {
                        let (x, p) = (<$f>::from_bits(self), <$f>::from_bits(pivot));
                        #[allow(clippy::neg_cmp_op_on_partial_ord)]
                        (x < p, !(x <= p))
                    }
                }
            }
        }
    };
}

word!(
    u32,
    i32,
    f32,
    16,
    __mmask16,
    masks_u32,
    _mm512_set1_epi32,
    _mm512_loadu_si512,
    _mm512_maskz_compress_epi32,
    _mm512_mask_storeu_epi32,
    _mm512_cmplt_epu32_mask,
    _mm512_cmpgt_epu32_mask,
    _mm512_cmplt_epi32_mask,
    _mm512_cmpgt_epi32_mask,
    _mm512_castsi512_ps,
    _mm512_cmp_ps_mask
);
word!(
    u64,
    i64,
    f64,
    8,
    __mmask8,
    masks_u64,
    _mm512_set1_epi64,
    _mm512_loadu_si512,
    _mm512_maskz_compress_epi64,
    _mm512_mask_storeu_epi64,
    _mm512_cmplt_epu64_mask,
    _mm512_cmpgt_epu64_mask,
    _mm512_cmplt_epi64_mask,
    _mm512_cmpgt_epi64_mask,
    _mm512_castsi512_pd,
    _mm512_cmp_pd_mask
);

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Sixteen elements a round: each vector's own inclusive sums by three shifted adds (lanes
    /// shifted in from zero), the second vector offset by the first's total, both by the carry.
    ///
    /// # Safety
    /// The CPU must have AVX-512F, and `dst` must be at least as long as `src`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn sum_u64(src: &[u64], dst: &mut [u64], carry: u64, inclusive: bool) -> u64 {
        let n = src.len();
        let zero = _mm512_setzero_si512();
        let last = _mm512_set1_epi64(7);
        let mut carry_v = _mm512_set1_epi64(carry as i64);
        let prefix = |v: __m512i| {
            let v = _mm512_add_epi64(v, _mm512_alignr_epi64::<7>(v, zero));
            let v = _mm512_add_epi64(v, _mm512_alignr_epi64::<6>(v, zero));
            _mm512_add_epi64(v, _mm512_alignr_epi64::<4>(v, zero))
        };
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY (loads and stores): i + 16 <= n, and n <= dst.len()
            let (a, b) = unsafe {
                (
                    _mm512_loadu_si512(src.as_ptr().add(i).cast()),
                    _mm512_loadu_si512(src.as_ptr().add(i + 8).cast()),
                )
            };
            let pa = prefix(a);
            let pb = _mm512_add_epi64(prefix(b), _mm512_permutexvar_epi64(last, pa));
            let pa = _mm512_add_epi64(pa, carry_v);
            let pb = _mm512_add_epi64(pb, carry_v);
            carry_v = _mm512_permutexvar_epi64(last, pb);
            let (oa, ob) = match inclusive {
                true => (pa, pb),
                false => (_mm512_sub_epi64(pa, a), _mm512_sub_epi64(pb, b)),
            };
            unsafe {
                _mm512_storeu_si512(dst.as_mut_ptr().add(i).cast(), oa);
                _mm512_storeu_si512(dst.as_mut_ptr().add(i + 8).cast(), ob);
            }
            i += 16;
        }
        let mut lanes = [0u64; 8];
        // SAFETY: `lanes` holds eight u64s, one vector's worth
        unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), carry_v) };
        super::sum_u64_plain(&src[i..], &mut dst[i..n], lanes[0], inclusive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registers' split against one key at a time, every order and both widths, specials
    /// (NaNs, both zeros, infinities, the integer ends) mixed in, at lengths about a register's.
    #[test]
    fn splits_match_the_keys_own_order() {
        fn check<W: Word + Ord + std::fmt::Debug + Default>(
            specials: &[W],
            random: impl Fn(u64) -> W,
        ) {
            for order in [Order::Unsigned, Order::Signed, Order::Float] {
                for n in [0usize, 1, 7, 8, 9, 15, 16, 17, 33, 100] {
                    let keys: Vec<W> = (0..n as u64)
                        .map(|i| match i % 3 {
                            0 => specials[(i as usize / 3) % specials.len()],
                            _ => random(i * 2654435761 + n as u64),
                        })
                        .collect();
                    for &pivot in specials.iter().chain(keys.iter().take(3)) {
                        let (mut below, mut above) = (Vec::new(), Vec::new());
                        for &k in &keys {
                            match k.below_above(pivot, order) {
                                (true, _) => below.push(k),
                                (_, true) => above.push(k),
                                _ => {}
                            }
                        }
                        let what = format!("{order:?} n={n} pivot={pivot:?}");
                        let Some(counts) = count_around(&keys, pivot, order) else {
                            return; // no AVX-512 here: the callers' loops answer
                        };
                        assert_eq!(counts, (below.len(), above.len()), "{what}");
                        let mut low = vec![W::default(); below.len()];
                        let mut high = vec![W::default(); above.len()];
                        assert!(split_around(&keys, pivot, order, &mut low, &mut high));
                        for v in [&mut low, &mut high, &mut below, &mut above] {
                            v.sort();
                        }
                        assert_eq!((low, high), (below, above), "{what}");
                    }
                }
            }
        }
        let f32s = [
            f32::NAN,
            -0.0,
            0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1.5,
            -2.0,
        ];
        let f64s = [
            f64::NAN,
            -0.0,
            0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1.5,
            -2.0,
        ];
        let mut s32: Vec<u32> = f32s.iter().map(|x| x.to_bits()).collect();
        s32.extend([0, 1, u32::MAX, i32::MIN as u32, i32::MAX as u32]);
        let mut s64: Vec<u64> = f64s.iter().map(|x| x.to_bits()).collect();
        s64.extend([0, 1, u64::MAX, i64::MIN as u64, i64::MAX as u64]);
        check::<u32>(&s32, |i| {
            (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
        });
        check::<u64>(&s64, |i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }

    /// Both kernels against a wrapping loop, inclusive and exclusive, from a carry, at lengths
    /// about the sixteen elements a round (the AVX-512 one only where the CPU has it).
    #[test]
    fn both_kernels_give_the_loops_sums() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let data: Vec<u64> = (0..200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        for n in [0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 100, 200] {
            let src = &data[..n];
            for inclusive in [true, false] {
                let mut want = vec![0u64; n];
                let mut acc = u64::MAX - 3;
                for (w, &v) in want.iter_mut().zip(src) {
                    *w = if inclusive { acc.wrapping_add(v) } else { acc };
                    acc = acc.wrapping_add(v);
                }
                let mut got = vec![0u64; n];
                assert_eq!(sum_u64_plain(src, &mut got, u64::MAX - 3, inclusive), acc);
                assert_eq!(got, want, "plain n={n} inclusive={inclusive}");
                let mut got = vec![0u64; n];
                assert_eq!(sum_u64(src, &mut got, u64::MAX - 3, inclusive), acc);
                assert_eq!(got, want, "dispatched n={n} inclusive={inclusive}");
            }
        }
    }
}
