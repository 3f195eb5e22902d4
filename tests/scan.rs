//! Scans, compaction and partition on the GPU against their CPU twins, with and without
//! subgroups, including the look-back's fallback path.

use gpusort_core::device::transfer;
use gpusort_core::reference::scan as reference;
use gpusort_core::scan::streamed::{ScanStream, SplitStream};
use gpusort_core::scan::{Predicate, ScanOp, ScanTuning, Scanner};
use gpusort_core::{Gpu, SortKey};
use gpusort_tests::*;
use rand::Rng;

fn lengths() -> Vec<usize> {
    let mut v = vec![
        0, 1, 7, 8, 9, 31, 32, 33, 255, 256, 257, 4095, 4096, 4097, 8191, 8193, 12345,
    ];
    for k in [14, 16, 18, 20, 22] {
        v.extend([(1usize << k) - 1, (1 << k) + 1]);
    }
    v
}

fn check_scan<T: SortKey + PartialEq>(
    gpu: &Gpu,
    s: &Scanner,
    data: &[T],
    op: ScanOp,
    inclusive: bool,
    what: &str,
) {
    let got = s.scan(gpu, data, op, inclusive).unwrap();
    let want = reference::scan(data, op, inclusive);
    assert!(
        got == want,
        "{what}: {op:?} inclusive={inclusive} n={}",
        data.len()
    );
}

#[test]
fn u32_sums_all_lengths_and_predicates() {
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let s = Scanner::new(gpu).unwrap();
        let mut r = rng(1);
        for n in lengths() {
            let random: Vec<u32> = (0..n).map(|_| r.random()).collect(); // wraps: overflow checked
            let ones = vec![1u32; n];
            let zeros = vec![0u32; n];
            let alternating: Vec<u32> = (0..n as u32).map(|i| i & 1).collect();
            for (name, data) in [
                ("random", &random),
                ("ones", &ones),
                ("zeros", &zeros),
                ("alternating", &alternating),
            ] {
                if n > 1 << 16 && name != "random" {
                    continue;
                }
                for inclusive in [false, true] {
                    check_scan(
                        gpu,
                        &s,
                        data,
                        ScanOp::Add,
                        inclusive,
                        &format!("u32 {name} no_subgroups={no_sg}"),
                    );
                }
            }
        }
    }
}

#[test]
fn every_operator_and_type() {
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let s = Scanner::new(gpu).unwrap();
        let mut r = rng(2);
        for n in [1usize, 33, 4097, 70_001] {
            let u: Vec<u32> = (0..n).map(|_| r.random()).collect();
            let i: Vec<i32> = (0..n).map(|_| r.random()).collect();
            for op in [
                ScanOp::Add,
                ScanOp::Max,
                ScanOp::Min,
                ScanOp::And,
                ScanOp::Or,
                ScanOp::Xor,
            ] {
                for inclusive in [false, true] {
                    check_scan(gpu, &s, &u, op, inclusive, "u32");
                    check_scan(gpu, &s, &i, op, inclusive, "i32");
                }
            }
            // f32 sums: order of additions differs from the sequential twin; compare with an f64
            // reference within a relative tolerance of n * eps * sum|x|
            let f: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
            let got = s.scan(gpu, &f, ScanOp::Add, true).unwrap();
            let mut acc = 0f64;
            let mut abs = 0f64;
            for (k, x) in f.iter().enumerate() {
                acc += *x as f64;
                abs += x.abs() as f64;
                let tol = 4.0 * f32::EPSILON as f64 * abs * (k as f64 + 1.0).log2().max(1.0) + 1e-6;
                assert!(
                    (got[k] as f64 - acc).abs() <= tol,
                    "f32 n={n} k={k}: {} vs {acc} (tol {tol})",
                    got[k]
                );
            }
        }
        assert!(
            s.scan(gpu, &[1.0f32], ScanOp::Xor, false).is_err(),
            "bitwise scans of floats are refused"
        );
    }
}

#[test]
fn look_back_fallback_gives_the_same_results() {
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        // every wait gives up at once: each workgroup reduces its predecessors' tiles itself;
        // also with two workgroups looping over all the tiles
        for (workgroups, one_word, late) in [(0, false, true), (2, false, false), (2, true, true)] {
            let s = Scanner::new(gpu)
                .unwrap()
                .with_tuning(
                    gpu,
                    ScanTuning {
                        scan_workgroups: workgroups,
                        compact_workgroups: workgroups,
                        compact_one_word: one_word,
                        compact_late_loads: late,
                        ..ScanTuning::default()
                    },
                )
                .unwrap()
                .tuned(gpu, |t| t.spin_limit = 0);
            let mut r = rng(3);
            for n in [5000usize, 40_000, 300_000] {
                let u: Vec<u32> = (0..n).map(|_| r.random()).collect();
                check_scan(gpu, &s, &u, ScanOp::Add, false, "fallback");
                let (got, _) = s.compact(gpu, &u, None, Predicate::Below(1 << 31)).unwrap();
                assert_eq!(
                    got,
                    reference::compact(&u, None, &Predicate::Below(1u32 << 31)).0,
                    "fallback compact n={n} workgroups={workgroups}"
                );
            }
        }
    }
}

