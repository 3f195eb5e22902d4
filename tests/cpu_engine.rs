//! The CPU engine (`gpusort_core::cpu_engine`) against the CPU twins: sorts of every key type,
//! shape, direction, payload, segment size and key-bit range; every scan operator; splits; and
//! stencils bit for bit. No GPU involved.

use gpusort_core::cpu_engine as engine;
use gpusort_core::reference::keys::{self as twin, canonical};
use gpusort_core::reference::{radix as radix_twin, scan as scan_twin, stencil as stencil_twin};
use gpusort_core::scan::{Predicate, ScanOp};
use gpusort_core::stencil::{Boundary, GridShape, Stencil};
use gpusort_core::{SortKey, SortOrder};
use gpusort_tests::*;
use rand::Rng;

/// Sizes around the engine's sequential cut-off (2^15) and its chunking, and the small edges.
fn sizes() -> Vec<usize> {
    let mut v = vec![0, 1, 2, 3, 17, 1000];
    v.extend([(1 << 15) - 1, 1 << 15, (1 << 15) + 1, 100_003]);
    v
}

fn same_bits<T: SortKey>(a: &[T], b: &[T]) -> bool {
    bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b)
}

/// Keys of type `T` from u64 bit patterns, with specials mixed in for floats.
fn keys_of<T: SortKey>(n: usize, shape: Shape, seed: u64, specials: &[T]) -> Vec<T> {
    let mut keys: Vec<T> = bits(n, shape, seed)
        .into_iter()
        .map(|b| {
            let bytes = b.to_le_bytes();
            bytemuck::pod_read_unaligned(&bytes[..std::mem::size_of::<T>()])
        })
        .collect();
    let mut r = rng(seed ^ 0x5eed);
    if n > 0 && matches!(shape, Shape::Random) {
        for s in specials {
            let i = r.random_range(0..n);
            keys[i] = *s;
        }
    }
    keys
}

fn check_sorts<T: SortKey>(specials: &[T]) {
    for n in sizes() {
        for (s, shape) in SHAPES.into_iter().enumerate() {
            let keys = keys_of::<T>(n, shape, (n * 31 + s) as u64, specials);
            for descending in [false, true] {
                for segment_size in [None, Some(1), Some(7), Some(4096)] {
                    let order = SortOrder {
                        descending,
                        segment_size,
                    };
                    let want_perm = twin::argsort(&keys, order);
                    let want: Vec<T> = want_perm
                        .iter()
                        .map(|&i| canonical(&keys[i as usize]))
                        .collect();
                    let what = format!("{} n={n} {shape:?} {order:?}", T::TYPE);
                    // keys only
                    let mut k = keys.clone();
                    assert!(engine::sort(&mut k, None, false, order, None)
                        .unwrap()
                        .is_none());
                    assert!(same_bits(&k, &want), "keys only: {what}");
                    // the permutation alone, the keys left where they are
                    assert_eq!(
                        engine::argsort(&keys, order, None).unwrap(),
                        want_perm,
                        "argsort: {what}"
                    );
                    // with values and the permutation
                    let mut k = keys.clone();
                    let mut v: Vec<u32> = (0..n as u32).map(|i| i ^ 0xabcd).collect();
                    let perm = engine::sort(&mut k, Some(&mut v), true, order, None)
                        .unwrap()
                        .unwrap();
                    assert!(same_bits(&k, &want), "keys with values: {what}");
                    assert_eq!(perm, want_perm, "permutation (stable): {what}");
                    assert!(
                        v.iter().zip(&perm).all(|(&v, &i)| v == i ^ 0xabcd),
                        "{what}"
                    );
                }
            }
        }
    }
}

#[test]
fn sorts_match_the_twin_for_every_key_type() {
    check_sorts::<u32>(&[0, u32::MAX]);
    check_sorts::<i32>(&[i32::MIN, -1, 0, i32::MAX]);
    check_sorts::<f32>(&f32_specials());
    check_sorts::<u64>(&[0, u64::MAX]);
    check_sorts::<i64>(&[i64::MIN, -1, 0, i64::MAX]);
    check_sorts::<f64>(&f64_specials());
}

