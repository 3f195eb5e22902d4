//! The CPU engine's one native escape: the 64-bit integer sum scan in AVX-512 registers where the
//! CPU has them (eight sums at a time instead of one; docs/BENCHMARKS.md, "The Python package
//! without a GPU"), else one element at a time. Both give the same wrapping sums.

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