#[test]
fn look_back_counters_count_the_walk() {
    // ScanTuning::counters (measuring): with every wait given up at once, tile t reduces its
    // t predecessors itself and walks no round; otherwise every tile after the first walks
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let tuning = ScanTuning {
            counters: true,
            scan_workgroups: 0,
            compact_workgroups: 0,
            ..ScanTuning::default()
        };
        let mut r = rng(17);
        let s = Scanner::new(gpu)
            .unwrap()
            .with_tuning(gpu, tuning)
            .unwrap()
            .tuned(gpu, |t| t.spin_limit = 0);
        let n = 5 * s.tuning().scan_tile() as usize;
        let u: Vec<u32> = (0..n).map(|_| r.random()).collect();
        check_scan(gpu, &s, &u, ScanOp::Add, false, "counters, fallbacks");
        let [rounds, silent, fallbacks, most, started] =
            s.look_back_counters(gpu, 0).unwrap().unwrap();
        assert_eq!([rounds, silent, fallbacks], [0, 0, 10]);
        // one workgroup per tile: 5 tiles, each counted in progress at least by itself
        assert!((1..=5).contains(&most) && (5..=15).contains(&started));
        let s = Scanner::new(gpu).unwrap().with_tuning(gpu, tuning).unwrap();
        check_scan(gpu, &s, &u, ScanOp::Add, false, "counters");
        let [rounds, _, _, _, _] = s.look_back_counters(gpu, 0).unwrap().unwrap();
        assert!(rounds >= 4, "5 tiles walked {rounds} rounds");
        let (got, _) = s.compact(gpu, &u, None, Predicate::Below(1 << 31)).unwrap();
        assert_eq!(
            got,
            reference::compact(&u, None, &Predicate::Below(1u32 << 31)).0
        );
        let [rounds, _, _, _, _] = s.look_back_counters(gpu, 1).unwrap().unwrap();
        assert!(rounds >= 1, "compaction walked {rounds} rounds");
        assert_eq!(
            Scanner::new(gpu)
                .unwrap()
                .look_back_counters(gpu, 0)
                .unwrap(),
            None,
            "nothing counted unless asked"
        );
    }
}

#[test]
fn look_back_and_tile_shapes_give_the_same_results() {
    // the look-back's other shapes (tile by tile, windows of 8, waiting on the nearest silent tile or
    // not, status words 2 to 128 apart, compaction's statuses in one word or two, its next tile
    // loaded before or after the packing), scan tiles of 128 invocations and 8 rounds,
    // workgroups per tile (0) or a few looping over many tiles, compaction tiles of 256 x 6,
    // 256 x 10 (rounds not a multiple of four: the last four padded) and 512 x 12, and
    // compaction stages smaller than a tile (tiles written out in phases: 37 and 1000
    // elements, neither a multiple of the workgroup; 37 with 256 x 6 also pads the re-reading
    // of further phases). Phases are loops: each stage keeps a workgroup's loop iterations within
    // llvmpipe's budget (scan::group_tiles); a 37-element stage for a 24,576-element tile would
    // not be
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        for (window, wait, wg, rounds, workgroups, state_stride, compact, stage, one_word, late) in [
            (1, false, 128, 8, 0, 2, (256, 6), 37, false, true),
            (8, true, 256, 4, 3, 32, (512, 12), 0, true, false),
            (32, true, 512, 8, 5, 8, (512, 8), 1000, false, true),
            (32, false, 512, 8, 5, 2, (256, 10), 0, true, false),
            (32, false, 512, 8, 5, 128, (256, 8), 0, true, true),
        ] {
            let s = Scanner::new(gpu)
                .unwrap()
                .with_tuning(
                    gpu,
                    ScanTuning {
                        window,
                        scan_wait_nearest: wait,
                        compact_wait_nearest: wait,
                        scan_wg: wg,
                        scan_rounds: rounds,
                        scan_workgroups: workgroups,
                        compact_workgroups: workgroups,
                        state_stride,
                        compact_state_stride: state_stride,
                        compact_late_loads: late,
                        compact_wg: compact.0,
                        compact_rounds: compact.1,
                        compact_stage: stage,
                        compact_one_word: one_word,
                        ..ScanTuning::default()
                    },
                )
                .unwrap();
            let mut r = rng(window as u64);
            for n in [0usize, 1, 4095, 4097, 300_001, (1 << 20) + 3] {
                let u: Vec<u32> = (0..n).map(|_| r.random()).collect();
                check_scan(gpu, &s, &u, ScanOp::Add, false, "look-back shapes");
                check_scan(gpu, &s, &u, ScanOp::Max, true, "look-back shapes");
                for p in [Predicate::Below(1u32 << 31), Predicate::NonZero] {
                    let payload: Vec<u32> = (0..n as u32).collect();
                    let (got, gp) = s.compact(gpu, &u, Some(&payload), p).unwrap();
                    let (want, wp) = reference::compact(&u, Some(&payload), &p);
                    assert!(
                        got == want && gp == wp,
                        "compact {p:?} n={n} window={window} workgroups={workgroups} one_word={one_word} late={late}"
                    );
                    let (got, _) = s.compact(gpu, &u, None, p).unwrap();
                    assert!(
                        got == want,
                        "compact without payload {p:?} n={n} window={window}"
                    );
                }
                let f: Vec<f32> = u.iter().map(|&x| (x >> 9) as f32 - 4e6).collect();
                let (got, _, split) = s.partition(gpu, &f, None, Predicate::Below(0.0)).unwrap();
                let (want, _, wsplit) = reference::partition(&f, None, &Predicate::Below(0.0));
                assert!(
                    got.iter()
                        .map(|x| x.to_bits())
                        .eq(want.iter().map(|x| x.to_bits()))
                        && split == wsplit,
                    "partition f32 n={n} window={window}"
                );
            }
        }
    }
}