fn check_key_bits<T: SortKey>(ranges: &[std::ops::Range<u32>]) {
    for n in [0, 5, 40_000, 100_003] {
        let keys = keys_of::<T>(n, Shape::Random, n as u64 + 9, &[]);
        for bits in ranges {
            for descending in [false, true] {
                let (want, _) = radix_twin::argsort(&keys, descending, bits.clone());
                let mut k = keys.clone();
                let order = SortOrder {
                    descending,
                    segment_size: None,
                };
                let perm = engine::sort(&mut k, None, true, order, Some(bits.clone()))
                    .unwrap()
                    .unwrap();
                assert_eq!(perm, want, "{} n={n} bits {bits:?}", T::TYPE);
            }
        }
    }
}

/// Key sets of real data, whose sortable words share their top bits (floats of a few exponents,
/// small integers, timestamps): the MSD levels and the counting sort against the twin.
#[test]
fn clustered_keys_match_the_twin() {
    fn check<T: SortKey>(name: &str, keys: Vec<T>) {
        for descending in [false, true] {
            let order = SortOrder {
                descending,
                segment_size: None,
            };
            let want_perm = twin::argsort(&keys, order);
            let want: Vec<T> = want_perm
                .iter()
                .map(|&i| canonical(&keys[i as usize]))
                .collect();
            let mut k = keys.clone();
            engine::sort(&mut k, None, false, order, None).unwrap();
            assert!(
                same_bits(&k, &want),
                "{name} descending={descending}: keys only"
            );
            let mut k = keys.clone();
            let perm = engine::sort(&mut k, None, true, order, None)
                .unwrap()
                .unwrap();
            assert!(same_bits(&k, &want), "{name} descending={descending}: keys");
            assert_eq!(
                perm, want_perm,
                "{name} descending={descending}: permutation"
            );
            assert_eq!(
                engine::argsort(&keys, order, None).unwrap(),
                want_perm,
                "{name}: argsort"
            );
        }
    }
    let n = 300_000;
    let mut r = rng(77);
    let normal =
        |r: &mut rand::rngs::StdRng| (0..4).map(|_| r.random_range(-1.0..1.0)).sum::<f64>();
    check(
        "f64 normal",
        (0..n).map(|_| normal(&mut r)).collect::<Vec<f64>>(),
    );
    check(
        "f32 normal",
        (0..n).map(|_| normal(&mut r) as f32).collect::<Vec<f32>>(),
    );
    check(
        "f32 unit",
        (0..n).map(|_| r.random::<f32>()).collect::<Vec<f32>>(),
    );
    check(
        "i32 small",
        (0..n)
            .map(|_| r.random_range(0..1000))
            .collect::<Vec<i32>>(),
    );
    check(
        "i64 pm2^20",
        (0..n)
            .map(|_| r.random_range(-(1 << 20)..1 << 20))
            .collect::<Vec<i64>>(),
    );
    let t0 = 1_700_000_000_000_000u64;
    check(
        "u64 timestamps",
        (0..n)
            .map(|_| t0 + r.random_range(0..31_536_000_000_000))
            .collect::<Vec<u64>>(),
    );
}

#[test]
fn key_bit_ranges_match_the_twin() {
    check_key_bits::<u32>(&[0..32, 0..20, 8..16, 3..29, 31..32]);
    check_key_bits::<f32>(&[0..32, 16..32]);
    check_key_bits::<u64>(&[0..64, 0..40, 32..64, 20..36]);
    check_key_bits::<i64>(&[0..64, 48..64]);
}

fn check_scans<T: SortKey>(data_of: impl Fn(usize, u64) -> Vec<T>, ops: &[ScanOp], exact: bool) {
    for n in sizes() {
        let data = data_of(n, n as u64);
        for &op in ops {
            for inclusive in [false, true] {
                let want = scan_twin::scan(&data, op, inclusive);
                let mut got = vec![data.first().copied().unwrap_or_else(T::zeroed); n];
                engine::scan(&data, &mut got, op, inclusive).unwrap();
                let what = format!("{} n={n} {op:?} inclusive={inclusive}", T::TYPE);
                if exact {
                    assert!(same_bits(&got, &want), "{what}");
                } else {
                    // f32 sums in another order: within 1e-5 of the running sum of |x|
                    let (g, w, x): (&[f32], &[f32], &[f32]) = (
                        bytemuck::cast_slice(&got),
                        bytemuck::cast_slice(&want),
                        bytemuck::cast_slice(&data),
                    );
                    let mut abs = 0.0f64;
                    for i in 0..n {
                        abs += x[i].abs() as f64;
                        let tol = 1e-5 * abs + 1e-6;
                        assert!(((g[i] - w[i]) as f64).abs() <= tol, "{what} at {i}");
                    }
                }
            }
        }
    }
}

#[test]
fn scans_match_the_twin_for_every_operator() {
    use ScanOp::*;
    let all = [Add, Max, Min, And, Or, Xor];
    check_scans::<u32>(
        |n, s| {
            let mut r = rng(s);
            (0..n).map(|_| r.random()).collect()
        },
        &all,
        true,
    );
    check_scans::<i32>(
        |n, s| {
            let mut r = rng(s);
            (0..n).map(|_| r.random()).collect()
        },
        &all,
        true,
    );
    check_scans::<f32>(
        |n, s| {
            let mut r = rng(s);
            (0..n).map(|_| r.random_range(-1.0..1.0)).collect()
        },
        &[Add],
        true,
    );
    // 64-bit elements against their twin
    for n in sizes() {
        let mut r = rng(n as u64 + 5);
        let u: Vec<u64> = (0..n).map(|_| r.random()).collect();
        let i: Vec<i64> = (0..n).map(|_| r.random()).collect();
        for op in all {
            for inclusive in [false, true] {
                let mut got = vec![0u64; n];
                engine::scan(&u, &mut got, op, inclusive).unwrap();
                assert!(
                    got == scan_twin::scan64(&u, op, inclusive),
                    "u64 n={n} {op:?}"
                );
                let mut got = vec![0i64; n];
                engine::scan(&i, &mut got, op, inclusive).unwrap();
                assert!(
                    got == scan_twin::scan64(&i, op, inclusive),
                    "i64 n={n} {op:?}"
                );
            }
        }
        let f: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
        let mut got = vec![0f64; n];
        engine::scan(&f, &mut got, Add, true).unwrap();
        let want = scan_twin::scan64(&f, Add, true);
        assert!(same_bits(&got, &want), "f64 n={n}");
    }
}

/// `run(inclusive, out)` on one thread and on three: inclusive results `same` as `want`,
/// exclusive ones as `want` shifted one place on from `zero`.
fn scans_both_ways_on_any_thread_count<T: Copy + Send + Sync>(
    want: &[T],
    zero: T,
    what: &str,
    same: impl Fn(&[T], &[T]) -> bool,
    run: impl Fn(bool, &mut [T]) -> gpusort_core::Result<()> + Sync,
) {
    let mut shifted = vec![zero];
    shifted.extend_from_slice(&want[..want.len().saturating_sub(1)]);
    shifted.truncate(want.len());
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for (inclusive, want) in [(true, want), (false, &shifted[..])] {
            let mut got = vec![zero; want.len()];
            pool.install(|| run(inclusive, &mut got)).unwrap();
            assert!(
                same(&got, want),
                "inclusive={inclusive} {what} threads={threads}"
            );
        }
    }
}

/// Float sums add in NumPy's `cumsum` order, bit for bit: the first result is the first
/// element (-0.0 kept), then one element after another; exclusive ones from +0.0; the same bits
/// on one thread and on three (no chunking that a thread count decides).
#[test]
fn float_sums_add_in_numpy_order_on_any_thread_count() {
    fn check<F>(data: &[F], zero: F, add: impl Fn(F, F) -> F)
    where
        F: SortKey + std::fmt::Debug,
    {
        let mut want = Vec::with_capacity(data.len());
        for (i, &x) in data.iter().enumerate() {
            want.push(if i == 0 { x } else { add(want[i - 1], x) });
        }
        let what = format!("{} n={}", F::TYPE, data.len());
        scans_both_ways_on_any_thread_count(&want, zero, &what, same_bits, |inclusive, got| {
            engine::scan(data, got, ScanOp::Add, inclusive)
        });
    }
    let mut r = rng(77);
    for n in [0usize, 1, 2, (1 << 16) - 1, (1 << 16) + 1, 300_001] {
        let mut f: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0) * 1e3).collect();
        let mut d: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0) * 1e3).collect();
        if n > 0 {
            (f[0], d[0]) = (-0.0, -0.0);
        }
        check(&f, 0.0f32, |a, b| a + b);
        check(&d, 0.0f64, |a, b| a + b);
    }
}