fn check_split<T: SortKey + PartialEq>(
    gpu: &Gpu,
    s: &Scanner,
    data: &[T],
    pred: Predicate<T>,
    what: &str,
) {
    let payload: Vec<u32> = (0..data.len() as u32).map(|i| i ^ 0x5555).collect();
    let (got, gp) = s.compact(gpu, data, Some(&payload), pred).unwrap();
    let (want, wp) = reference::compact(data, Some(&payload), &pred);
    let bits = |v: &[T]| {
        v.iter()
            .map(|x| bytemuck::bytes_of(x).to_vec())
            .collect::<Vec<_>>()
    };
    assert!(
        bits(&got) == bits(&want) && gp == wp,
        "compact {what} {pred:?} n={}",
        data.len()
    );
    let (got, gp, split) = s.partition(gpu, data, Some(&payload), pred).unwrap();
    let (want, wp, wsplit) = reference::partition(data, Some(&payload), &pred);
    assert!(
        bits(&got) == bits(&want) && gp == wp && split == wsplit,
        "partition {what} {pred:?} n={}",
        data.len()
    );
    let (got, gp) = s.compact(gpu, data, None, pred).unwrap();
    assert!(
        bits(&got) == bits(&reference::compact(data, None, &pred).0) && gp.is_none(),
        "compact without payload"
    );
}

#[test]
fn compaction_and_partition_every_type() {
    // counts by the shuffle ladder (default) and by one-bit scans; without subgroups both are
    // the same workgroup-memory scan
    for (no_sg, ladder) in [(true, true), (false, true), (false, false)] {
        let gpu = gpu(no_sg);
        let s = Scanner::new(gpu)
            .unwrap()
            .tuned(gpu, |t| t.count_ladder = ladder);
        for n in [0usize, 1, 33, 4096, 4097, 100_003] {
            let b = bits(n, Shape::Random, n as u64 + 5);
            let u: Vec<u32> = b.iter().map(|&x| (x >> 60) as u32).collect(); // many zeros and repeats
            let alt: Vec<u32> = (0..n as u32).map(|i| i & 1).collect();
            let i: Vec<i32> = b.iter().map(|&x| (x >> 40) as i32).collect();
            let mut f: Vec<f32> = b.iter().map(|&x| ((x >> 40) as i32) as f32 / 7.0).collect();
            for (k, sp) in f32_specials().into_iter().enumerate() {
                if k < n {
                    f[k * 13 % n] = sp;
                }
            }
            let w: Vec<u64> = b.clone();
            let l: Vec<i64> = b.iter().map(|&x| x as i64 >> 3).collect();
            let d: Vec<f64> = f.iter().map(|&x| x as f64).collect();
            for p in [
                Predicate::Below(3),
                Predicate::AtLeast(3),
                Predicate::NonZero,
                Predicate::Below(0),
                Predicate::Below(u32::MAX),
            ] {
                check_split(gpu, &s, &u, p, "u32");
            }
            check_split(gpu, &s, &alt, Predicate::NonZero, "alternating");
            check_split(gpu, &s, &i, Predicate::Below(0), "i32");
            check_split(gpu, &s, &f, Predicate::Below(0.5), "f32");
            check_split(gpu, &s, &f, Predicate::NonZero, "f32");
            check_split(gpu, &s, &w, Predicate::AtLeast(1 << 63), "u64");
            check_split(gpu, &s, &l, Predicate::Below(-5), "i64");
            check_split(gpu, &s, &d, Predicate::AtLeast(-0.25), "f64");
        }
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

        #[test]
        fn scans_and_splits_match_reference(data in proptest::collection::vec(any::<i32>(), 0..20_000),
                                            pivot in any::<i32>(), inclusive in any::<bool>(), no_sg in any::<bool>()) {
            let gpu = gpu(no_sg);
            let s = Scanner::new(gpu).unwrap();
            prop_assert_eq!(s.scan(gpu, &data, ScanOp::Add, inclusive).unwrap(), reference::scan(&data, ScanOp::Add, inclusive));
            let p = Predicate::Below(pivot);
            let (got, _, split) = s.partition(gpu, &data, None, p).unwrap();
            let (want, _, wsplit) = reference::partition(&data, None, &p);
            prop_assert_eq!(got, want);
            prop_assert_eq!(split, wsplit);
        }
    }
}

/// A streamed scan's output, gathered from its sink (checking the chunks come in order).
fn scan_streamed<T: SortKey>(
    gpu: &Gpu,
    s: &Scanner,
    data: &[T],
    op: ScanOp,
    inclusive: bool,
    chunk: usize,
) -> Vec<T> {
    let mut out = Vec::new();
    let job = ScanStream::new(op, inclusive, chunk);
    s.scan_streamed(gpu, data, &job, |at, piece| {
        assert_eq!(at, out.len(), "chunks arrive in order");
        out.extend_from_slice(piece);
        Ok(())
    })
    .unwrap();
    out
}

/// A part of a longer array scanned with what comes before it as the first chunk's running value
/// (a device group's parts): the longer array's results for that part, for one chunk and many.
#[test]
fn a_streamed_scan_after_a_prefix_continues_it() {
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let s = Scanner::new(gpu).unwrap();
        let mut r = rng(12);
        let u: Vec<u32> = (0..5003).map(|_| r.random()).collect();
        let i: Vec<i32> = (0..5003).map(|_| r.random_range(-99..99)).collect();
        for cut in [0usize, 1, 2000, 5002, 5003] {
            for chunk in [1000usize, 8192] {
                for inclusive in [false, true] {
                    for op in [ScanOp::Add, ScanOp::Max, ScanOp::Xor] {
                        let whole = reference::scan(&u, op, inclusive);
                        let before = reference::scan(&u[..cut], op, true).last().copied();
                        let got = scan_after(gpu, &s, &u[cut..], before, op, inclusive, chunk);
                        assert!(got == whole[cut..], "u32 {op:?} cut={cut} chunk={chunk}");
                    }
                    let whole = reference::scan(&i, ScanOp::Min, inclusive);
                    let before = reference::scan(&i[..cut], ScanOp::Min, true)
                        .last()
                        .copied();
                    let got = scan_after(gpu, &s, &i[cut..], before, ScanOp::Min, inclusive, chunk);
                    assert!(got == whole[cut..], "i32 min cut={cut} chunk={chunk}");
                }
            }
            // 64-bit elements: Scanner64's running value
            let wide: Vec<u64> = u.iter().map(|&x| (x as u64) << 20 | x as u64).collect();
            let s64 = gpusort_core::scan::scan64::Scanner64::new(gpu);
            for inclusive in [false, true] {
                let whole = reference::scan64(&wide, ScanOp::Add, inclusive);
                let before = reference::scan64(&wide[..cut], ScanOp::Add, true)
                    .last()
                    .copied();
                let mut got = vec![0u64; wide.len() - cut];
                let job = ScanStream {
                    before,
                    ..ScanStream::new(ScanOp::Add, inclusive, 1 << 20)
                };
                s64.scan_streamed(gpu, &wide[cut..], &job, |at, p| {
                    got[at..at + p.len()].copy_from_slice(p);
                    Ok(())
                })
                .unwrap();
                assert!(got == whole[cut..], "u64 add cut={cut}");
            }
        }
        // a 32-bit running value is refused by the 64-bit scanner, not cast
        let s64 = gpusort_core::scan::scan64::Scanner64::new(gpu);
        let job = ScanStream::new(ScanOp::Add, true, 1 << 20).after(1u32);
        let r = s64.scan_streamed(gpu, &u, &job, |_, _| Ok(()));
        assert!(r.is_err());
    }
}

fn scan_after<T: SortKey + Default>(
    gpu: &Gpu,
    s: &Scanner,
    data: &[T],
    before: Option<T>,
    op: ScanOp,
    inclusive: bool,
    chunk: usize,
) -> Vec<T> {
    let mut out = vec![T::default(); data.len()];
    let job = ScanStream {
        before,
        ..ScanStream::new(op, inclusive, chunk)
    };
    s.scan_streamed(gpu, data, &job, |at, piece| {
        out[at..at + piece.len()].copy_from_slice(piece);
        Ok(())
    })
    .unwrap();
    out
}