/// Sums of 32-bit integers widened to 64 bits (NumPy's cumsum dtype rule) equal an in-order
/// loop in 64 bits, wrapping past the type's end, inclusive and exclusive, on one thread and on
/// three, at chunk edges; integer sums of every width equal the twin's.
#[test]
fn integer_sums_widen_and_wrap_on_any_thread_count() {
    fn check<S: SortKey, T: SortKey + PartialEq + std::fmt::Debug>(
        data: &[S],
        widen: fn(S) -> T,
        add: fn(T, T) -> T,
    ) {
        let mut want = Vec::with_capacity(data.len());
        let mut acc = T::zeroed();
        for &x in data {
            acc = add(acc, widen(x));
            want.push(acc);
        }
        let what = format!("{} n={}", S::TYPE, data.len());
        let equal = |a: &[T], b: &[T]| a == b;
        scans_both_ways_on_any_thread_count(&want, T::zeroed(), &what, equal, |inclusive, got| {
            engine::sum_widened(data, got, inclusive, widen, add)
        });
    }
    let mut r = rng(78);
    // 15-17 and 33 about the AVX-512 sums' sixteen elements a round (cpu_engine/simd.rs)
    for n in [
        0usize,
        1,
        2,
        15,
        16,
        17,
        33,
        (1 << 16) - 1,
        (1 << 16) + 1,
        300_001,
    ] {
        let i: Vec<i32> = (0..n)
            .map(|_| r.random_range(i32::MIN..=i32::MAX))
            .collect();
        let u: Vec<u32> = (0..n)
            .map(|_| r.random_range(u32::MAX - 9..=u32::MAX))
            .collect();
        check(&i, i64::from, i64::wrapping_add);
        check(&u, u64::from, u64::wrapping_add);
        // 64-bit sums that wrap, through the engine's scan against the twin: in one pass (one
        // thread) and in chunks (three)
        let w: Vec<u64> = (0..n)
            .map(|_| r.random_range(u64::MAX / 2..=u64::MAX))
            .collect();
        let want = scan_twin::scan64(&w, ScanOp::Add, true);
        let what = format!("u64 sums n={n}");
        scans_both_ways_on_any_thread_count(
            &want,
            0u64,
            &what,
            |a, b| a == b,
            |inclusive, got| engine::scan(&w, got, ScanOp::Add, inclusive),
        );
        let v: Vec<i32> = i.clone();
        for inclusive in [true, false] {
            let mut got = vec![0u64; n];
            engine::scan(&w, &mut got, ScanOp::Add, inclusive).unwrap();
            assert_eq!(
                got,
                scan_twin::scan64(&w, ScanOp::Add, inclusive),
                "u64 n={n}"
            );
            let mut got = vec![0i32; n];
            engine::scan(&v, &mut got, ScanOp::Add, inclusive).unwrap();
            assert_eq!(
                got,
                scan_twin::scan(&v, ScanOp::Add, inclusive),
                "i32 n={n}"
            );
        }
    }
}

fn check_splits<T: SortKey + PartialEq>(keys: &[T], pivots: &[T]) {
    let payload: Vec<u32> = (0..keys.len() as u32).collect();
    let mut preds = vec![Predicate::NonZero];
    for &p in pivots {
        preds.push(Predicate::Below(p));
        preds.push(Predicate::AtLeast(p));
    }
    for p in &preds {
        let (want, want_pl, want_split) = scan_twin::partition(keys, Some(&payload), p);
        let (got, got_pl, split) = engine::split(keys, Some(&payload), p, true).unwrap();
        assert_eq!(split, want_split, "{} n={}", T::TYPE, keys.len());
        assert!(same_bits(&got, &want));
        assert_eq!(got_pl, want_pl);
        let (got, got_pl, kept) = engine::split(keys, None, p, false).unwrap();
        assert_eq!(kept, want_split);
        assert!(same_bits(&got, &want[..want_split]));
        assert!(got_pl.is_none());
    }
}

#[test]
fn splits_match_the_twin() {
    for n in sizes() {
        let mut r = rng(n as u64 + 77);
        let u: Vec<u32> = (0..n).map(|_| r.random_range(0..1000)).collect();
        check_splits(&u, &[0, 500, 1000]);
        let i: Vec<i64> = (0..n).map(|_| r.random_range(-500..500)).collect();
        check_splits(&i, &[-1, 0, 250]);
        let mut f: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
        for (k, s) in f32_specials().into_iter().enumerate().take(n) {
            f[k * 7 % n.max(1)] = s;
        }
        check_splits(&f, &[0.0, -0.0, 0.5, f32::INFINITY, f32::NAN]);
        let d: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
        check_splits(&d, &[0.0, 0.25]);
    }
}