#[test]
fn streamed_scans_and_compactions_match_whole_ones() {
    // chunks of 4 (the least), 1000 and one compaction tile's elements: sizes around chunk
    // boundaries, carries through many chunks, and both staging slots reused many times
    let tile = ScanTuning::default().compact_tile(false, 1) as usize;
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let s = Scanner::new(gpu).unwrap();
        let mut r = rng(11);
        for chunk in [4usize, 1000, tile] {
            for n in [
                0usize,
                1,
                chunk - 1,
                chunk,
                chunk + 1,
                3 * chunk + 5,
                50_003,
            ] {
                if chunk == 4 && n > 5000 {
                    continue; // thousands of submissions: covered by the larger chunks
                }
                let u: Vec<u32> = (0..n).map(|_| r.random()).collect();
                let i: Vec<i32> = (0..n).map(|_| r.random_range(-9..9)).collect();
                for inclusive in [false, true] {
                    for op in [ScanOp::Add, ScanOp::Max, ScanOp::Xor] {
                        let got = scan_streamed(gpu, &s, &u, op, inclusive, chunk);
                        assert!(
                            got == reference::scan(&u, op, inclusive),
                            "streamed u32 {op:?} inclusive={inclusive} n={n} chunk={chunk}"
                        );
                    }
                    let got = scan_streamed(gpu, &s, &i, ScanOp::Min, inclusive, chunk);
                    assert!(
                        got == reference::scan(&i, ScanOp::Min, inclusive),
                        "i32 min"
                    );
                }
                // f32: the sum through each chunk is carried on the GPU
                let f: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
                let got = scan_streamed(gpu, &s, &f, ScanOp::Add, true, chunk);
                let (mut acc, mut abs) = (0f64, 0f64);
                for (k, x) in f.iter().enumerate() {
                    acc += *x as f64;
                    abs += x.abs() as f64;
                    let tol =
                        4.0 * f32::EPSILON as f64 * abs * (k as f64 + 1.0).log2().max(1.0) + 1e-6;
                    assert!((got[k] as f64 - acc).abs() <= tol, "f32 n={n} k={k}");
                }
                // compaction with a payload, 32- and 64-bit elements
                let payload: Vec<u32> = (0..n as u32).map(|x| x ^ 0xa5a5).collect();
                let w: Vec<f64> = u.iter().map(|&x| x as f64 - 2e9).collect();
                for (p, name) in [
                    (Predicate::Below(1u32 << 31), "below"),
                    (Predicate::NonZero, "nonzero"),
                ] {
                    let (mut got, mut gp) = (Vec::new(), Vec::new());
                    let job = SplitStream {
                        payload: Some(&payload),
                        predicate: p,
                        chunk,
                        rest: false,
                    };
                    let kept = s
                        .split_streamed(gpu, &u, &job, |c| {
                            assert_eq!(c.range.start % chunk, 0);
                            assert_eq!(c.elements.len(), c.kept);
                            got.extend_from_slice(c.elements);
                            gp.extend_from_slice(c.payload.unwrap());
                            Ok(())
                        })
                        .unwrap();
                    let (want, wp) = reference::compact(&u, Some(&payload), &p);
                    assert!(
                        got == want && Some(gp) == wp && kept == want.len(),
                        "streamed compaction {name} n={n} chunk={chunk}"
                    );
                }
                // a streamed partition: every chunk's matching part, then every chunk's rest
                let (mut front, mut back, mut fp, mut bp) = (vec![], vec![], vec![], vec![]);
                let pred = Predicate::Below(1u32 << 31);
                let job = SplitStream {
                    payload: Some(&payload),
                    predicate: pred,
                    chunk,
                    rest: true,
                };
                let split = s
                    .split_streamed(gpu, &u, &job, |c| {
                        assert_eq!(c.elements.len(), c.range.len());
                        front.extend_from_slice(&c.elements[..c.kept]);
                        back.extend_from_slice(&c.elements[c.kept..]);
                        fp.extend_from_slice(&c.payload.unwrap()[..c.kept]);
                        bp.extend_from_slice(&c.payload.unwrap()[c.kept..]);
                        Ok(())
                    })
                    .unwrap();
                front.extend(back);
                fp.extend(bp);
                let (want, wp, wsplit) = reference::partition(&u, Some(&payload), &pred);
                assert!(
                    front == want && Some(fp) == wp && split == wsplit,
                    "streamed partition n={n} chunk={chunk}"
                );
                // the caller's own drain: matching elements straight to the front of its buffers,
                // the others to their back, payload likewise (as a file's maps take them)
                let (mut front, mut back) = (vec![0u32; n], vec![0u32; n]);
                let (mut fp, mut bp) = (vec![0u32; n], vec![0u32; n]);
                let (mut at, mut back_at) = (0, 0);
                let mut order = Vec::new();
                let split = s
                    .split_streamed_with(
                        gpu,
                        &u,
                        &job,
                        |c| {
                            let (k, rest) = (c.kept, c.len() - c.kept);
                            assert_eq!(c.len(), c.range.len());
                            c.elements_into(0, &mut front[at..at + k]);
                            c.payload_into(0, &mut fp[at..at + k]);
                            c.elements_into(k, &mut back[back_at..back_at + rest]);
                            c.payload_into(k, &mut bp[back_at..back_at + rest]);
                            at += k;
                            back_at += rest;
                            c.range.start
                        },
                        |start| {
                            order.push(start);
                            Ok(())
                        },
                    )
                    .unwrap();
                front.truncate(at);
                fp.truncate(at);
                front.extend_from_slice(&back[..back_at]);
                fp.extend_from_slice(&bp[..back_at]);
                assert!(
                    front == want && Some(fp) == wp && split == wsplit && at == wsplit,
                    "split drained by the caller n={n} chunk={chunk}"
                );
                assert!(
                    order.iter().enumerate().all(|(k, &st)| st == k * chunk)
                        && order.len() == n.div_ceil(chunk),
                    "chunks in order n={n} chunk={chunk}: {order:?}"
                );
                let mut got = Vec::new();
                let p = Predicate::AtLeast(0.0f64);
                let job = SplitStream {
                    payload: None,
                    predicate: p,
                    chunk,
                    rest: false,
                };
                s.split_streamed(gpu, &w, &job, |c| {
                    assert!(c.payload.is_none());
                    got.extend_from_slice(c.elements);
                    Ok(())
                })
                .unwrap();
                let want = reference::compact(&w, None, &p).0;
                assert!(
                    got.iter()
                        .map(|x| x.to_bits())
                        .eq(want.iter().map(|x| x.to_bits())),
                    "streamed f64 compaction n={n} chunk={chunk}"
                );
            }
        }
    }
}