#[test]
fn stencils_are_bit_identical_to_the_twin() {
    let boundaries = Boundary::ALL;
    let shapes: [&[usize]; 6] = [
        &[1, 1],
        &[3, 5],
        &[37, 64],
        &[130, 97],
        &[5, 6, 7],
        &[17, 12, 33],
    ];
    let mut seed = 0;
    for extents in shapes {
        let shape = GridShape::new(extents).unwrap();
        let dims = extents.len();
        for radius in 1..=3u32 {
            if extents.iter().any(|&e| (e as u32) < radius) {
                continue;
            }
            let stencils = [
                Stencil::star(dims, radius).unwrap(),
                Stencil::boxed(dims, radius).unwrap(),
            ];
            for stencil in &stencils {
                for &boundary in &boundaries {
                    seed += 1;
                    let mut r = rng(seed);
                    let grid: Vec<f32> = (0..shape.cells())
                        .map(|_| r.random_range(-1.0..1.0))
                        .collect();
                    for steps in 0..=3 {
                        let want = stencil_twin::run(&grid, shape, stencil, boundary, 0.25, steps);
                        let mut out = vec![0f32; grid.len()];
                        let mut scratch = vec![0f32; grid.len()];
                        engine::stencil(
                            &grid,
                            &mut out,
                            &mut scratch,
                            shape,
                            stencil,
                            boundary,
                            0.25,
                            steps,
                        );
                        assert!(
                            same_bits(&out, &want),
                            "{extents:?} r{radius} {boundary} {} taps, {steps} steps",
                            stencil.taps().len()
                        );
                    }
                }
            }
        }
    }
    // f64 too
    let shape = GridShape::new(&[40, 50]).unwrap();
    let grid: Vec<f64> = (0..2000).map(|i| ((i * 37) % 101) as f64 / 7.0).collect();
    let stencil = Stencil::star(2, 2).unwrap();
    let want = stencil_twin::run(&grid, shape, &stencil, Boundary::Reflect, 0.0, 2);
    let (mut out, mut scratch) = (vec![0f64; 2000], vec![0f64; 2000]);
    engine::stencil(
        &grid,
        &mut out,
        &mut scratch,
        shape,
        &stencil,
        Boundary::Reflect,
        0.0,
        2,
    );
    assert!(same_bits(&out, &want));
}