#[test]
fn a_failing_sink_stops_a_streamed_job() {
    let gpu = gpu(false);
    let s = Scanner::new(gpu).unwrap();
    let data: Vec<u32> = (0..100_000).collect();
    let mut calls = 0;
    let job = ScanStream::new(ScanOp::Add, true, 1000);
    let r = s.scan_streamed(gpu, &data, &job, |_, _| {
        calls += 1;
        if calls == 3 {
            return Err(gpusort_core::Error::Io("disk full".into()));
        }
        Ok(())
    });
    assert!(matches!(r, Err(gpusort_core::Error::Io(m)) if m == "disk full"));
    assert_eq!(calls, 3, "no chunk is handed on after the failure");
    // the scanner still works afterwards
    let got = scan_streamed(gpu, &s, &data, ScanOp::Add, false, 4096);
    assert_eq!(got, reference::scan(&data, ScanOp::Add, false));
}

#[test]
fn compaction_refuses_counts_its_statuses_cannot_hold() {
    // one-word look-back statuses hold counts below 2^31: a dispatch of more elements is refused
    // with an error rather than overflowing (no binding holds that many today, so the buffers
    // here are small: the check comes before anything is recorded)
    let gpu = gpu(false);
    let buffer = |label| transfer::storage_buffer(gpu, label, 64).unwrap();
    let (src, dst, counts) = (buffer("src"), buffer("dst"), buffer("counts"));
    let s = Scanner::new(gpu)
        .unwrap()
        .with_tuning(
            gpu,
            ScanTuning {
                compact_one_word: true,
                ..ScanTuning::default()
            },
        )
        .unwrap();
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    let job = gpusort_core::scan::CompactJob {
        src: &src,
        dst: &dst,
        counts: &counts,
        n: 1 << 31,
        payload: None,
        predicate: Predicate::Below(7u32),
        keep: true,
        base_slot: None,
        count_slot: 0,
    };
    let err = s.record_compact(gpu, &mut enc, &job).unwrap_err();
    assert!(err.to_string().contains("at most 2^31 - 1"), "{err}");
}

/// An f64 sum scan `got` of `data` against the twin's: within 1e-12 of the absolute values summed
/// so far (the GPU adds in a tree order).
fn assert_f64_scan_close(data: &[f64], got: &[f64], inclusive: bool, what: &str) {
    let want = reference::scan64(data, ScanOp::Add, inclusive);
    let mut abs = 0.0;
    for k in 0..data.len() {
        abs += data[k].abs();
        assert!(
            (got[k] - want[k]).abs() <= 1e-12 * abs + 1e-15,
            "f64 {what} at {k}"
        );
    }
}

/// 64-bit scans (u64, i64 every operator; f64 add) against their twin, at the tile edges of
/// both designs (1024 elements f64's steps, 2048 the chained scan's), in one chunk and carried
/// across chunks, inclusive and exclusive; and with the chained scan's look-back falling back at
/// once (every tile reducing its unpublished predecessors itself); each also with the tiles
/// scanned by subgroups (`ScanTuning::scan64_subgroup_tiles`, where subgroups are in use).
#[test]
fn scans_of_64_bit_elements() {
    use gpusort_core::scan::scan64::Scanner64;
    use ScanOp::*;
    for no_subgroups in MODES {
        let gpu = gpu(no_subgroups);
        let runs = [
            (None, false, false),
            (Some(2048), false, false),
            (Some(6144), true, false),
            (None, false, true),
            (Some(6144), true, true),
        ];
        for (chunk, no_wait, subgroup_tiles) in runs {
            let mut s = Scanner64::new(gpu).with_subgroup_tiles(gpu, subgroup_tiles);
            if let Some(c) = chunk {
                s = s.with_chunk(c);
            }
            if no_wait {
                s = s.with_spin_limit(0);
            }
            for n in [
                0usize, 1, 5, 1023, 1024, 1025, 2047, 2048, 2049, 4096, 4099, 70_001,
            ] {
                let mut r = rng(n as u64 + 64);
                let u: Vec<u64> = (0..n)
                    .map(|i| match i % 4 {
                        0 => r.random(),
                        1 => r.random_range(0..1000),
                        2 => u64::MAX - r.random_range(0..3),
                        _ => 0xffff_ffff + r.random_range(0..3u64), // a carry into the high word
                    })
                    .collect();
                let i: Vec<i64> = u.iter().map(|&x| x as i64).collect();
                for op in [Add, Max, Min, And, Or, Xor] {
                    for inclusive in [false, true] {
                        let what = format!(
                            "n={n} {op:?} incl={inclusive} chunk={chunk:?} no_wait={no_wait} \
                             subgroup_tiles={subgroup_tiles}"
                        );
                        let got = s.scan(gpu, &u, op, inclusive).unwrap();
                        assert!(got == reference::scan64(&u, op, inclusive), "u64 {what}");
                        let got = s.scan(gpu, &i, op, inclusive).unwrap();
                        assert!(got == reference::scan64(&i, op, inclusive), "i64 {what}");
                    }
                }
                let f: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
                for inclusive in [false, true] {
                    let got = s.scan(gpu, &f, Add, inclusive).unwrap();
                    assert_f64_scan_close(&f, &got, inclusive, &format!("n={n}"));
                }
            }
        }
    }
}

/// 64-bit scans of GPU buffers recorded into the caller's encoder (`Scanner64::record`): every
/// type, operators with carries into the high word and signed orders, at tile edges, whole and
/// in pieces (as buffers beyond one binding are), against the twin; a carry, a 32-bit type and
/// an operator f64 lacks are refused.
#[test]
fn recorded_64_bit_scans_match_the_twin() {
    use gpusort_core::scan::scan64::Scanner64;
    use gpusort_core::scan::{Carry, ScanJob};
    use gpusort_core::KeyType;
    use ScanOp::*;
    fn run<T: SortKey>(
        gpu: &Gpu,
        s: &Scanner64,
        data: &[T],
        op: ScanOp,
        inclusive: bool,
    ) -> Vec<T> {
        let n = data.len();
        // (room for one element at least: a binding is never empty)
        let src = transfer::storage_buffer(gpu, "src", 8 * (n as u64 + 1)).unwrap();
        gpu.queue.write_buffer(&src, 0, bytemuck::cast_slice(data));
        let dst = transfer::storage_buffer(gpu, "dst", 8 * (n as u64 + 1)).unwrap();
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        let job = ScanJob {
            src: &src,
            dst: &dst,
            n: n as u32,
            key_type: T::TYPE,
            op,
            inclusive,
            carry: None,
        };
        s.record(gpu, &mut enc, &job).unwrap();
        gpu.queue.submit([enc.finish()]);
        transfer::read_vec(gpu, &dst, n).unwrap()
    }
    let gpu = gpu(false);
    // whole, and in pieces of 3,072 elements (as a buffer beyond one binding is scanned), the
    // chained tiles of both shapes
    let scanners = [
        Scanner64::new(gpu),
        Scanner64::new(gpu).with_chunk(3000),
        Scanner64::new(gpu)
            .with_chunk(3000)
            .with_subgroup_tiles(gpu, true),
    ];
    for (s, n) in scanners
        .iter()
        .flat_map(|s| [0usize, 1, 5, 1023, 1024, 1025, 3072, 3073, 4099, 70_001].map(|n| (s, n)))
    {
        let mut r = rng(n as u64 + 640);
        let u: Vec<u64> = (0..n)
            .map(|i| match i % 3 {
                0 => r.random(),
                1 => 0xffff_ffff + r.random_range(0..3u64), // a carry into the high word
                _ => r.random_range(0..1000),
            })
            .collect();
        let i: Vec<i64> = u.iter().map(|&x| x as i64).collect();
        for inclusive in [false, true] {
            let what = format!("n={n} incl={inclusive}");
            for op in [Add, Max, Xor] {
                assert!(
                    run(gpu, s, &u, op, inclusive) == reference::scan64(&u, op, inclusive),
                    "u64 {op:?} {what}"
                );
            }
            for op in [Add, Min, And] {
                assert!(
                    run(gpu, s, &i, op, inclusive) == reference::scan64(&i, op, inclusive),
                    "i64 {op:?} {what}"
                );
            }
            let f: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
            let got = run(gpu, s, &f, Add, inclusive);
            assert_f64_scan_close(&f, &got, inclusive, &what);
        }
    }
    let buf = transfer::buffer_from(gpu, "b", &[0u64; 4]).unwrap();
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    let job = |key_type, op, carry| ScanJob {
        src: &buf,
        dst: &buf,
        n: 4,
        key_type,
        op,
        inclusive: false,
        carry,
    };
    let carry = Carry {
        buffer: &buf,
        read: None,
        write: 0,
    };
    for (bad, why) in [
        (job(KeyType::U64, Add, Some(carry)), "no carry"),
        (job(KeyType::U32, Add, None), "not supported"),
        (job(KeyType::F64, Max, None), "not supported"),
    ] {
        let err = scanners[0]
            .record(gpu, &mut enc, &bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains(why), "{err}");
    }
}