/// An array split around its sample's median holds the same keys (bit for bit, but for the
/// sign of zeros equal to the pivot), every key of the low run below the equal run's keys and
/// every key of the high run above them or NaN; where it declines (a half over three quarters,
/// no number) the output is untouched. Every key type, sizes around the pieces, few distinct
/// keys, all equal, all NaN, a wrong length.
#[test]
fn split_halves_keeps_every_key_on_its_side() {
    fn check<T: SortKey + PartialOrd>(specials: &[T]) {
        let nan = |k: &T| k.partial_cmp(k).is_none();
        let fill = <T as bytemuck::Zeroable>::zeroed();
        for (s, n) in [0usize, 1, 2, 1000, (1 << 15) - 1, (1 << 15) + 1, 70_001]
            .into_iter()
            .enumerate()
        {
            for shape in [Shape::Random, Shape::FewDistinct, Shape::AllEqual] {
                let keys = keys_of::<T>(n, shape, s as u64, specials);
                let mut out = vec![fill; n];
                let what = format!("{} {n} {shape:?}", T::TYPE);
                let Some((lo, hi)) = engine::split_halves(&keys, &mut out).unwrap() else {
                    assert!(
                        same_bits(&out, &vec![fill; n]),
                        "{what}: declined but written"
                    );
                    continue;
                };
                assert!(lo <= hi && hi <= n, "{what}");
                assert!(4 * lo.max(n - hi) <= 3 * n, "{what}: unbalanced halves");
                let (low, rest) = out.split_at(lo);
                let (equal, high) = rest.split_at(hi - lo);
                if let Some(p) = equal.first() {
                    assert!(equal.iter().all(|k| k == p), "{what}");
                    assert!(low.iter().all(|k| k < p), "{what}");
                    assert!(high.iter().all(|k| nan(k) || k > p), "{what}");
                } else {
                    let top = low.iter().copied().reduce(|a, b| if b > a { b } else { a });
                    let bottom = high.iter().copied().filter(|k| !nan(k));
                    let bottom = bottom.reduce(|a, b| if b < a { b } else { a });
                    if let (Some(t), Some(b)) = (top, bottom) {
                        assert!(t < b, "{what}");
                    }
                }
                // the same keys: sorted in NumPy's order (equal keys, NaNs among them, by their
                // bits), equal everywhere, bit for bit but for zeros' signs
                let by_bits = |v: &[T]| {
                    let mut v = v.to_vec();
                    let bits = |k: &T| bytemuck::bytes_of(k).to_vec();
                    v.sort_by(|x, y| match (nan(x), nan(y)) {
                        (false, false) => x.partial_cmp(y).unwrap().then(bits(x).cmp(&bits(y))),
                        (xn, yn) => xn.cmp(&yn).then(bits(x).cmp(&bits(y))),
                    });
                    v
                };
                let (got, want) = (by_bits(&out), by_bits(&keys));
                for (g, w) in got.iter().zip(&want) {
                    let zeros = g == w && *g == fill;
                    assert!(zeros || same_bits(&[*g], &[*w]), "{what}");
                }
            }
        }
        assert!(
            engine::split_halves::<T>(&[], &mut [fill]).is_err(),
            "a wrong length"
        );
    }
    check::<u32>(&[0, u32::MAX]);
    check::<i32>(&[i32::MIN, -1, 0, i32::MAX]);
    check::<f32>(&f32_specials());
    check::<u64>(&[0, u64::MAX]);
    check::<i64>(&[i64::MIN, -1, 0, i64::MAX]);
    check::<f64>(&f64_specials());
    // nothing but NaNs: no pivot, nothing written
    let mut out = vec![1.0f32; 5];
    assert_eq!(
        engine::split_halves(&[f32::NAN; 5], &mut out).unwrap(),
        None
    );
    assert!(same_bits(&out, &[1.0f32; 5]));
    // zeros of both signs equal to a zero pivot: all in the equal run
    let keys: Vec<f32> = (0..4000).map(|i| [-0.0, 0.0, -1.0, 1.0][i % 4]).collect();
    let mut out = vec![7.0f32; 4000];
    assert_eq!(
        engine::split_halves(&keys, &mut out).unwrap(),
        Some((1000, 3000))
    );
    assert!(out[1000..3000].iter().all(|&k| k == 0.0));
}

/// A caller's stop (`cancel::watching`) ends every CPU-engine job with `Cancelled`: sorts with
/// and without a permutation, argsorts, segmented ones, scans and splits; a clear flag changes
/// nothing.
#[test]
fn a_stopped_caller_ends_cpu_engine_jobs() {
    use gpusort_core::cancel::watching;
    use gpusort_core::Error;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let keys: Vec<f32> = keys_of(100_003, Shape::Random, 11, &[f32::NAN, -0.0]);
    let order = SortOrder::default();
    let segmented = SortOrder {
        segment_size: Some(4096),
        ..order
    };
    let set = Arc::new(AtomicBool::new(true));
    let clear = Arc::new(AtomicBool::new(false));
    let cancelled = |r: Result<(), Error>| matches!(r, Err(Error::Cancelled));
    let jobs = |flag: &Arc<AtomicBool>| -> Vec<Result<(), Error>> {
        watching(flag, || {
            let mut k = keys.clone();
            let mut v: Vec<u32> = (0..k.len() as u32).collect();
            let mut out = vec![0.0f32; keys.len()];
            let pivot = Predicate::Below(0.5f32);
            vec![
                engine::sort(&mut k.clone(), None, false, order, None).map(drop),
                engine::sort(&mut k, Some(&mut v), true, order, None).map(drop),
                engine::argsort(&keys, order, None).map(drop),
                engine::argsort(&keys, segmented, None).map(drop),
                engine::scan(&keys, &mut out, ScanOp::Add, true),
                engine::split(&keys, None, &pivot, true).map(drop),
            ]
        })
    };
    let stopped = jobs(&set);
    assert!(
        stopped.into_iter().all(cancelled),
        "every job ends Cancelled"
    );
    let done = jobs(&clear);
    assert!(done.iter().all(|r| r.is_ok()), "{done:?}");
}