#[test]
fn host_array_scans_through_kept_staging_on_both_paths() {
    // scan_into and the widening 64-bit scan (the Python package's cumsum): chunk edges, jobs of
    // different sizes one after another on the staging slots the device keeps, and both staging
    // paths (imported host memory where the adapter has it, mapped buffers) on a device of the
    // test's own, since switching paths affects every job on a device
    use gpusort_core::scan::scan64::Scanner64;
    for no_sg in MODES {
        let options = gpusort_core::GpuOptions {
            no_subgroups: no_sg,
            ..Default::default()
        };
        let gpu = &Gpu::new(&options).unwrap();
        let s = Scanner::new(gpu).unwrap();
        let s64 = Scanner64::new(gpu).with_chunk(2048);
        let mut paths = vec![false];
        if gpu.can_import_host_memory() {
            paths.push(true);
        }
        let mut r = rng(41);
        for import in paths {
            gpu.set_host_memory_import(import).unwrap();
            for n in [7003usize, 5, 0, 1, 1000, 1001, 20_011] {
                let u: Vec<u32> = (0..n).map(|_| r.random()).collect();
                let mut got = vec![0u32; n];
                s.scan_into(
                    gpu,
                    &u,
                    &mut got,
                    &ScanStream::new(ScanOp::Add, false, 1000),
                    |_, _| Ok(()),
                )
                .unwrap();
                assert!(
                    got == reference::scan(&u, ScanOp::Add, false),
                    "u32 n={n} import={import}"
                );
                // each chunk handed on once in its place, in order
                let mut got = vec![0u32; n];
                let mut seen = Vec::new();
                let want = reference::scan(&u, ScanOp::Xor, true);
                s.scan_into(
                    gpu,
                    &u,
                    &mut got,
                    &ScanStream::new(ScanOp::Xor, true, 1000),
                    |at, piece| {
                        assert!(piece == &want[at..at + piece.len()], "piece at {at}");
                        seen.push((at, piece.len()));
                        Ok(())
                    },
                )
                .unwrap();
                let pieces: Vec<(usize, usize)> = (0..n.div_ceil(1000))
                    .map(|k| (k * 1000, (n - k * 1000).min(1000)))
                    .collect();
                assert!(
                    got == want && seen == pieces,
                    "u32 xor each n={n}: {seen:?}"
                );
                let i: Vec<i32> = (0..n).map(|_| r.random()).collect();
                let mut got = vec![0i32; n];
                s.scan_into(
                    gpu,
                    &i,
                    &mut got,
                    &ScanStream::new(ScanOp::Max, true, 1000),
                    |_, _| Ok(()),
                )
                .unwrap();
                assert!(got == reference::scan(&i, ScanOp::Max, true), "i32 n={n}");
                // widened while staged: sums past 32 bits, negative ones sign-extended
                let wide_u: Vec<u64> = u.iter().map(|&x| x as u64).collect();
                let mut got = vec![0u64; n];
                s64.scan_widened_into(gpu, &u, &mut got, ScanOp::Add, true)
                    .unwrap();
                assert!(
                    got == reference::scan64(&wide_u, ScanOp::Add, true),
                    "u32 as u64 n={n}"
                );
                let wide_i: Vec<i64> = i.iter().map(|&x| x as i64).collect();
                let mut got = vec![0i64; n];
                s64.scan_widened_into(gpu, &i, &mut got, ScanOp::Add, false)
                    .unwrap();
                assert!(
                    got == reference::scan64(&wide_i, ScanOp::Add, false),
                    "i32 as i64 n={n}"
                );
                // the sign extension also orders: a max over i32 read as i64
                s64.scan_widened_into(gpu, &i, &mut got, ScanOp::Max, true)
                    .unwrap();
                assert!(
                    got == reference::scan64(&wide_i, ScanOp::Max, true),
                    "i32 max as i64 n={n}"
                );
            }
            // a length mismatch or a pair of types that is no widening is refused, not a panic
            let mut wrong = vec![0i64; 4];
            assert!(s64
                .scan_widened_into(gpu, &[1u32, 2, 3, 4], &mut wrong, ScanOp::Add, true)
                .is_err());
            let mut short = vec![0u32; 3];
            assert!(s
                .scan_into(
                    gpu,
                    &[1u32, 2, 3, 4],
                    &mut short,
                    &ScanStream::new(ScanOp::Add, true, 1000),
                    |_, _| Ok(()),
                )
                .is_err());
        }
    }
}

/// A streamed job run inside `cancel::watching` stops between its chunks once its caller's flag
/// is set (`Error::Cancelled`), 32- and 64-bit alike, and runs whole while the flag is clear.
#[test]
fn streamed_scans_stop_when_their_caller_gives_up() {
    use gpusort_core::scan::scan64::Scanner64;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let gpu = gpu(false);
    let s = Scanner::new(gpu).unwrap();
    let wide = Scanner64::new(gpu).with_chunk(1000);
    let data: Vec<u32> = (0..20_000).collect();
    let data64: Vec<u64> = (0..20_000).collect();
    let (mut got, mut got64) = (vec![0u32; data.len()], vec![0u64; data.len()]);
    let clear = Arc::new(AtomicBool::new(false));
    gpusort_core::cancel::watching(&clear, || {
        s.scan_into(
            gpu,
            &data,
            &mut got,
            &ScanStream::new(ScanOp::Add, true, 1000),
            |_, _| Ok(()),
        )
        .unwrap();
        wide.scan_into(gpu, &data64, &mut got64, ScanOp::Add, true)
            .unwrap();
    });
    assert_eq!(got, reference::scan(&data, ScanOp::Add, true));
    let sums: Vec<u64> = data64
        .iter()
        .scan(0u64, |run, &x| {
            *run += x;
            Some(*run)
        })
        .collect();
    assert_eq!(got64, sums);
    let set = Arc::new(AtomicBool::new(true));
    gpusort_core::cancel::watching(&set, || {
        let r = s.scan_into(
            gpu,
            &data,
            &mut got,
            &ScanStream::new(ScanOp::Add, true, 1000),
            |_, _| Ok(()),
        );
        assert!(matches!(r, Err(gpusort_core::Error::Cancelled)), "{r:?}");
        let r = wide.scan_into(gpu, &data64, &mut got64, ScanOp::Add, true);
        assert!(matches!(r, Err(gpusort_core::Error::Cancelled)), "{r:?}");
    });
}
