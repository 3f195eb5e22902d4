//! GPU kernels against their CPU references, on whatever adapter is present (lavapipe in CI),
//! with subgroups and with them forced off.

use gpusort_core::reference::keys as reference;
use gpusort_core::{Gpu, GpuOptions, HostSort, SortKey, SortOrder, Sorter};
use gpusort_tests::*;
use rand::Rng;

fn sorter(gpu: &Gpu) -> Sorter {
    Sorter::new(gpu).expect("pipelines build")
}

fn check_sort<T: SortKey + PartialEq>(
    gpu: &Gpu,
    s: &Sorter,
    keys: &[T],
    order: SortOrder,
    what: &str,
) {
    let mut got = keys.to_vec();
    s.sort(gpu, &mut got, order).unwrap();
    let got: Vec<T> = got.iter().map(reference::canonical).collect();
    let want = reference::sorted(keys, order);
    let bits = |v: &[T]| {
        v.iter()
            .map(|x| bytemuck::bytes_of(x).to_vec())
            .collect::<Vec<_>>()
    };
    assert!(
        bits(&got) == bits(&want),
        "{what}: n={} order={order:?}",
        keys.len()
    );
}

fn from_bits<T: SortKey>(b: &[u64]) -> Vec<T> {
    b.iter()
        .map(|&x| {
            if T::TYPE.is_wide() {
                reference::from_words::<T>((x >> 32) as u32, x as u32)
            } else {
                reference::from_words::<T>(x as u32, 0)
            }
        })
        .collect()
}

/// u32 keys of every size around the edges up to 2^max_log; every input shape up to
/// 2^shapes_log, random beyond; both directions.
fn u32_edge_sizes_and_shapes(s: &Sorter, gpu: &Gpu, max_log: u32, shapes_log: u32, what: &str) {
    for n in edge_sizes(max_log) {
        for shape in SHAPES {
            if n > (1 << shapes_log) && !matches!(shape, Shape::Random) {
                continue;
            }
            let keys: Vec<u32> = bits(n, shape, n as u64)
                .iter()
                .map(|&x| (x >> 32) as u32)
                .collect();
            for descending in [false, true] {
                check_sort(
                    gpu,
                    s,
                    &keys,
                    SortOrder {
                        descending,
                        segment_size: None,
                    },
                    &format!("{what} u32 {shape:?}"),
                );
            }
        }
    }
}

#[test]
fn bitonic_u32_edge_sizes_and_shapes() {
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        u32_edge_sizes_and_shapes(
            &sorter(gpu).with_algorithm(gpusort_core::Algorithm::Bitonic),
            gpu,
            20,
            16,
            &format!("bitonic no_subgroups={no_sg}"),
        );
    }
}

fn every_type_case<T: SortKey + PartialEq>(gpu: &Gpu, s: &Sorter, specials: &[T]) {
    for n in [
        0usize, 1, 2, 3, 5, 8, 17, 255, 256, 257, 4095, 4096, 4097, 65537,
    ] {
        for shape in SHAPES {
            let mut keys: Vec<T> = from_bits(&bits(n, shape, 31 + n as u64));
            for (i, sp) in specials.iter().enumerate() {
                if n > 0 {
                    keys[(i * 7919) % n] = *sp;
                }
            }
            for descending in [false, true] {
                check_sort(
                    gpu,
                    s,
                    &keys,
                    SortOrder {
                        descending,
                        segment_size: None,
                    },
                    &format!("{} {shape:?}", T::TYPE),
                );
            }
        }
    }
}

/// Every key type, with its special values, through `every_type_case`.
fn every_type(gpu: &Gpu, s: &Sorter) {
    every_type_case::<u32>(gpu, s, &[0, u32::MAX]);
    every_type_case::<i32>(gpu, s, &[i32::MIN, i32::MAX, -1, 0]);
    every_type_case::<f32>(gpu, s, &f32_specials());
    every_type_case::<u64>(gpu, s, &[0, u64::MAX, 1 << 32]);
    every_type_case::<i64>(gpu, s, &[i64::MIN, i64::MAX, -1]);
    every_type_case::<f64>(gpu, s, &f64_specials());
}

#[test]
fn bitonic_every_key_type_with_specials() {
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let s = sorter(gpu);
        every_type(gpu, &s);
    }
}

#[test]
fn argsort_and_values_are_stable() {
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let s = sorter(gpu);
        for n in [1usize, 2, 9, 1000, 4097, 100_003] {
            let mut r = rng(n as u64);
            use rand::Rng;
            let keys: Vec<i32> = (0..n).map(|_| r.random_range(-3..3)).collect();
            for descending in [false, true] {
                let order = SortOrder {
                    descending,
                    segment_size: None,
                };
                let perm = s.argsort(gpu, &keys, order).unwrap();
                assert_eq!(
                    perm,
                    reference::argsort(&keys, order),
                    "argsort n={n} desc={descending}"
                );
                let mut k2 = keys.clone();
                let mut vals: Vec<u32> =
                    (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
                let orig = vals.clone();
                s.sort_host(
                    gpu,
                    &mut k2,
                    HostSort {
                        values: Some(&mut vals),
                        order,
                        ..HostSort::default()
                    },
                )
                .unwrap();
                let want: Vec<u32> = perm.iter().map(|&i| orig[i as usize]).collect();
                assert_eq!(vals, want, "values n={n}");
                assert_eq!(k2, reference::sorted(&keys, order));
            }
        }
        // 64-bit keys with an index plane: four planes per record
        let keys: Vec<f64> = from_bits::<f64>(&bits(5000, Shape::FewDistinct, 5));
        let order = SortOrder {
            descending: false,
            segment_size: Some(1000),
        };
        assert_eq!(
            s.argsort(gpu, &keys, order).unwrap(),
            reference::argsort(&keys, order)
        );
    }
}

#[test]
fn segmented_sorts() {
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let s = sorter(gpu);
        for (n, seg) in [
            (64usize, 1u32),
            (64, 2),
            (100, 4),
            (1000, 16),
            (5000, 100),
            (70_000, 4096),
            (70_000, 3000),
            (10, 100),
        ] {
            let keys: Vec<u32> = bits(n, Shape::Random, seg as u64)
                .iter()
                .map(|&x| x as u32)
                .collect();
            for descending in [false, true] {
                check_sort(
                    gpu,
                    &s,
                    &keys,
                    SortOrder {
                        descending,
                        segment_size: Some(seg),
                    },
                    "segmented",
                );
            }
        }
    }
}

#[test]
fn dispatch_count_follows_the_plan() {
    let gpu = gpu(false);
    let s = sorter(gpu);
    let mut keys: Vec<u32> = bits(1 << 18, Shape::Random, 1)
        .iter()
        .map(|&x| x as u32)
        .collect();
    let stats = s.sort(gpu, &mut keys, SortOrder::default()).unwrap();
    let plan = gpusort_core::sort::BitonicPlan::new(
        1 << 18,
        1 << 18,
        stats.tile,
        gpusort_core::sort::MAX_FUSED_GLOBAL_STEPS,
    );
    assert_eq!(stats.network_dispatches, plan.dispatches());
    // stages past the tile: one local merge each plus ceil(steps / 3) global passes
    let beyond = (((1u32 << 18) / stats.tile).ilog2()) as usize;
    let expect = 1 + (1..=beyond).map(|s| 1 + s.div_ceil(3)).sum::<usize>();
    assert_eq!(stats.network_dispatches, expect);
    assert!(
        stats.network_dispatches
            < gpusort_core::sort::method_host_syncs(1 << 18, 4, stats.tile / 16) as usize
                + beyond
                + 1
    );
}

/// Inputs beyond one binding are sorted in pieces and merged; a low piece limit takes that path
/// on small inputs (lavapipe's real limit, 128 MiB, is exercised the same way).
#[test]
fn pieces_merge_to_the_same_stable_result() {
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let s = sorter(gpu).with_piece_limit(1000);
        for n in [1001usize, 4096, 10_007] {
            let keys: Vec<f32> = from_bits::<f32>(&bits(n, Shape::FewDistinct, 9));
            for descending in [false, true] {
                let order = SortOrder {
                    descending,
                    segment_size: None,
                };
                check_sort(gpu, &s, &keys, order, "pieces");
                assert_eq!(
                    s.argsort(gpu, &keys, order).unwrap(),
                    reference::argsort(&keys, order),
                    "pieces argsort n={n}"
                );
            }
            let order = SortOrder {
                descending: false,
                segment_size: Some(300),
            };
            check_sort(gpu, &s, &keys, order, "pieces, segmented");
        }
    }
}

/// The radix sort at every size.
fn radix(gpu: &Gpu) -> Sorter {
    Sorter::new(gpu)
        .unwrap()
        .with_algorithm(gpusort_core::Algorithm::Radix)
}

/// The radix sort with its MSD path taken at every size, f32 keys included.
fn msd_everywhere(gpu: &Gpu) -> Sorter {
    radix(gpu).tuned(gpu, |t| {
        t.msd_from = 0;
        t.msd_f32 = true;
    })
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

        /// Random keys, lengths, directions and segment sizes sort as the CPU reference does.
        #[test]
        fn sort_matches_reference(keys in proptest::collection::vec(any::<i64>(), 0..3000),
                                  floats in proptest::collection::vec(any::<f32>(), 0..3000),
                                  descending in any::<bool>(), seg in proptest::option::of(1u32..700)) {
            let gpu = gpu(false);
            let s = sorter(gpu);
            let order = SortOrder { descending, segment_size: seg };
            let mut got = keys.clone();
            s.sort(gpu, &mut got, order).unwrap();
            prop_assert_eq!(got, reference::sorted(&keys, order));
            prop_assert_eq!(s.argsort(gpu, &floats, order).unwrap(), reference::argsort(&floats, order));
        }
    }
}

mod radix {
    use super::*;
    use gpusort_core::Algorithm;

    /// A job's recorded plan (algorithm, paths, dispatches) and result are the same on a fresh
    /// `Sorter` and on one that sorted a larger job of another type before (its scratch grown,
    /// other pipelines built): a long-lived sorter carries no decision from one job to the next.
    #[test]
    fn a_sorters_plan_and_result_do_not_depend_on_earlier_jobs() {
        use gpusort_core::device::transfer;
        use gpusort_core::{SortJob, SortStats};
        fn run<T: SortKey>(
            gpu: &Gpu,
            s: &Sorter,
            keys: &[T],
            argsort: bool,
        ) -> (SortStats, Vec<u8>, Vec<u32>) {
            let buf = transfer::buffer_from(gpu, "keys", keys).unwrap();
            let perm = transfer::storage_buffer(gpu, "perm", 4 * keys.len() as u64).unwrap();
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            let mut st = s
                .record(
                    gpu,
                    &mut enc,
                    &SortJob {
                        key_type: T::TYPE,
                        order: SortOrder::default(),
                        keys: &buf,
                        n: keys.len() as u32,
                        values: None,
                        permutation: argsort.then_some(&perm),
                    },
                )
                .unwrap();
            gpu.queue.submit([enc.finish()]);
            gpu.wait().unwrap();
            (st.upload_s, st.gpu_s, st.download_s) = (0.0, 0.0, 0.0);
            let sorted: Vec<T> = transfer::read_vec(gpu, &buf, keys.len()).unwrap();
            let p = match argsort {
                true => transfer::read_vec(gpu, &perm, keys.len()).unwrap(),
                false => Vec::new(),
            };
            (st, bytemuck::cast_slice(&sorted).to_vec(), p)
        }
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let n = 20_000;
            let f32s: Vec<f32> = from_bits(&bits(n, Shape::Random, 3));
            let i64s: Vec<i64> = from_bits(&bits(n, Shape::Random, 4));
            let big: Vec<u32> = (0..8 * n as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            for argsort in [false, true] {
                let used = radix(gpu);
                let _ = run(gpu, &used, &big, !argsort);
                let _ = run(gpu, &used, &big, argsort);
                assert_eq!(
                    run(gpu, &used, &f32s, argsort),
                    run(gpu, &radix(gpu), &f32s, argsort),
                    "f32 argsort={argsort} no_subgroups={no_sg}"
                );
                assert_eq!(
                    run(gpu, &used, &i64s, argsort),
                    run(gpu, &radix(gpu), &i64s, argsort),
                    "i64 argsort={argsort} no_subgroups={no_sg}"
                );
            }
        }
    }

    #[test]
    fn radix_u32_edge_sizes_and_shapes() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            // sizes around one radix tile (4096 keys) and beyond; powers of two up to 2^18
            u32_edge_sizes_and_shapes(
                &radix(gpu),
                gpu,
                18,
                13,
                &format!("radix no_subgroups={no_sg}"),
            );
        }
    }

    /// Workgroups of 512 invocations (the default with subgroups where they fit; on lavapipe they
    /// fit without subgroups only, which runs radix.wgsl's every path for invocations past the
    /// digits) sort like the 256-invocation ones.
    #[test]
    fn radix_workgroups_of_512() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu).tuned(gpu, |t| t.wg = Some(512));
            if no_sg {
                // the size asked for is kept, with fewer keys where the workgroup memory is
                // short (radix::sweep_shape): without subgroups the scan's buffers take 10 KiB of
                // a 512-invocation sweep, so lavapipe's 32 KiB holds 8 keys an invocation and the
                // H100's 48 KiB the default 9
                let keys = s.radix_tile(false) / 512;
                assert_eq!(s.radix_tile(false) % 512, 0, "512 invocations");
                assert!((8..=9).contains(&keys), "512 invocations of {keys} keys");
                assert_eq!(
                    s.radix_tile(true),
                    512 * 8,
                    "512 invocations of 8 keys and payloads"
                );
            }
            u32_edge_sizes_and_shapes(
                &s,
                gpu,
                14,
                13,
                &format!("radix wg 512 no_subgroups={no_sg}"),
            );
            every_type(gpu, &s);
            let mut r = rng(512);
            let keys: Vec<u32> = (0..20_000).map(|_| r.random_range(0..3000)).collect();
            assert_eq!(
                s.argsort(gpu, &keys, SortOrder::default()).unwrap(),
                reference::argsort(&keys, SortOrder::default()),
                "radix wg 512 argsort no_subgroups={no_sg}"
            );
        }
    }

    /// Workgroups whose size is not a power of two (384, CUB's sweep on sm90, and 768: every
    /// subgroup whole, more invocations than digits) sort like the others, on the LSD passes (keys
    /// only and with a payload) and, with 384, on the MSD path.
    #[test]
    fn radix_workgroups_of_384_and_768() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            for wg in [384, 768] {
                let s = radix(gpu).tuned(gpu, |t| t.wg = Some(wg));
                let what = format!("radix wg {wg} no_subgroups={no_sg}");
                let tile = s.radix_tile(false);
                assert_eq!(tile % wg, 0, "{what}: the size asked for is kept");
                if wg == 384 {
                    every_type(gpu, &s);
                }
                let mut r = rng(wg as u64);
                for n in [tile as usize - 1, 3 * tile as usize + 5] {
                    let keys: Vec<u32> = (0..n).map(|_| r.random()).collect();
                    check_sort(gpu, &s, &keys, SortOrder::default(), &what);
                    assert_eq!(
                        s.argsort(gpu, &keys, SortOrder::default()).unwrap(),
                        reference::argsort(&keys, SortOrder::default()),
                        "{what} argsort n={n}"
                    );
                }
                // the MSD path's kernels run in the same workgroups (where its bins and tile fit
                // lavapipe's 32 KiB of workgroup memory: 384 invocations of 4 keys)
                if wg != 384 {
                    continue;
                }
                let msd = radix(gpu).tuned(gpu, |t| {
                    t.wg = Some(wg);
                    t.msd_from = 0;
                    t.unstable_items = 4;
                });
                let keys: Vec<u32> = (0..40_000).map(|_| r.random()).collect();
                let mut got = keys.clone();
                let st = msd.sort(gpu, &mut got, SortOrder::default()).unwrap();
                assert!(st.radix_msd, "{what}: the MSD path ran");
                assert_eq!(
                    got,
                    reference::sorted(&keys, SortOrder::default()),
                    "{what} MSD"
                );
            }
        }
    }

    /// The ranking's older order (each subgroup ranks its keys, then the offsets are added:
    /// `count_first` off), with digit counts published before the ranking from a histogram of
    /// their own and after it, and look-backs that wait and that take the fallback at once.
    /// Subgroups only: without them counts are always published after the ranking, which every
    /// other radix test already runs; with them every other test runs `count_first`.
    #[test]
    fn radix_ranked_before_counting() {
        let gpu = gpu(false);
        for (early, spin) in [(true, 4096), (false, 4096), (false, 0)] {
            let s = radix(gpu)
                .tuned(gpu, |t| t.count_first = false)
                .tuned(gpu, |t| t.early_counts = early)
                .tuned(gpu, |t| t.spin_limit = spin);
            let what = format!("radix ranked first, early counts {early}, spin={spin}");
            u32_edge_sizes_and_shapes(&s, gpu, 13, 12, &what);
            let mut r = rng(spin as u64 + 7);
            let keys: Vec<u32> = (0..30_000).map(|_| r.random_range(0..500)).collect();
            assert_eq!(
                s.argsort(gpu, &keys, SortOrder::default()).unwrap(),
                reference::argsort(&keys, SortOrder::default()),
                "{what} argsort"
            );
        }
    }

    /// Histogram workgroups of one tile and of many (`SortTuning::hist_chunks`; the default is 4), at
    /// key counts around a histogram workgroup's share and on keys whose digits run long. The
    /// histogram uses no subgroup operation, so one mode covers it.
    #[test]
    fn radix_histograms_of_one_tile_and_of_many() {
        let gpu = gpu(false);
        for chunks in [1, 16] {
            let s = radix(gpu).tuned(gpu, |t| t.hist_chunks = chunks);
            let what = format!("radix hist_chunks={chunks}");
            let share = (chunks * s.radix_tile(false)) as usize;
            let mut r = rng(chunks as u64 + 31);
            for n in [share - 1, share + 1, 3 * share + 7] {
                let uniform: Vec<u32> = (0..n).map(|_| r.random()).collect();
                let sorted: Vec<u32> = (0..n as u32).collect();
                for keys in [&uniform, &sorted] {
                    check_sort(gpu, &s, keys, SortOrder::default(), &what);
                }
                let wide: Vec<u64> = (0..n).map(|_| r.random()).collect();
                check_sort(gpu, &s, &wide, SortOrder::default(), &what);
            }
        }
    }

    /// Sweeps whose workgroups loop over tiles (the default for payload sorts), with a few
    /// workgroups so each takes several tiles, and with every look-back taking the fallback.
    #[test]
    fn radix_sweeps_looping_over_tiles() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            for (groups, spin) in [(0, 4096), (2, 4096), (3, 0)] {
                let s = radix(gpu)
                    .tuned(gpu, |t| t.spin_limit = spin)
                    .tuned(gpu, |t| {
                        t.workgroups = groups;
                        t.payload_workgroups = groups;
                        t.unstable_workgroups = groups
                    });
                let what = format!("radix sweep groups={groups} spin={spin} no_subgroups={no_sg}");
                let mut r = rng(groups as u64 + 90);
                for n in [1usize, 4097, 70_001] {
                    let keys: Vec<u32> = (0..n).map(|_| r.random()).collect();
                    check_sort(gpu, &s, &keys, SortOrder::default(), &what);
                    let wide: Vec<u64> = (0..n).map(|_| r.random::<u64>() >> 7).collect();
                    check_sort(
                        gpu,
                        &s,
                        &wide,
                        SortOrder {
                            descending: true,
                            ..Default::default()
                        },
                        &what,
                    );
                    let few: Vec<u32> = keys.iter().map(|k| k % 1000).collect();
                    assert_eq!(
                        s.argsort(gpu, &few, SortOrder::default()).unwrap(),
                        reference::argsort(&few, SortOrder::default()),
                        "{what} argsort n={n}"
                    );
                }
            }
        }
    }

    #[test]
    fn radix_every_key_type_and_digit_edges() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu);
            every_type(gpu, &s);
            // keys that differ only in the highest or only in the lowest digit
            let mut r = rng(77);
            let high: Vec<u32> = (0..9000)
                .map(|_| (r.random_range(0..256u32) << 24) | 0x00ab_cdef)
                .collect();
            let low: Vec<u64> = (0..9000)
                .map(|_| 0x0123_4567_89ab_cd00 | r.random_range(0..256u64))
                .collect();
            check_sort(gpu, &s, &high, SortOrder::default(), "highest digit only");
            check_sort(gpu, &s, &low, SortOrder::default(), "lowest digit only");
        }
    }

    /// Every key set the bench measures (`gpusort bench --keys all`: floats' few exponents, ids
    /// with a common prefix, skew, a handful of distinct values, ...) of every key type, sorted by
    /// the radix sort at sizes around a tile and over several tiles, keys only (both directions)
    /// and argsort, with and without subgroups, against the CPU twin.
    #[test]
    fn radix_every_bench_key_set_at_tile_edges() {
        use gpusort_bench::keysets::{applies, generate, KEY_SETS};
        use gpusort_core::KeyType;
        fn case<T: SortKey + PartialEq>(gpu: &Gpu, s: &Sorter, set: &str, sizes: &[usize]) {
            for (k, &n) in sizes.iter().enumerate() {
                let keys: Vec<T> = generate(set, n, 1000 + k as u64);
                let what = format!("{:?} {set} n={n}", T::TYPE);
                for descending in [false, true] {
                    let order = SortOrder {
                        descending,
                        segment_size: None,
                    };
                    check_sort(gpu, s, &keys, order, &what);
                }
                let perm = s.argsort(gpu, &keys, SortOrder::default()).unwrap();
                assert_eq!(
                    perm,
                    reference::argsort(&keys, SortOrder::default()),
                    "{what} argsort"
                );
            }
        }
        let mut cases = 0;
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu);
            let tile = s.radix_tile(false) as usize;
            let sizes = [tile - 1, tile + 1, 3 * tile + 17];
            for t in KeyType::ALL {
                for (set, _) in KEY_SETS {
                    if !applies(t, set) {
                        continue;
                    }
                    match t {
                        KeyType::U32 => case::<u32>(gpu, &s, set, &sizes),
                        KeyType::I32 => case::<i32>(gpu, &s, set, &sizes),
                        KeyType::F32 => case::<f32>(gpu, &s, set, &sizes),
                        KeyType::U64 => case::<u64>(gpu, &s, set, &sizes),
                        KeyType::I64 => case::<i64>(gpu, &s, set, &sizes),
                        KeyType::F64 => case::<f64>(gpu, &s, set, &sizes),
                    }
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 2 * 74, "every (type, key set) pair, in both modes");
    }

    /// The same key sets of the 32-bit types on the MSD path (taken at every size here), keys
    /// only in both directions, up to 20 tiles: enough for timestamps-like and ±2^20 keys to be
    /// sorted relative to their range and for `few` keys' one-value buckets to overflow a tile;
    /// both seen, with and without subgroups.
    #[test]
    fn msd_path_every_bench_key_set() {
        use gpusort_bench::keysets::{applies, generate, KEY_SETS};
        use gpusort_core::sort::radix::MsdOutcome;
        use gpusort_core::KeyType;
        fn case<T: SortKey + PartialEq>(
            gpu: &Gpu,
            s: &Sorter,
            set: &str,
            sizes: &[usize],
            seen: &mut Vec<(KeyType, String, usize, MsdOutcome)>,
        ) {
            for (k, &n) in sizes.iter().enumerate() {
                let keys: Vec<T> = generate(set, n, 2000 + k as u64);
                for descending in [false, true] {
                    let order = SortOrder {
                        descending,
                        segment_size: None,
                    };
                    check_sort(gpu, s, &keys, order, &format!("{:?} {set} n={n}", T::TYPE));
                    let outcome = s.radix_msd_outcome(gpu).unwrap().expect("the MSD path");
                    seen.push((T::TYPE, set.to_string(), n, outcome));
                }
            }
        }
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = msd_everywhere(gpu);
            let tile = s.radix_msd_tile() as usize;
            let sizes = [tile - 1, tile + 1, 3 * tile + 17, 20 * tile + 3];
            let mut seen = Vec::new();
            for t in [KeyType::U32, KeyType::I32, KeyType::F32] {
                for (set, _) in KEY_SETS {
                    if !applies(t, set) {
                        continue;
                    }
                    match t {
                        KeyType::U32 => case::<u32>(gpu, &s, set, &sizes, &mut seen),
                        KeyType::I32 => case::<i32>(gpu, &s, set, &sizes, &mut seen),
                        _ => case::<f32>(gpu, &s, set, &sizes, &mut seen),
                    }
                }
            }
            let took = |t: KeyType, set: &str, n: usize| -> Vec<MsdOutcome> {
                let at =
                    |c: &&(KeyType, String, usize, MsdOutcome)| c.0 == t && c.1 == set && c.2 == n;
                seen.iter().filter(at).map(|c| c.3).collect()
            };
            let big = 20 * tile + 3;
            // i32 keys of ±2^20: relative to their range (two top digits, 32 absolute buckets
            // crowded, under 8 copies a value)
            let pm20 = took(KeyType::I32, "pm20", big);
            assert_eq!(pm20.len(), 2);
            for o in pm20 {
                assert!(
                    matches!(o, MsdOutcome::Ran { ranged: true, .. }),
                    "no_sg={no_sg} {o:?}"
                );
            }
            // eight values of their own top digits, each past a tile: one-value buckets
            for t in [KeyType::U32, KeyType::I32] {
                let few = took(t, "few", big);
                assert_eq!(few.len(), 2);
                for o in few {
                    let want = MsdOutcome::Ran {
                        dense_buckets: 0,
                        ranged: false,
                    };
                    assert_eq!(o, want, "no_sg={no_sg} {t:?} few");
                }
            }
            // skewed keys within a full range still fall back
            for o in took(KeyType::U32, "zipf", big) {
                assert_eq!(o, MsdOutcome::FellBack, "no_sg={no_sg} zipf");
            }
        }
    }

    /// Signed keys that all fit in fewer bits than their type (small values of both signs) run
    /// only the passes that width needs, the top one on its digit with the top bit flipped
    /// (radix.wgsl's narrow_passes): widths at and around every digit's edge, all negative, all
    /// equal, one key, several tiles; keys-only and argsort, both ways, with and without
    /// subgroups, each sort's result against the CPU and its passes against the twin's; and the
    /// MSD path's fall back (keys-only i32) narrowed the same way.
    #[test]
    fn narrow_signed_keys_run_the_passes_their_width_needs() {
        use gpusort_core::reference::radix as twin;
        fn check<T: SortKey + PartialEq>(gpu: &Gpu, s: &Sorter, keys: &[T], what: &str) {
            for descending in [false, true] {
                let order = SortOrder {
                    descending,
                    segment_size: None,
                };
                let (_, ran) = twin::argsort(keys, descending, 0..8 * T::TYPE.size() as u32);
                let want: u32 = ran.iter().enumerate().map(|(p, &r)| (r as u32) << p).sum();
                check_sort(gpu, s, keys, order, what);
                let got = s.radix_lsd_passes(gpu).unwrap();
                assert_eq!(got, want, "{what} desc={descending}: keys-only passes");
                let perm = s.argsort(gpu, keys, order).unwrap();
                assert_eq!(perm, reference::argsort(keys, order), "{what} argsort");
                let got = s.radix_lsd_passes(gpu).unwrap();
                assert_eq!(got, want, "{what} desc={descending}: argsort passes");
            }
        }
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu);
            let tile = s.radix_tile(false) as usize;
            let mut r = rng(68);
            for (i, &bits) in [0u32, 1, 3, 7, 8, 9, 15, 16, 17, 20, 23, 24, 30, 31]
                .iter()
                .enumerate()
            {
                let n = [1, 7, tile - 1, tile + 1, 3 * tile + 5][i % 5];
                let half = 1i64 << bits;
                let i32s: Vec<i32> = (0..n)
                    .map(|_| {
                        r.random_range(-half..half)
                            .clamp(i32::MIN as i64, i32::MAX as i64) as i32
                    })
                    .collect();
                check(
                    gpu,
                    &s,
                    &i32s,
                    &format!("i32 +-2^{bits} n={n} no_sg={no_sg}"),
                );
            }
            for (i, &bits) in [0u32, 7, 8, 20, 31, 32, 39, 40, 47, 55, 56, 62, 63]
                .iter()
                .enumerate()
            {
                let n = [tile + 1, 5, 3 * tile + 5][i % 3];
                let i64s: Vec<i64> = (0..n)
                    .map(|_| match bits {
                        63 => r.random::<i64>(),
                        _ => r.random_range(-(1i64 << bits)..(1i64 << bits)),
                    })
                    .collect();
                check(
                    gpu,
                    &s,
                    &i64s,
                    &format!("i64 +-2^{bits} n={n} no_sg={no_sg}"),
                );
            }
            let n = 2 * tile + 3;
            let negative: Vec<i64> = (0..n).map(|_| r.random_range(-1000..0)).collect();
            check(gpu, &s, &negative, "i64 all negative");
            let small: Vec<i32> = (0..n).map(|_| r.random_range(0..1000)).collect();
            check(gpu, &s, &small, "i32 0..1000");
            check(gpu, &s, &vec![-5i64; n], "i64 all -5");
            check(gpu, &s, &vec![-1i32; n], "i32 all -1");
            check(gpu, &s, &[i64::MIN, -1, 0, i64::MAX], "i64 extremes");
            // keys-only i32 on the MSD path, falling back: two 16-bit buckets past a tile each
            let m = msd_everywhere(gpu);
            // (more than 8 copies a value: not sorted relative to the range)
            let n = (5 * tile).max(20_000);
            let keys: Vec<i32> = (0..n).map(|_| r.random_range(-1000..1000)).collect();
            for descending in [false, true] {
                let order = SortOrder {
                    descending,
                    segment_size: None,
                };
                check_sort(gpu, &m, &keys, order, "i32 +-1000 through the MSD path");
                let outcome = m.radix_msd_outcome(gpu).unwrap();
                assert_eq!(
                    outcome,
                    Some(gpusort_core::sort::radix::MsdOutcome::FellBack),
                    "no_sg={no_sg}"
                );
                assert_eq!(
                    m.radix_lsd_passes(gpu).unwrap(),
                    0b11,
                    "two passes, no_sg={no_sg}"
                );
            }
        }
    }

    /// Floats and 64-bit keys travel between the passes of a sort as their sortable words
    /// (radix.wgsl, ENCODED): the first pass that runs encodes them, the last decodes them. Keys
    /// whose only differing digit is a middle one (one pass runs, neither the lowest nor the
    /// highest) or whose differing digits are the lowest and the highest (the passes between
    /// skipped) come back bit for bit, with their argsort, both ways, NaNs and -0 among them.
    #[test]
    fn radix_keys_leave_as_they_came_whichever_passes_run() {
        fn check<T: SortKey + PartialEq>(gpu: &Gpu, s: &Sorter, keys: &[T], what: &str) {
            for descending in [false, true] {
                let order = SortOrder {
                    descending,
                    segment_size: None,
                };
                check_sort(gpu, s, keys, order, what);
                let perm = s.argsort(gpu, keys, order).unwrap();
                assert_eq!(perm, reference::argsort(keys, order), "{what} argsort");
            }
        }
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu);
            let mut r = rng(41);
            let mut byte = |shift: u32| (r.random_range(0..256u32) as u64) << shift;
            let f32_middle: Vec<f32> = (0..5000)
                .map(|_| f32::from_bits(0xc080_0001 | byte(8) as u32))
                .collect();
            let mut f32_ends: Vec<f32> = (0..5000)
                .map(|i: u32| f32::from_bits(((i % 2) << 31) | 0x0012_3400 | byte(0) as u32))
                .collect();
            f32_ends[7] = -0.0;
            f32_ends[8] = 0.0;
            f32_ends[9] = f32::NAN;
            f32_ends[10] = f32::from_bits(0xffff_ffff);
            let f64_middle: Vec<f64> = (0..5000)
                .map(|_| f64::from_bits(0x4000_0000_0000_0001 | byte(24)))
                .collect();
            let i64_ends: Vec<i64> = (0..5000)
                .map(|_| (byte(56) | 0x0011_2233_4455_6600 | byte(0)) as i64)
                .collect();
            let u64_middle: Vec<u64> = (0..5000).map(|_| byte(32) | 7).collect();
            check(
                gpu,
                &s,
                &f32_middle,
                &format!("f32 middle digit no_subgroups={no_sg}"),
            );
            check(
                gpu,
                &s,
                &f32_ends,
                &format!("f32 end digits no_subgroups={no_sg}"),
            );
            check(
                gpu,
                &s,
                &f64_middle,
                &format!("f64 middle digit no_subgroups={no_sg}"),
            );
            check(
                gpu,
                &s,
                &i64_ends,
                &format!("i64 end digits no_subgroups={no_sg}"),
            );
            check(
                gpu,
                &s,
                &u64_middle,
                &format!("u64 middle digit no_subgroups={no_sg}"),
            );
        }
    }

    #[test]
    fn radix_is_stable_and_agrees_with_bitonic() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu);
            let b = sorter(gpu).with_algorithm(Algorithm::Bitonic);
            for n in [1usize, 2, 9, 4097, 100_003] {
                let mut r = rng(n as u64 + 3);
                let keys: Vec<i32> = (0..n).map(|_| r.random_range(-3..3)).collect();
                for descending in [false, true] {
                    let order = SortOrder {
                        descending,
                        segment_size: None,
                    };
                    let perm = s.argsort(gpu, &keys, order).unwrap();
                    assert_eq!(
                        perm,
                        reference::argsort(&keys, order),
                        "radix argsort n={n}"
                    );
                    assert_eq!(
                        perm,
                        b.argsort(gpu, &keys, order).unwrap(),
                        "--algorithm never changes a result"
                    );
                    let mut k2 = keys.clone();
                    let mut vals: Vec<u32> = (0..n as u32).map(|i| i ^ 0xdead).collect();
                    let orig = vals.clone();
                    s.sort_host(
                        gpu,
                        &mut k2,
                        HostSort {
                            values: Some(&mut vals),
                            order,
                            ..HostSort::default()
                        },
                    )
                    .unwrap();
                    assert_eq!(
                        vals,
                        perm.iter().map(|&i| orig[i as usize]).collect::<Vec<_>>()
                    );
                }
            }
        }
    }
}

/// Segmented sorts on the radix path (a stable sort by key, then by segment) give the CPU
/// reference's keys, permutation and values for every key type, segment sizes around the
/// edges and both directions, with subgroups and without.
mod radix_segments {
    use super::*;
    use gpusort_core::Algorithm;

    fn check<T: SortKey>(gpu: &Gpu, s: &Sorter, b: &[u64]) {
        let keys: Vec<T> = from_bits(b);
        let n = keys.len();
        for seg in [
            1u32,
            3,
            256,
            1000,
            4097,
            n as u32 - 1,
            n as u32,
            n as u32 + 5,
        ] {
            for descending in [false, true] {
                let order = SortOrder {
                    descending,
                    segment_size: Some(seg.max(1)),
                };
                let what = format!("{} n={n} seg={seg} descending={descending}", T::TYPE);
                let mut got = keys.clone();
                let mut vals: Vec<u32> = (0..n as u32).map(|i| i ^ 0x5a5a).collect();
                let (perm, _) = s
                    .sort_host(
                        gpu,
                        &mut got,
                        HostSort {
                            values: Some(&mut vals),
                            permutation: true,
                            order,
                        },
                    )
                    .unwrap();
                let want_perm = reference::argsort(&keys, order);
                assert_eq!(perm.unwrap(), want_perm, "permutation, {what}");
                let canon = |v: &[T]| -> Vec<Vec<u8>> {
                    v.iter()
                        .map(|x| bytemuck::bytes_of(&reference::canonical(x)).to_vec())
                        .collect()
                };
                assert!(
                    canon(&got) == canon(&reference::sorted(&keys, order)),
                    "keys, {what}"
                );
                let want_vals: Vec<u32> = want_perm.iter().map(|&i| i ^ 0x5a5a).collect();
                assert_eq!(vals, want_vals, "values, {what}");
            }
        }
    }

    #[test]
    fn every_key_type_and_segment_size() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = sorter(gpu).with_algorithm(Algorithm::Radix);
            for (n, shape) in [
                (2usize, Shape::Random),
                (9, Shape::FewDistinct),
                (4097, Shape::Random),
                (20_011, Shape::FewDistinct),
                (70_001, Shape::Random),
            ] {
                let b = bits(n, shape, n as u64 + 11);
                check::<u32>(gpu, &s, &b);
                check::<i32>(gpu, &s, &b);
                check::<f32>(gpu, &s, &b);
                check::<u64>(gpu, &s, &b);
                check::<i64>(gpu, &s, &b);
                check::<f64>(gpu, &s, &b);
            }
        }
    }

    /// Keys-only sorts (no permutation asked for) and a key-bit range, per segment.
    #[test]
    fn keys_only_and_key_bits() {
        let gpu = gpu(false);
        let mut r = rng(91);
        let keys: Vec<u32> = (0..50_000).map(|_| r.random()).collect();
        let order = SortOrder {
            descending: false,
            segment_size: Some(7000),
        };
        let mut got = keys.clone();
        sorter(gpu)
            .with_algorithm(Algorithm::Radix)
            .sort(gpu, &mut got, order)
            .unwrap();
        assert_eq!(got, reference::sorted(&keys, order));
        // bits 8..20 only: each segment stably by (k >> 8) & 0xfff
        let mut got = keys.clone();
        let s = sorter(gpu).with_key_bits(8..20);
        s.sort(gpu, &mut got, order).unwrap();
        let mut want = keys.clone();
        for chunk in want.chunks_mut(7000) {
            chunk.sort_by_key(|k| (k >> 8) & 0xfff);
        }
        assert_eq!(got, want);
    }
}

/// The radix sort's own options and paths: key-bit ranges and skipped passes against the CPU
/// twin, GPU-resident counts, the look-back's fallback, canonical NaNs when every pass is skipped,
/// and an input beyond lavapipe's 128 MiB binding sorted in pieces.
mod radix_options {
    use super::*;
    use gpusort_core::device::transfer;
    use gpusort_core::reference::radix as twin;
    use gpusort_core::{Algorithm, KeyType, SortJob};

    fn bit_range_case<T: SortKey + PartialEq>(gpu: &Gpu, keys: &[T], bits: std::ops::Range<u32>) {
        for descending in [false, true] {
            let order = SortOrder {
                descending,
                segment_size: None,
            };
            let s = radix(gpu).with_key_bits(bits.clone());
            let (want, _) = twin::argsort(keys, descending, bits.clone());
            let got = s.argsort(gpu, keys, order).unwrap();
            assert_eq!(got, want, "{} bits {bits:?} desc={descending}", T::TYPE);
            let mut sorted = keys.to_vec();
            s.sort(gpu, &mut sorted, order).unwrap();
            let want_keys: Vec<T> = want
                .iter()
                .map(|&i| reference::canonical(&keys[i as usize]))
                .collect();
            assert!(
                bytemuck::cast_slice::<T, u8>(&sorted) == bytemuck::cast_slice::<T, u8>(&want_keys),
                "{} keys, bits {bits:?}",
                T::TYPE
            );
        }
    }

    #[test]
    fn key_bit_ranges_and_skipped_passes_match_the_twin() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let mut r = rng(5);
            let u: Vec<u32> = (0..20_000).map(|_| r.random()).collect();
            for bits in [0..32, 4..21, 24..32, 0..8, 31..32] {
                bit_range_case(gpu, &u, bits);
            }
            let w: Vec<u64> = (0..9_000)
                .map(|_| r.random::<u64>() >> r.random_range(0..40))
                .collect();
            for bits in [0..64, 28..44, 40..64] {
                bit_range_case(gpu, &w, bits);
            }
            let mut f: Vec<f32> = from_bits::<f32>(&bits(9_000, Shape::Random, 3));
            f.extend(f32_specials());
            // NaNs among them: a NaN's every bit is one in the sortable order (the twin's), also
            // where only part of the bits is sorted on
            for bits in [16..32, 0..16, 4..20] {
                bit_range_case(gpu, &f, bits);
            }
            let mut d: Vec<f64> = from_bits::<f64>(&bits(5_000, Shape::Random, 4));
            d.extend(f64_specials());
            for bits in [0..64, 0..40, 20..52] {
                bit_range_case(gpu, &d, bits);
            }
            // in pieces merged on the host: the merge compares the same bits
            let pieces = radix(gpu).with_key_bits(4..21).with_piece_limit(3000);
            let (want, _) = twin::argsort(&u, false, 4..21);
            assert_eq!(
                pieces.argsort(gpu, &u, SortOrder::default()).unwrap(),
                want,
                "pieces, bits 4..21"
            );
            // digits equal in every key but the lowest: the twin skips three passes; so must the GPU
            let low: Vec<u32> = (0..12_000u32)
                .map(|i| 0x5a5a_5a00 | (i * 13 % 256))
                .collect();
            let (_, ran) = twin::argsort(&low, false, 0..32);
            assert_eq!(ran, vec![true, false, false, false]);
            bit_range_case(gpu, &low, 0..32);
            // refused: empty, reversed or too wide ranges; bitonic with a range
            for (start, end) in [(3, 3), (9, 4), (0, 33)] {
                let bad = std::ops::Range { start, end };
                assert!(matches!(
                    radix(gpu)
                        .with_key_bits(bad)
                        .sort(gpu, &mut [1u32, 2], SortOrder::default()),
                    Err(gpusort_core::Error::InvalidInput(_))
                ));
            }
            let bitonic = Sorter::new(gpu)
                .unwrap()
                .with_algorithm(Algorithm::Bitonic)
                .with_key_bits(0..8);
            assert!(bitonic
                .sort(gpu, &mut [1u32, 2], SortOrder::default())
                .is_err());
        }
    }

    /// Every pass skipped (all keys equal): one still runs, so NaNs come back canonical as from
    /// the bitonic sort, and the permutation is the identity.
    #[test]
    fn all_equal_keys_and_nan_payloads() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let odd_nan = f32::from_bits(0x7fa0_0001);
            for n in [1usize, 2, 4097, 9000] {
                let keys = vec![odd_nan; n];
                check_sort(gpu, &radix(gpu), &keys, SortOrder::default(), "all one NaN");
                let mut got = keys.clone();
                radix(gpu)
                    .sort(gpu, &mut got, SortOrder::default())
                    .unwrap();
                assert!(
                    got.iter().all(|x| x.to_bits() == 0x7fc0_0000),
                    "canonical NaN, n={n}"
                );
                let same = vec![7u64; n];
                let perm = radix(gpu)
                    .argsort(gpu, &same, SortOrder::default())
                    .unwrap();
                assert_eq!(perm, (0..n as u32).collect::<Vec<_>>());
            }
        }
    }

    /// The look-back waits on a silent tile for 0 reads: every tile then counts its
    /// predecessors' digits itself, and the result is the same.
    #[test]
    fn look_back_fallback_gives_the_same_result() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu).tuned(gpu, |t| t.spin_limit = 0);
            let mut r = rng(11);
            let keys: Vec<i32> = (0..40_000).map(|_| r.random_range(-1000..1000)).collect();
            check_sort(gpu, &s, &keys, SortOrder::default(), "spin limit 0");
            assert_eq!(
                s.argsort(gpu, &keys, SortOrder::default()).unwrap(),
                reference::argsort(&keys, SortOrder::default())
            );
        }
    }

    /// lavapipe's subgroups have 8 lanes, so its ballots are one word by default; the vec4
    /// ballots that devices with wider subgroups use must rank the same.
    #[test]
    fn wide_and_narrow_ballots_rank_the_same() {
        let gpu = gpu(false);
        let mut r = rng(12);
        let keys: Vec<u32> = (0..30_000).map(|_| r.random_range(0..5000)).collect();
        let wide64: Vec<u64> = from_bits::<u64>(&bits(9000, Shape::Random, 13));
        let want = reference::argsort(&keys, SortOrder::default());
        let want64 = reference::argsort(&wide64, SortOrder::default());
        for s in [radix(gpu), radix(gpu).tuned(gpu, |t| t.wide_ballot = true)] {
            assert_eq!(s.argsort(gpu, &keys, SortOrder::default()).unwrap(), want);
            assert_eq!(
                s.argsort(gpu, &wide64, SortOrder::default()).unwrap(),
                want64
            );
            check_sort(gpu, &s, &keys, SortOrder::default(), "ballot width");
        }
    }

    /// Rank tables of one 32-bit counter a word (the default where they cost no workgroup memory,
    /// as on the H100) and of two 16-bit ones sort alike. Where one-word tables do not fit (on
    /// lavapipe: 8-lane subgroups, 32 KiB of workgroup memory) asking for them falls back to two
    /// a word, so there both runs take the two-word kernels; the one-word kernels run in the
    /// H100's run of this binary, and the decision itself has unit tests in radix.rs.
    #[test]
    fn rank_counters_one_or_two_a_word() {
        let gpu = gpu(false);
        let mut r = rng(14);
        let keys: Vec<u32> = (0..20_000).map(|_| r.random_range(0..3000)).collect();
        let want = reference::argsort(&keys, SortOrder::default());
        let down = SortOrder {
            descending: true,
            segment_size: None,
        };
        for digits in [1, 2] {
            let s = radix(gpu).tuned(gpu, |t| t.pack = Some(digits));
            let ran = s.radix_counters_a_word();
            assert!(ran == digits || ran == 2, "asked for {digits}, ran {ran}");
            assert_eq!(s.argsort(gpu, &keys, SortOrder::default()).unwrap(), want);
            check_sort(gpu, &s, &keys, down, &format!("{ran} rank counters a word"));
        }
    }

    /// Keys-only sorts over every key bit run their lowest digit's pass as the unstable sweep
    /// (atomic slots, runs reserved by atomics): the same sorted bytes as the all-stable sweeps
    /// and the reference, also where that pass is the only one, or skipped (the next runs as the
    /// unstable sweep; past the two lowest, a stable pass runs first); payloads, argsorts and
    /// key-bit ranges keep the stable sweep.
    #[test]
    fn unstable_first_pass_sorts_the_same() {
        fn both<T: SortKey + PartialEq>(
            gpu: &Gpu,
            fast: &Sorter,
            stable: &Sorter,
            keys: &[T],
            what: &str,
        ) {
            for descending in [false, true] {
                let order = SortOrder {
                    descending,
                    segment_size: None,
                };
                check_sort(gpu, fast, keys, order, what);
                let (mut a, mut b) = (keys.to_vec(), keys.to_vec());
                fast.sort(gpu, &mut a, order).unwrap();
                stable.sort(gpu, &mut b, order).unwrap();
                assert!(
                    bytemuck::cast_slice::<T, u8>(&a) == bytemuck::cast_slice::<T, u8>(&b),
                    "{what}: unstable first pass against stable, desc={descending}"
                );
            }
        }
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let fast = radix(gpu);
            let stable = radix(gpu).tuned(gpu, |t| t.unstable_first = false);
            let tile = fast.radix_tile(false) as usize;
            let mut r = rng(91);
            // which sweep ran shows in the stats: the two lowest passes are recorded both ways
            let keys: Vec<u32> = (0..3 * tile + 5).map(|_| r.random()).collect();
            let recorded = |s: &Sorter| {
                let st = s
                    .sort(gpu, &mut keys.clone(), SortOrder::default())
                    .unwrap();
                (st.radix_unstable_first, st.network_dispatches)
            };
            assert_eq!(recorded(&fast), (true, 3 + 4 + 2), "no_subgroups={no_sg}");
            assert_eq!(recorded(&stable), (false, 3 + 4), "no_subgroups={no_sg}");
            let ranged = radix(gpu).with_key_bits(0..32);
            assert_eq!(
                recorded(&ranged),
                (true, 3 + 4 + 2),
                "every bit named is every bit"
            );
            let ranged = radix(gpu).with_key_bits(0..24);
            assert_eq!(
                recorded(&ranged),
                (false, 3 + 3),
                "a key-bit range stays stable"
            );
            let (_, st) = fast
                .sort_host(
                    gpu,
                    &mut keys.clone(),
                    HostSort {
                        permutation: true,
                        ..HostSort::default()
                    },
                )
                .unwrap();
            assert!(!st.radix_unstable_first, "an argsort stays stable");
            let perm = fast.argsort(gpu, &keys, SortOrder::default()).unwrap();
            assert_eq!(perm, reference::argsort(&keys, SortOrder::default()));
            for n in [1usize, 2, tile - 1, tile, tile + 1, 3 * tile + 5, 70_001] {
                let random: Vec<u32> = (0..n).map(|_| r.random()).collect();
                both(gpu, &fast, &stable, &random, &format!("u32 n={n}"));
                // many equal keys: every digit from four values
                let few: Vec<u32> = (0..n)
                    .map(|_| r.random_range(0..4u32) * 0x0101_0101)
                    .collect();
                both(gpu, &fast, &stable, &few, &format!("few u32 n={n}"));
                // only the lowest digit varies: the unstable sweep is the only pass
                let low: Vec<u32> = (0..n)
                    .map(|_| 0xabcd_ef00 | r.random_range(0..256u32))
                    .collect();
                both(
                    gpu,
                    &fast,
                    &stable,
                    &low,
                    &format!("lowest digit u32 n={n}"),
                );
                // the lowest digit the same in every key (floats of small integers): the second
                // pass runs as the unstable sweep
                let small: Vec<f32> = (0..n).map(|_| r.random_range(0..1000u32) as f32).collect();
                both(gpu, &fast, &stable, &small, &format!("f32 small n={n}"));
                // the two low digits are constant: their passes are skipped, and the first that
                // runs is a stable one
                let high: Vec<i32> = (0..n)
                    .map(|_| r.random_range(-3000..3000i32) << 16 | 0x77)
                    .collect();
                both(
                    gpu,
                    &fast,
                    &stable,
                    &high,
                    &format!("i32 high digits n={n}"),
                );
                let mut floats: Vec<f32> = (0..n).map(|_| r.random_range(-4.0..4.0f32)).collect();
                let mut wide: Vec<f64> = (0..n).map(|_| r.random_range(-4.0..4.0f64)).collect();
                for (i, sp) in f32_specials().into_iter().enumerate() {
                    floats[(i * 7919) % n] = sp;
                    wide[(i * 7907) % n] = sp as f64;
                }
                both(gpu, &fast, &stable, &floats, &format!("f32 specials n={n}"));
                both(gpu, &fast, &stable, &wide, &format!("f64 specials n={n}"));
                let u64s: Vec<u64> = (0..n)
                    .map(|_| r.random::<u64>() >> r.random_range(0..64))
                    .collect();
                both(gpu, &fast, &stable, &u64s, &format!("u64 n={n}"));
            }
            // an unstable tile smaller and larger than the stable sweeps' (prepare sizes its
            // dispatch from its own tile), on its own and looping over tiles
            for items in [3, 16] {
                let other = radix(gpu).tuned(gpu, |t| t.unstable_items = items);
                let looping = radix(gpu)
                    .tuned(gpu, |t| t.unstable_items = items)
                    .tuned(gpu, |t| {
                        t.workgroups = 3;
                        t.payload_workgroups = 3;
                        t.unstable_workgroups = 3
                    });
                for n in [tile - 1, 5 * tile + 3] {
                    let keys: Vec<u32> = (0..n).map(|_| r.random()).collect();
                    let what = format!("unstable items={items} n={n}");
                    both(gpu, &other, &stable, &keys, &what);
                    both(gpu, &looping, &stable, &keys, &format!("looping {what}"));
                    let wide: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0f64)).collect();
                    both(gpu, &other, &stable, &wide, &format!("f64 {what}"));
                }
            }
        }
    }

    /// Keys-only sorts of 64-bit keys hold their own count of keys an invocation
    /// (`SortTuning::wide_items`, cut to `items`; their unstable first pass no more): their tile,
    /// look-back rows and histogram dispatch follow it, around its tile edges and both ways, with
    /// and without subgroups.
    #[test]
    fn wide_keys_only_tiles_of_their_own() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let mut r = rng(91);
            for wide_items in [1, 3, 6, 64] {
                let s = radix(gpu).tuned(gpu, |t| t.wide_items = wide_items);
                let narrow = s.radix_tile(false) as usize;
                let mut probe = vec![2u64, 1];
                let tile = s.sort(gpu, &mut probe, SortOrder::default()).unwrap().tile as usize;
                // its own count of keys an invocation, cut to the keys-only count
                if wide_items >= 9 {
                    assert_eq!(tile, narrow, "wide_items={wide_items}");
                } else {
                    let wg = tile / wide_items as usize;
                    assert!(tile.is_multiple_of(wide_items as usize) && [256, 512].contains(&wg));
                    assert_eq!(narrow % wg, 0, "the same workgroups");
                }
                // argsorts keep theirs
                let (_, st) = s
                    .sort_host(
                        gpu,
                        &mut [3u64, 1, 2],
                        HostSort {
                            permutation: true,
                            ..HostSort::default()
                        },
                    )
                    .unwrap();
                assert_eq!(st.tile, s.radix_tile(true), "argsort tile");
                for n in [tile - 1, tile + 1, 7 * tile + 3] {
                    let u: Vec<u64> = (0..n)
                        .map(|_| r.random::<u64>() >> r.random_range(0..64))
                        .collect();
                    let f: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0f64)).collect();
                    let i: Vec<i64> = (0..n)
                        .map(|_| r.random_range(-1_000_000..1_000_000i64))
                        .collect();
                    for descending in [false, true] {
                        let order = SortOrder {
                            descending,
                            segment_size: None,
                        };
                        let what = format!("wide_items={wide_items} n={n} no_sg={no_sg}");
                        check_sort(gpu, &s, &u, order, &format!("u64 {what}"));
                        check_sort(gpu, &s, &f, order, &format!("f64 {what}"));
                        check_sort(gpu, &s, &i, order, &format!("i64 {what}"));
                    }
                }
            }
        }
    }

    /// Sorts of 64-bit keys with a payload (argsorts, key-value) may run in workgroups of their
    /// own size (`SortTuning::wide_payload_wg`): on lavapipe 512 invocations fit without subgroups
    /// only, so there the argsort's tile is 512 x 8 while keys-only and 32-bit sorts keep the
    /// shared shape; with subgroups the asked-for size does not fit and the shared shape runs.
    /// Either way the permutation and the pairs are the reference's, around the tile's edges.
    #[test]
    fn wide_argsorts_in_workgroups_of_their_own() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let base = radix(gpu);
            let s = radix(gpu).tuned(gpu, |t| t.wide_payload_wg = Some(512));
            let (_, st) = s
                .sort_host(
                    gpu,
                    &mut [3u64, 1, 2],
                    HostSort {
                        permutation: true,
                        ..HostSort::default()
                    },
                )
                .unwrap();
            let tile = st.tile as usize;
            if no_sg {
                assert_eq!(tile, 512 * 8, "its own workgroups");
            } else {
                assert_eq!(tile, base.radix_tile(true) as usize, "the shared shape");
            }
            // everything else keeps the shared shape
            let (_, narrow) = s
                .sort_host(
                    gpu,
                    &mut [3u32, 1, 2],
                    HostSort {
                        permutation: true,
                        ..HostSort::default()
                    },
                )
                .unwrap();
            assert_eq!(narrow.tile, base.radix_tile(true), "32-bit argsorts");
            let keys_only = s.sort(gpu, &mut [2u64, 1], SortOrder::default()).unwrap();
            let base_keys_only = base
                .sort(gpu, &mut [2u64, 1], SortOrder::default())
                .unwrap();
            assert_eq!(keys_only.tile, base_keys_only.tile, "64-bit keys only");
            let mut r = rng(1024);
            for n in [tile - 1, tile + 1, 3 * tile + 5] {
                let u: Vec<u64> = (0..n)
                    .map(|_| r.random::<u64>() >> r.random_range(0..64))
                    .collect();
                let f: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0f64)).collect();
                for descending in [false, true] {
                    let order = SortOrder {
                        descending,
                        segment_size: None,
                    };
                    let what = format!("n={n} no_sg={no_sg} descending={descending}");
                    assert_eq!(
                        s.argsort(gpu, &u, order).unwrap(),
                        reference::argsort(&u, order),
                        "u64 argsort {what}"
                    );
                    assert_eq!(
                        s.argsort(gpu, &f, order).unwrap(),
                        reference::argsort(&f, order),
                        "f64 argsort {what}"
                    );
                }
                let mut keys = u.clone();
                let mut values: Vec<u32> = (0..n as u32).map(|i| i ^ 0x5a5a).collect();
                s.sort_host(
                    gpu,
                    &mut keys,
                    HostSort {
                        values: Some(&mut values),
                        ..HostSort::default()
                    },
                )
                .unwrap();
                let perm = reference::argsort(&u, SortOrder::default());
                let want_values: Vec<u32> = perm.iter().map(|&i| i ^ 0x5a5a).collect();
                assert_eq!(values, want_values, "u64 key-value n={n} no_sg={no_sg}");
            }
        }
    }

    /// Keys-only sorts of 32-bit keys over every bit take the MSD path from `msd_from` keys (here
    /// always): every pass unstable, then a local sort of tiles of 16-bit buckets in workgroup
    /// memory, or a counting sort of each 16-bit bucket where a tile's bin is too full
    /// (msd_dense). Where a 16-bit bucket holds more than a tile the GPU falls back to the LSD
    /// passes; where a top-digit bucket already does, prepare chooses them at once. Every outcome
    /// sorts as the reference does, the buckets msd_dense took are those the CPU twin's took, and
    /// each designed input takes the outcome it was designed for.
    /// f32 keys take the LSD passes unless the tuning asks for the MSD path; 32-bit integers
    /// take it from `msd_from` keys.
    #[test]
    fn msd_path_is_for_integer_keys_by_default() {
        let gpu = gpu(false);
        let s = radix(gpu).tuned(gpu, |t| t.msd_from = 0);
        let mut r = rng(41);
        let mut ints: Vec<u32> = (0..50_000).map(|_| r.random()).collect();
        let mut floats: Vec<f32> = (0..50_000).map(|_| r.random_range(-1.0..1.0f32)).collect();
        s.sort(gpu, &mut floats, SortOrder::default()).unwrap();
        assert!(
            s.radix_msd_outcome(gpu).unwrap().is_none(),
            "f32: the LSD passes"
        );
        assert!(floats.windows(2).all(|w| w[0] <= w[1]));
        s.sort(gpu, &mut ints, SortOrder::default()).unwrap();
        assert!(
            s.radix_msd_outcome(gpu).unwrap().is_some(),
            "u32: the MSD path"
        );
    }

    /// Host keys are sampled before the sort is recorded (`Sorter::record_sampled`, which
    /// `sort` and `sort_host` use): where one top-digit bucket holds far more keys than the MSD
    /// path takes, and the keys' range would not be sorted relative to, the LSD passes run at
    /// once, with the same result; keys recorded without a sample take the MSD path and fall
    /// back on the GPU. Keys of a range the path sorts relative to keep it. Host bytes of
    /// another length are refused.
    #[test]
    fn a_sample_of_host_keys_can_rule_out_the_msd_path() {
        use gpusort_core::sort::radix::MsdOutcome::{LsdAtOnce, Ran};
        let gpu = gpu(false);
        let s = radix(gpu).tuned(gpu, |t| t.msd_from = 0);
        // past four times RADIX tiles in one top-digit bucket (the sample's margin)
        let n = 4 * 256 * s.radix_msd_tile() as usize + 1;
        let mut r = rng(43);
        // 21 bits across a top digit: relative to their range, spread over every 16-bit bucket
        let ranged: Vec<u32> = (0..n)
            .map(|_| 0x00ff_0000 + r.random_range(0..1 << 21))
            .collect();
        let mut want = ranged.clone();
        want.sort_unstable();
        let mut host = ranged.clone();
        let st = s.sort(gpu, &mut host, SortOrder::default()).unwrap();
        assert!(st.radix_msd, "a range the MSD path sorts relative to");
        assert_eq!(
            s.radix_msd_outcome(gpu).unwrap(),
            Some(Ran {
                dense_buckets: 0,
                ranged: true
            })
        );
        assert_eq!(host, want);
        // one 16-bit bucket: the sample rules the path out
        let keys: Vec<u32> = (0..n).map(|_| r.random_range(0..1 << 16)).collect();
        let mut want = keys.clone();
        want.sort_unstable();
        let mut host = keys.clone();
        let st = s.sort(gpu, &mut host, SortOrder::default()).unwrap();
        assert!(!st.radix_msd, "the sample rules the MSD path out");
        assert!(s.radix_msd_outcome(gpu).unwrap().is_none());
        assert_eq!(host, want);
        // the same keys recorded from a GPU buffer: the MSD path, which falls back at once
        let buf = transfer::buffer_from(gpu, "keys", &keys).unwrap();
        let job = SortJob {
            key_type: KeyType::U32,
            order: SortOrder::default(),
            keys: &buf,
            n: n as u32,
            values: None,
            permutation: None,
        };
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        assert!(s.record(gpu, &mut enc, &job).unwrap().radix_msd);
        gpu.queue.submit([enc.finish()]);
        assert_eq!(transfer::read_vec::<u32>(gpu, &buf, n).unwrap(), want);
        assert_eq!(s.radix_msd_outcome(gpu).unwrap(), Some(LsdAtOnce));
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        let short = bytemuck::cast_slice::<u32, u8>(&keys[1..]);
        assert!(s.record_sampled(gpu, &mut enc, &job, short).is_err());
    }

    #[test]
    fn msd_path_sorts_the_same() {
        use gpusort_core::sort::radix::MsdOutcome::{self, FellBack, LsdAtOnce, Ran};
        // what a sort did: the MSD path with or without msd_dense, or the LSD passes
        #[derive(Debug, PartialEq)]
        enum Took {
            Local,
            Dense,
            Lsd(MsdOutcome),
        }
        use Took::{Dense, Local, Lsd};
        fn run<T: SortKey + PartialEq>(gpu: &Gpu, s: &Sorter, keys: &[T], what: &str) -> Took {
            let mut took = Vec::new();
            for descending in [false, true] {
                let order = SortOrder {
                    descending,
                    segment_size: None,
                };
                check_sort(gpu, s, keys, order, what);
                let outcome = s.radix_msd_outcome(gpu).unwrap().expect("the MSD path");
                // the CPU twin on the sortable values: the same outcome, the same dense buckets
                let values: Vec<u32> = keys
                    .iter()
                    .map(|k| (reference::sortable(k, descending) >> 32) as u32)
                    .collect();
                let twin =
                    gpusort_core::reference::radix::msd_sort(&values, s.radix_msd_tile() as usize);
                match (outcome, twin) {
                    (
                        Ran {
                            dense_buckets,
                            ranged,
                        },
                        Some(t),
                    ) => {
                        assert_eq!(dense_buckets, t.dense_buckets, "{what} desc={descending}");
                        assert_eq!(ranged, t.ranged, "{what} desc={descending}");
                        took.push(if dense_buckets == 0 { Local } else { Dense });
                    }
                    (FellBack | LsdAtOnce, None) => took.push(Lsd(outcome)),
                    (o, t) => panic!("{what} desc={descending}: GPU {o:?}, twin {t:?}"),
                }
            }
            // descending keys' buckets are the ascending ones mirrored: the same sizes
            assert_eq!(took[0], took[1], "{what}");
            took.remove(0)
        }
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = msd_everywhere(gpu);
            let tile = s.radix_msd_tile() as usize;
            let mut r = rng(77);
            // which sorts take the MSD path: keys-only 32-bit keys over every bit, from msd_from
            let mut path = |s: &Sorter| {
                let mut keys: Vec<u32> = (0..1000).map(|_| r.random()).collect();
                s.sort(gpu, &mut keys, SortOrder::default())
                    .unwrap()
                    .radix_msd
            };
            assert!(path(&s), "no_subgroups={no_sg}");
            assert!(
                !path(&radix(gpu)),
                "1,000 keys are below the default msd_from"
            );
            let ranged = msd_everywhere(gpu).with_key_bits(0..24);
            assert!(!path(&ranged), "a key-bit range");
            let mut wide = vec![3u64, 1, 2];
            let st = s.sort(gpu, &mut wide, SortOrder::default()).unwrap();
            assert!(!st.radix_msd, "64-bit keys");
            let (_, st) = s
                .sort_host(
                    gpu,
                    &mut [3u32, 1, 2],
                    HostSort {
                        permutation: true,
                        ..HostSort::default()
                    },
                )
                .unwrap();
            assert!(!st.radix_msd, "an argsort");
            for n in [
                1usize,
                2,
                3,
                255,
                256,
                257,
                tile - 1,
                tile,
                tile + 1,
                3 * tile + 5,
                40_001,
            ] {
                let random: Vec<u32> = (0..n).map(|_| r.random()).collect();
                assert_eq!(run(gpu, &s, &random, &format!("u32 n={n}")), Local);
                // about 16 copies of each value: duplicates inside 16-bit buckets
                let dups: Vec<u32> = (0..n)
                    .map(|_| {
                        r.random_range(0..(n as u32 / 16).max(1))
                            .wrapping_mul(0x9e37_79b1)
                    })
                    .collect();
                assert_eq!(run(gpu, &s, &dups, &format!("dup u32 n={n}")), Local);
                // the top digit the same everywhere, then the second digit too
                let low: Vec<u32> = (0..n).map(|_| r.random::<u32>() >> 8).collect();
                assert_eq!(run(gpu, &s, &low, &format!("24-bit u32 n={n}")), Local);
                // one 16-bit bucket: a whole tile sorted locally, or a fall back past it
                let one: Vec<u32> = (0..n)
                    .map(|_| 0xabcd_0000 | r.random_range(0..65536))
                    .collect();
                let want = if n <= tile { Local } else { Lsd(FellBack) };
                assert_eq!(run(gpu, &s, &one, &format!("one bucket n={n}")), want);
                // most keys in one 16-bit bucket, the rest spread over the third digit: a fall
                // back whose LSD passes run an odd number of times (the top digit is the same
                // everywhere), so the last one's output is copied back
                let odd: Vec<u32> = (0..n)
                    .map(|i| match i % 8 {
                        0 => 0x0700_0000 | r.random_range(0..1 << 24),
                        _ => 0x07cd_0000 | r.random_range(0..65536),
                    })
                    .collect();
                let in_bucket = odd.iter().filter(|&&k| k >> 16 == 0x07cd).count();
                let took = run(gpu, &s, &odd, &format!("odd passes n={n}"));
                match in_bucket > tile {
                    true => assert_eq!(took, Lsd(FellBack), "n={n}"),
                    false => assert_ne!(took, Lsd(FellBack), "n={n}"),
                }
                // equal keys: one bin, in place however full (no comparisons past MSD_GROUP_MAX)
                let same = vec![0x8000_0001u32; n];
                let want = if n <= tile { Local } else { Lsd(FellBack) };
                assert_eq!(run(gpu, &s, &same, &format!("equal n={n}")), want);
                let mut floats: Vec<f32> = (0..n).map(|_| r.random_range(-4.0..4.0f32)).collect();
                for (i, sp) in f32_specials().into_iter().enumerate() {
                    floats[(i * 7919) % n] = sp;
                }
                run(gpu, &s, &floats, &format!("f32 specials n={n}"));
                let ints: Vec<i32> = (0..n).map(|_| r.random_range(-70_000..70_000)).collect();
                run(gpu, &s, &ints, &format!("i32 n={n}"));
            }
            // larger: 16-bit buckets of about 4 keys, many per workgroup of msd_count and
            // msd_sweep
            let random: Vec<u32> = (0..1 << 18).map(|_| r.random()).collect();
            assert_eq!(run(gpu, &s, &random, "u32 n=2^18"), Local);
            // relative to the keys' range (radix_layout::msd_range_shift; `run` checks the twin
            // made the same choice): keys over two absolute 16-bit buckets (and two top digits),
            // more than half a tile each, which would make the path fall back as they are
            let n = 3 * tile + 7;
            let stamps: Vec<u32> = (0..n)
                .map(|_| 0x65ff_f000 + r.random_range(0..0x2000))
                .collect();
            assert_eq!(run(gpu, &s, &stamps, "ranged timestamps"), Local);
            let signed: Vec<i32> = (0..n).map(|_| r.random_range(-4096..4096)).collect();
            assert_eq!(run(gpu, &s, &signed, "ranged i32 about zero"), Local);
            // relative to the range, yet one value fills its bucket past a tile: a fall back
            let crowded: Vec<u32> = (0..n)
                .map(|i| match i < 2 * tile {
                    true => 0x12ff_0000,
                    false => 0x12ff_0000 + r.random_range(0..0x2_0000),
                })
                .collect();
            assert_eq!(run(gpu, &s, &crowded, "ranged, crowded"), Lsd(FellBack));
            // few distinct values (codes, categories), each its own top digit: each top-digit
            // bucket one value, past a tile, sorted once the top digit's pass has run
            let codes = [0x0311_0000u32, 0x9c12_3456];
            let few: Vec<u32> = (0..n).map(|_| codes[r.random_range(0..2)]).collect();
            assert_eq!(run(gpu, &s, &few, "few values"), Local);
            // two values of one top digit: its 16-bit buckets overflow a tile, a fall back
            let shared = [0x4a00_0007u32, 0x4a77_0000];
            let two: Vec<u32> = (0..n).map(|_| shared[r.random_range(0..2)]).collect();
            assert_eq!(run(gpu, &s, &two, "two values a top digit"), Lsd(FellBack));
            // a job beyond one binding (here 4,096 keys a binding) takes the MSD path too, its
            // keys reached through two bindings
            let split = radix(gpu).tuned(gpu, |t| {
                t.msd_from = 0;
                t.binding_keys = Some(4096);
            });
            let n = 40_001;
            let mut keys: Vec<u32> = (0..n).map(|_| r.random()).collect();
            let st = split.sort(gpu, &mut keys, SortOrder::default()).unwrap();
            assert!(st.radix_two_bindings && st.radix_msd, "{st:?}");
            assert!(keys.windows(2).all(|w| w[0] <= w[1]));
            let random: Vec<u32> = (0..n).map(|_| r.random()).collect();
            assert_eq!(run(gpu, &split, &random, "two bindings, u32"), Local);
            let dups: Vec<u32> = (0..n)
                .map(|_| r.random_range(0..2500u32).wrapping_mul(0x9e37_79b1))
                .collect();
            assert_eq!(run(gpu, &split, &dups, "two bindings, dups"), Local);
            let one: Vec<u32> = (0..n)
                .map(|_| 0xabcd_0000 | r.random_range(0..65536))
                .collect();
            assert_eq!(
                run(gpu, &split, &one, "two bindings, one bucket"),
                Lsd(FellBack)
            );
            // msd_local's workgroups: one a bucket, or a few looping over buckets of every size,
            // with the next tile's keys loaded early (the default) or as each tile starts
            for (groups, prefetch) in [(0, true), (3, true), (3, false)] {
                let s = msd_everywhere(gpu)
                    .tuned(gpu, |t| t.msd_local_groups = groups)
                    .tuned(gpu, |t| t.msd_prefetch = prefetch);
                for n in [257, tile, 40_001] {
                    let random: Vec<u32> = (0..n).map(|_| r.random()).collect();
                    let what = format!("{groups} local groups (prefetch {prefetch}), u32 n={n}");
                    assert_eq!(run(gpu, &s, &random, &what), Local);
                    let mixed: Vec<u32> = (0..n)
                        .map(|i| match i % 3 == 0 && i / 3 < tile - 1 {
                            // one bucket of up to a tile, among small ones (none of which
                            // may join it: two more keys would make it overflow a tile)
                            true => 0x1234_0000 | r.random_range(0..512),
                            false => match r.random::<u32>() {
                                k if k >> 16 == 0x1234 => k ^ 0x8000_0000,
                                k => k,
                            },
                        })
                        .collect();
                    // (msd_dense or not as the twin finds: `run` compares the dense buckets)
                    let what = format!("{groups} local groups, mixed buckets n={n}");
                    assert_ne!(run(gpu, &s, &mixed, &what), Lsd(FellBack));
                    // 256 copies of each value: bins fuller than MSD_GROUP_MAX, but of equal keys
                    let copies: Vec<u32> = (0..n as u32)
                        .map(|i| (i / 256).wrapping_mul(0x9e37_79b1))
                        .collect();
                    let what = format!("{groups} local groups, 256 copies n={n}");
                    assert_eq!(run(gpu, &s, &copies, &what), Local);
                    // every tile dense: 60 copies of each value, 16-bit buckets of two values
                    let dense: Vec<u32> = (0..n as u32)
                        .map(|i| (i / 120) << 16 | (i / 60 % 2))
                        .collect();
                    let what = format!("{groups} local groups, dense n={n}");
                    assert_eq!(run(gpu, &s, &dense, &what), Dense);
                }
            }
            // a count that lives on the GPU: the first `count` keys sorted, the rest untouched
            let cap = 10_000usize;
            let keys: Vec<f32> = (0..cap).map(|_| r.random_range(-50.0..50.0f32)).collect();
            for count in [0u32, 1, 2, 4096, 6001, 10_000, 20_000] {
                let used = (count as usize).min(cap);
                let key_buf = transfer::buffer_from(gpu, "keys", &keys).unwrap();
                let count_buf = transfer::buffer_from(gpu, "count", &[count]).unwrap();
                let mut enc = gpu.device.create_command_encoder(&Default::default());
                let job = SortJob {
                    key_type: KeyType::F32,
                    order: SortOrder::default(),
                    keys: &key_buf,
                    n: cap as u32,
                    values: None,
                    permutation: None,
                };
                let st = s.record_counted(gpu, &mut enc, &job, &count_buf).unwrap();
                assert!(st.radix_msd);
                gpu.queue.submit([enc.finish()]);
                let got: Vec<f32> = transfer::read_vec(gpu, &key_buf, cap).unwrap();
                let want = reference::sorted(&keys[..used], SortOrder::default());
                assert_eq!(&got[..used], &want[..], "count {count}");
                assert_eq!(&got[used..], &keys[used..], "past the count, untouched");
                // no keys: prepare takes the LSD passes at once (they do nothing)
                let ran = s.radix_msd_outcome(gpu).unwrap();
                match used {
                    0 => assert_eq!(ran, Some(LsdAtOnce), "count {count}"),
                    _ => assert!(
                        matches!(
                            ran,
                            Some(Ran {
                                dense_buckets: 0,
                                ..
                            })
                        ),
                        "count {count}: {ran:?}"
                    ),
                }
            }
            // a top-digit bucket of more than 256 tiles: the LSD passes at once
            let n = 256 * tile + 1;
            let same = vec![7u32; n];
            assert_eq!(
                run(gpu, &s, &same, "256 tiles of equal keys"),
                Lsd(LsdAtOnce)
            );
        }
    }

    /// Jobs beyond one storage binding bind each array as two ranges of its buffer. A first
    /// range of 4096 keys makes small sorts take those kernels: every key type with its specials
    /// in both directions, argsorts, key-value sorts of a GPU buffer, key-bit ranges and a
    /// GPU-resident count, against the CPU references; sorts of at most 4096 keys (the same
    /// sorter, its scratch kept from the larger ones) keep one binding.
    #[test]
    fn radix_jobs_beyond_one_binding() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu).tuned(gpu, |t| t.binding_keys = Some(4096));
            every_type(gpu, &s);
            let mut r = rng(41);
            for n in [4096usize, 4097, 30_001] {
                let mut f: Vec<f32> = (0..n)
                    .map(|_| r.random_range(-9.0..9.0f32).round())
                    .collect();
                f.extend(f32_specials());
                let mut sorted = f.clone();
                let stats = s.sort(gpu, &mut sorted, SortOrder::default()).unwrap();
                assert_eq!(stats.radix_two_bindings, f.len() > 4096, "n={n}");
                for descending in [false, true] {
                    let order = SortOrder {
                        descending,
                        segment_size: None,
                    };
                    assert_eq!(
                        s.argsort(gpu, &f, order).unwrap(),
                        reference::argsort(&f, order),
                        "argsort n={n} desc={descending} no_subgroups={no_sg}"
                    );
                }
            }
            // key-value of a GPU buffer: the values are the input positions, so they must come
            // back as the stable permutation
            let n = 20_000usize;
            let keys: Vec<i64> = (0..n).map(|_| r.random_range(-300..300)).collect();
            let key_buf = transfer::buffer_from(gpu, "keys", &keys).unwrap();
            let values: Vec<u32> = (0..n as u32).collect();
            let value_buf = transfer::buffer_from(gpu, "values", &values).unwrap();
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            let job = SortJob {
                key_type: KeyType::I64,
                order: SortOrder::default(),
                keys: &key_buf,
                n: n as u32,
                values: Some(&value_buf),
                permutation: None,
            };
            assert!(s.record(gpu, &mut enc, &job).unwrap().radix_two_bindings);
            gpu.queue.submit([enc.finish()]);
            let want = reference::argsort(&keys, SortOrder::default());
            assert_eq!(transfer::read_vec::<u32>(gpu, &value_buf, n).unwrap(), want);
            let got: Vec<i64> = transfer::read_vec(gpu, &key_buf, n).unwrap();
            assert_eq!(got, reference::sorted(&keys, SortOrder::default()));
            // a GPU-resident count: the first `count` keys sorted, the rest untouched
            let wide: Vec<u64> = (0..n).map(|_| r.random::<u64>() >> 9).collect();
            for count in [3000u32, 9001] {
                let key_buf = transfer::buffer_from(gpu, "keys", &wide).unwrap();
                let count_buf = transfer::buffer_from(gpu, "count", &[count]).unwrap();
                let mut enc = gpu.device.create_command_encoder(&Default::default());
                let job = SortJob {
                    key_type: KeyType::U64,
                    order: SortOrder::default(),
                    keys: &key_buf,
                    n: n as u32,
                    values: None,
                    permutation: None,
                };
                s.record_counted(gpu, &mut enc, &job, &count_buf).unwrap();
                gpu.queue.submit([enc.finish()]);
                let got: Vec<u64> = transfer::read_vec(gpu, &key_buf, n).unwrap();
                let used = count as usize;
                let want = reference::sorted(&wide[..used], SortOrder::default());
                assert_eq!(&got[..used], &want[..], "count {count}");
                assert_eq!(&got[used..], &wide[used..], "past the count {count}");
            }
            // part of the bits
            let u: Vec<u32> = (0..12_000).map(|_| r.random()).collect();
            let (want, _) = twin::argsort(&u, true, 4..21);
            let order = SortOrder {
                descending: true,
                segment_size: None,
            };
            assert_eq!(
                radix(gpu)
                    .tuned(gpu, |t| t.binding_keys = Some(4096))
                    .with_key_bits(4..21)
                    .argsort(gpu, &u, order)
                    .unwrap(),
                want,
                "bits 4..21"
            );
        }
    }

    /// A job truly beyond the device's binding (lavapipe: 128 MiB): 2^24 + 4097 64-bit keys sort
    /// as one GPU job in two bindings with the default tuning. Only the low 16 bits differ, so
    /// two of the eight digit passes run.
    #[test]
    fn radix_sort_larger_than_a_binding() {
        let gpu = gpu(false);
        let s = radix(gpu);
        let n = (gpu.max_binding() / 8) as usize + 4097;
        let mut r = rng(43);
        let keys: Vec<u64> = (0..n)
            .map(|_| 0x0123_4567_0000_0000 | r.random_range(0..65_536))
            .collect();
        let mut got = keys.clone();
        let stats = s.sort(gpu, &mut got, SortOrder::default()).unwrap();
        assert!(stats.radix_two_bindings, "one GPU job in two bindings");
        let mut want = keys;
        want.sort_unstable();
        assert!(got == want, "{n} keys beyond one binding");
    }

    /// A count known only on the GPU: the first `count` keys (clamped to the capacity) are
    /// sorted, the rest left alone, values or the permutation carried along.
    #[test]
    fn gpu_resident_count() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu);
            let cap = 10_000usize;
            let mut r = rng(21);
            let keys: Vec<f32> = (0..cap).map(|_| r.random_range(-50.0..50.0f32)).collect();
            for count in [0u32, 1, 2, 4096, 6001, 10_000, 20_000] {
                let used = (count as usize).min(cap);
                let key_buf = transfer::buffer_from(gpu, "keys", &keys).unwrap();
                let count_buf = transfer::buffer_from(gpu, "count", &[count]).unwrap();
                let perm_buf = transfer::storage_buffer(gpu, "perm", cap as u64 * 4).unwrap();
                let mut enc = gpu.device.create_command_encoder(&Default::default());
                s.record_counted(
                    gpu,
                    &mut enc,
                    &SortJob {
                        key_type: KeyType::F32,
                        order: SortOrder::default(),
                        keys: &key_buf,
                        n: cap as u32,
                        values: None,
                        permutation: Some(&perm_buf),
                    },
                    &count_buf,
                )
                .unwrap();
                gpu.queue.submit([enc.finish()]);
                let got: Vec<f32> = transfer::read_vec(gpu, &key_buf, cap).unwrap();
                let want = reference::sorted(&keys[..used], SortOrder::default());
                assert_eq!(&got[..used], &want[..], "count {count}");
                assert_eq!(&got[used..], &keys[used..], "past the count, untouched");
                if used > 1 {
                    let perm: Vec<u32> = transfer::read_vec(gpu, &perm_buf, used).unwrap();
                    assert_eq!(
                        perm,
                        reference::argsort(&keys[..used], SortOrder::default())
                    );
                }
            }
            let both = s.record_counted(
                gpu,
                &mut gpu.device.create_command_encoder(&Default::default()),
                &SortJob {
                    key_type: KeyType::U32,
                    order: SortOrder::default(),
                    keys: &transfer::storage_buffer(gpu, "k", 64).unwrap(),
                    n: 16,
                    values: Some(&transfer::storage_buffer(gpu, "v", 64).unwrap()),
                    permutation: Some(&transfer::storage_buffer(gpu, "p", 64).unwrap()),
                },
                &transfer::storage_buffer(gpu, "c", 16).unwrap(),
            );
            assert!(matches!(both, Err(gpusort_core::Error::InvalidInput(_))));
        }
    }

    /// One sorter's scratch is kept between sorts and reused by smaller ones, which must not see
    /// what larger sorts left in it (look-back state, digit counts, tickets); two sorts recorded
    /// into one encoder share it; after a release the next sort allocates again.
    #[test]
    fn scratch_is_reused_between_sorts() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = radix(gpu);
            let what = format!("scratch reuse no_subgroups={no_sg}");
            assert_eq!(s.radix_scratch_bytes(), 0, "nothing before the first sort");
            let mut r = rng(41);
            // the largest shapes first: 64-bit keys with a payload, then keys alone (which bind
            // small stand-ins for the payload)
            let big: Vec<i64> = (0..70_001).map(|_| r.random_range(-900..900)).collect();
            let want_big = reference::argsort(&big, SortOrder::default());
            assert_eq!(
                s.argsort(gpu, &big, SortOrder::default()).unwrap(),
                want_big
            );
            check_sort(gpu, &s, &big, SortOrder::default(), &what);
            let held = s.radix_scratch_bytes();
            assert!(held >= 70_001 * (8 + 4), "{what}: {held} bytes kept");
            // smaller sorts of every shape reuse it, in both directions
            for n in [1usize, 33, 4097, 9000] {
                let keys: Vec<u32> = (0..n).map(|_| r.random_range(0..700)).collect();
                let desc = SortOrder {
                    descending: true,
                    ..Default::default()
                };
                check_sort(gpu, &s, &keys, desc, &what);
                assert_eq!(
                    s.argsort(gpu, &keys, SortOrder::default()).unwrap(),
                    reference::argsort(&keys, SortOrder::default()),
                    "{what} argsort n={n}"
                );
                let wide: Vec<u64> = (0..n).map(|_| r.random::<u64>() >> 20).collect();
                check_sort(gpu, &s, &wide, SortOrder::default(), &what);
            }
            assert_eq!(
                s.radix_scratch_bytes(),
                held,
                "{what}: smaller sorts grew nothing"
            );
            // two sorts in one encoder: the second clears and reuses the first one's scratch
            let a: Vec<u32> = (0..20_000).map(|_| r.random()).collect();
            let b: Vec<f32> = (0..5_000).map(|_| r.random_range(-9.0..9.0f32)).collect();
            let (a_buf, b_buf) = (
                transfer::buffer_from(gpu, "a", &a).unwrap(),
                transfer::buffer_from(gpu, "b", &b).unwrap(),
            );
            let perm_buf = transfer::storage_buffer(gpu, "perm", 5_000 * 4).unwrap();
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            for (key_type, keys, n, permutation) in [
                (KeyType::U32, &a_buf, 20_000, None),
                (KeyType::F32, &b_buf, 5_000, Some(&perm_buf)),
            ] {
                let job = SortJob {
                    key_type,
                    order: SortOrder::default(),
                    keys,
                    n,
                    values: None,
                    permutation,
                };
                s.record(gpu, &mut enc, &job).unwrap();
            }
            gpu.queue.submit([enc.finish()]);
            let got_a: Vec<u32> = transfer::read_vec(gpu, &a_buf, a.len()).unwrap();
            assert_eq!(got_a, reference::sorted(&a, SortOrder::default()), "{what}");
            let got_perm: Vec<u32> = transfer::read_vec(gpu, &perm_buf, b.len()).unwrap();
            assert_eq!(
                got_perm,
                reference::argsort(&b, SortOrder::default()),
                "{what}"
            );
            s.release_radix_scratch();
            assert_eq!(s.radix_scratch_bytes(), 0, "{what}: released");
            assert_eq!(
                s.argsort(gpu, &big, SortOrder::default()).unwrap(),
                want_big
            );
            check_sort(gpu, &s, &big, SortOrder::default(), &what);
            assert_eq!(s.radix_scratch_bytes(), held, "{what}: allocated again");
        }
    }

    /// More keys than lavapipe's 128 MiB binding holds: sorted in pieces and merged (one mode:
    /// the pieces are ordinary radix sorts, tested in both modes above).
    #[test]
    fn beyond_one_binding_in_pieces() {
        let gpu = gpu(false);
        let n = (gpu.max_binding() / 4) as usize + 4099;
        let mut r = rng(31);
        let keys: Vec<u32> = (0..n).map(|_| r.random::<u32>() >> 4).collect();
        let mut got = keys.clone();
        radix(gpu)
            .sort(gpu, &mut got, SortOrder::default())
            .unwrap();
        let mut want = keys;
        want.sort_unstable();
        assert!(got == want, "{n} keys in pieces");
    }
}

/// The staging ring: round trips bit-exact for sizes around chunk and page boundaries, many
/// chunks, more chunks than the ring has slots, at offsets, with slots growing between calls —
/// through imported host memory (Vulkan's VK_EXT_external_memory_host, which lavapipe offers)
/// and through wgpu's mapped buffers, which must give the same bytes.
#[test]
fn transfers_round_trip_through_the_staging_ring() {
    use gpusort_core::device::transfer;
    let shared = gpu(false);
    for no_host_import in [false, true] {
        let options = GpuOptions {
            adapter: Some(shared.adapter.index.to_string()),
            no_host_import,
            ..Default::default()
        };
        let gpu = &Gpu::new(&options).unwrap();
        if shared.adapter.name.contains("llvmpipe") {
            assert!(gpu.can_import_host_memory(), "lavapipe imports host memory");
        }
        assert_eq!(
            gpu.host_memory_import(),
            gpu.can_import_host_memory() && !no_host_import
        );
        // a page, and a chunk that is not a whole number of pages (imported slots round up)
        for chunk in [4096u64, 6004] {
            let ring = transfer::RING_SLOTS as u64;
            let buf = transfer::storage_buffer(gpu, "transfer test", 64 * chunk).unwrap();
            let mut r = rng(77);
            for bytes in [
                0,
                4,
                chunk - 4,
                chunk,
                chunk + 4,
                2 * chunk + 4,
                ring * chunk,
                ring * chunk + 4,
                7 * ring * chunk + 12,
            ] {
                for offset in [0u64, 8, chunk + 4] {
                    let data: Vec<u8> = (0..bytes).map(|_| r.random()).collect();
                    transfer::upload_chunked(gpu, &buf, offset, &data, chunk).unwrap();
                    let mut back = vec![0u8; bytes as usize];
                    transfer::download_chunked(gpu, &buf, offset, &mut back, chunk).unwrap();
                    assert!(back == data, "{bytes} bytes at {offset}, chunks of {chunk}");
                    // the default chunk size (a single chunk here) reads the same bytes back
                    let mut again = vec![0u8; bytes as usize];
                    transfer::download(gpu, &buf, offset, &mut again).unwrap();
                    assert!(again == data, "{bytes} bytes at {offset}, default chunks");
                    // handed on straight from staging (the CLI's sort writes files so): every
                    // chunk once, in order, at its place
                    let mut passed = Vec::new();
                    let mut at_expected = 0;
                    transfer::download_through(
                        gpu,
                        &buf,
                        offset,
                        bytes,
                        chunk,
                        &mut |at, piece| {
                            assert_eq!(at, at_expected, "chunks in order");
                            assert!(piece.len() as u64 <= chunk && !piece.is_empty());
                            at_expected += piece.len();
                            passed.extend_from_slice(piece);
                            Ok(())
                        },
                    )
                    .unwrap();
                    assert!(
                        passed == data,
                        "{bytes} bytes at {offset} handed on, chunks of {chunk}"
                    );
                }
            }
        }
        assert_eq!(
            transfer::ring_in_host_memory(gpu),
            gpu.host_memory_import(),
            "the ring's buffers are where the device says"
        );
        // switching the path on a live device keeps the bytes
        gpu.set_host_memory_import(no_host_import).unwrap();
        let keys: Vec<u32> = (0..100_003u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let mut got = keys.clone();
        Sorter::new(gpu)
            .unwrap()
            .sort(gpu, &mut got, SortOrder::default())
            .unwrap();
        let mut want = keys;
        want.sort_unstable();
        assert!(got == want, "a sort after switching the staging path");
        assert_eq!(transfer::ring_in_host_memory(gpu), gpu.host_memory_import());
        // the streamed jobs' staging slots (two per job) on this path: a scan in odd chunks
        let scanner = gpusort_core::scan::Scanner::new(gpu).unwrap();
        let data: Vec<u32> = (0..70_001u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let mut out = vec![0u32; data.len()];
        scanner
            .scan_streamed(
                gpu,
                &data,
                &gpusort_core::scan::streamed::ScanStream::new(
                    gpusort_core::scan::ScanOp::Add,
                    true,
                    9_999,
                ),
                |at, piece| {
                    out[at..at + piece.len()].copy_from_slice(piece);
                    Ok(())
                },
            )
            .unwrap();
        let want =
            gpusort_core::reference::scan::scan(&data, gpusort_core::scan::ScanOp::Add, true);
        assert!(
            out == want,
            "a streamed scan, import {}",
            gpu.host_memory_import()
        );
    }
}

/// Pinned buffers: imported host memory the copy engine reads and writes directly where the
/// device can import (lavapipe can), ordinary memory through the ring where it cannot or where
/// imports are off; both give the same bytes for sizes around pages and alignment edges, at
/// offsets on both sides; misuse is an error, not a wrong copy.
#[test]
fn pinned_buffers_round_trip_on_both_paths() {
    use gpusort_core::{device::transfer, PinnedBuffer};
    let shared = gpu(false);
    let mut results: Vec<Vec<u8>> = Vec::new();
    for no_host_import in [false, true] {
        let options = GpuOptions {
            adapter: Some(shared.adapter.index.to_string()),
            no_host_import,
            ..Default::default()
        };
        let gpu = &Gpu::new(&options).unwrap();
        let buf = transfer::storage_buffer(gpu, "pinned test", 3 << 20).unwrap();
        let mut r = rng(91);
        let mut seen = Vec::new();
        for bytes in [
            0usize,
            4,
            4092,
            4096,
            4100,
            8 << 10,
            (1 << 20) + 12,
            (2 << 20) + 4,
        ] {
            let mut pinned = PinnedBuffer::new(gpu, bytes).unwrap();
            assert_eq!(pinned.len(), bytes);
            assert_eq!(
                pinned.is_imported(),
                gpu.host_memory_import(),
                "{bytes} bytes: imported exactly where the device's staging is"
            );
            assert!(pinned.bytes().iter().all(|&b| b == 0), "made zeroed");
            for b in pinned.bytes_mut() {
                *b = r.random();
            }
            let data = pinned.bytes().to_vec();
            for (from, gpu_at) in [(0usize, 0u64), (4, 8), (bytes.min(4092) & !3, 4096)] {
                let range = from.min(bytes)..bytes;
                pinned.upload_to(gpu, range.clone(), &buf, gpu_at).unwrap();
                pinned.bytes_mut().fill(0);
                pinned
                    .download_from(gpu, &buf, gpu_at, range.clone())
                    .unwrap();
                assert!(
                    pinned.bytes()[range.clone()] == data[range.clone()],
                    "{bytes} bytes, {range:?} at GPU byte {gpu_at}"
                );
                assert!(
                    pinned.bytes()[..range.start].iter().all(|&b| b == 0),
                    "only the range"
                );
                // the ring reads the same bytes off the GPU
                let mut again = vec![0u8; range.len()];
                transfer::download(gpu, &buf, gpu_at, &mut again).unwrap();
                assert!(
                    again == data[range.clone()],
                    "{bytes} bytes through the ring"
                );
                pinned.bytes_mut().copy_from_slice(&data);
            }
            // typed views cover the whole elements
            assert_eq!(pinned.as_slice::<u32>().len(), bytes / 4);
            assert_eq!(pinned.as_slice::<f64>().len(), bytes / 8);
            seen.extend_from_slice(&data);
        }
        // misuse: unaligned, outside either buffer, another device
        let mut pinned = PinnedBuffer::new(gpu, 64).unwrap();
        for (range, gpu_at, what) in [
            (0..6, 0u64, "unaligned length"),
            (2..6, 0, "unaligned start"),
            (0..8, 2, "unaligned GPU offset"),
            (0..68, 0, "past the pinned buffer"),
        ] {
            assert!(
                pinned.upload_to(gpu, range, &buf, gpu_at).is_err(),
                "{what}"
            );
        }
        assert!(
            pinned
                .download_from(gpu, &buf, (3 << 20) - 4, 0..8)
                .is_err(),
            "past the GPU buffer"
        );
        let other = &Gpu::new(&options).unwrap();
        let other_buf = transfer::storage_buffer(other, "pinned test", 64).unwrap();
        assert!(
            pinned.download_from(other, &other_buf, 0, 0..8).is_err(),
            "another device"
        );
        results.push(seen);
    }
    assert!(results[0] == results[1], "the same bytes on both paths");
}

/// The external sort (runs on disk, streaming merge) under budgets far below the input's size.
mod external_sort {
    use super::*;
    use gpusort_core::sort::external::{self, ExternalSort, Phase, Sink, MIN_MEMORY_BUDGET};
    use gpusort_core::{Algorithm, Error};

    struct Result<T> {
        keys: Vec<T>,
        values: Vec<u32>,
        perm: Vec<u32>,
        phases: Vec<Phase>,
    }

    fn run<T: SortKey>(
        s: &Sorter,
        gpu: &Gpu,
        keys: &[T],
        order: SortOrder,
        budget: u64,
    ) -> Result<T> {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<u32> = (0..keys.len() as u32).map(|i| i ^ 0x5a5a).collect();
        let (mut k, mut v, mut p) = (Vec::new(), Vec::new(), Vec::new());
        let mut phases = Vec::new();
        external::sort_external::<T>(
            &external::GpuRuns { sorter: s, gpu },
            bytemuck::cast_slice(keys),
            Some(bytemuck::cast_slice(&values)),
            &ExternalSort {
                order,
                memory_budget: budget,
                run_dir: dir.path(),
                verify: true,
            },
            Sink {
                keys: &mut k,
                values: Some(&mut v),
                permutation: Some(&mut p),
            },
            &mut |ph, _| {
                if phases.last() != Some(&ph) {
                    phases.push(ph)
                }
            },
        )
        .unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "run files left behind"
        );
        Result {
            keys: bytemuck::pod_collect_to_vec(&k),
            values: bytemuck::pod_collect_to_vec(&v),
            perm: bytemuck::pod_collect_to_vec(&p),
            phases,
        }
    }

    /// Keys canonical and in the reference's stable order; the payload and permutation follow.
    fn check<T: SortKey>(got: &Result<T>, keys: &[T], order: SortOrder, what: &str) {
        let want = reference::argsort(keys, order);
        assert_eq!(got.perm, want, "{what}: permutation, n={}", keys.len());
        let want_keys: Vec<T> = want
            .iter()
            .map(|&i| reference::canonical(&keys[i as usize]))
            .collect();
        assert!(
            bytemuck::cast_slice::<T, u8>(&got.keys) == bytemuck::cast_slice::<T, u8>(&want_keys),
            "{what}: keys"
        );
        let want_values: Vec<u32> = want.iter().map(|&i| i ^ 0x5a5a).collect();
        assert_eq!(got.values, want_values, "{what}: values");
    }

    #[test]
    fn runs_and_merge_levels_give_the_stable_order() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let s = sorter(gpu);
            // u32 + value + position = 12 bytes a key: the smallest budget makes runs of 2730
            // keys and merges 2 at a time; 1 MiB one level of many runs
            let few: Vec<u32> = from_bits::<u32>(&bits(100_000, Shape::FewDistinct, 1));
            for (budget, desc) in [(MIN_MEMORY_BUDGET, false), (1 << 20, true)] {
                let order = SortOrder {
                    descending: desc,
                    segment_size: None,
                };
                let got = run(&s, gpu, &few, order, budget);
                check(
                    &got,
                    &few,
                    order,
                    &format!("u32 few distinct, budget {budget}"),
                );
                let merges = got
                    .phases
                    .iter()
                    .filter(|p| matches!(p, Phase::Merge { .. }))
                    .count();
                assert!(merges >= 1, "{budget}: merged ({:?})", got.phases);
                if budget == MIN_MEMORY_BUDGET {
                    assert!(merges > 2, "several merge levels: {:?}", got.phases);
                }
            }
            // floats with every special, both directions
            let mut f: Vec<f64> = from_bits::<f64>(&bits(20_000, Shape::Random, 2));
            for (i, x) in f64_specials().into_iter().cycle().take(3000).enumerate() {
                f[i * 6 + 1] = x;
            }
            for desc in [false, true] {
                let order = SortOrder {
                    descending: desc,
                    segment_size: None,
                };
                check(
                    &run(&s, gpu, &f, order, MIN_MEMORY_BUDGET),
                    &f,
                    order,
                    "f64 specials",
                );
            }
        }
    }

    #[test]
    fn sizes_around_run_boundaries() {
        let gpu = gpu(false);
        let s = sorter(gpu);
        // budget 64 KiB, 12-byte records: runs of 65536 / 24 = 2730 keys
        for n in [0, 1, 2729, 2730, 2731, 2 * 2730, 3 * 2730 + 1] {
            let keys: Vec<i32> = from_bits::<i32>(&bits(n, Shape::Random, n as u64));
            let order = SortOrder::default();
            check(
                &run(&s, gpu, &keys, order, MIN_MEMORY_BUDGET),
                &keys,
                order,
                "i32 sizes",
            );
        }
        let equal = vec![7u64; 9000];
        check(
            &run(&s, gpu, &equal, SortOrder::default(), MIN_MEMORY_BUDGET),
            &equal,
            SortOrder::default(),
            "all equal",
        );
    }

    #[test]
    fn segments_and_key_bits() {
        for no_sg in MODES {
            let gpu = gpu(no_sg);
            let keys: Vec<u32> = from_bits::<u32>(&bits(12_345, Shape::Random, 9));
            let order = SortOrder {
                descending: false,
                segment_size: Some(1000),
            };
            let got = run(&sorter(gpu), gpu, &keys, order, MIN_MEMORY_BUDGET);
            check(&got, &keys, order, "segments");
            assert!(!got.phases.iter().any(|p| matches!(p, Phase::Merge { .. })));
            // a key-bit range: runs and merge compare the same bits as the radix twin
            let radix = sorter(gpu)
                .with_algorithm(Algorithm::Radix)
                .with_key_bits(4..12);
            let got = run(&radix, gpu, &keys, SortOrder::default(), MIN_MEMORY_BUDGET);
            let (want, _) = gpusort_core::reference::radix::argsort(&keys, false, 4..12);
            assert_eq!(got.perm, want, "key bits 4..12");
        }
    }

    /// A sink that fails part-way: the error comes back and no run file stays behind.
    #[test]
    fn a_failing_write_is_an_error_and_leaves_no_runs() {
        struct Failing(usize);
        impl std::io::Write for Failing {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                if self.0 < b.len() {
                    return Err(std::io::Error::other("disk full"));
                }
                self.0 -= b.len();
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let gpu = gpu(false);
        let dir = tempfile::tempdir().unwrap();
        let keys: Vec<u32> = from_bits::<u32>(&bits(30_000, Shape::Random, 4));
        let job = ExternalSort {
            order: SortOrder::default(),
            memory_budget: MIN_MEMORY_BUDGET,
            run_dir: dir.path(),
            verify: false,
        };
        let mut sink = Failing(40_000);
        let err = external::sort_external::<u32>(
            &external::GpuRuns {
                sorter: &sorter(gpu),
                gpu,
            },
            bytemuck::cast_slice(&keys),
            None,
            &job,
            Sink {
                keys: &mut sink,
                values: None,
                permutation: None,
            },
            &mut |_, _| {},
        )
        .unwrap_err();
        assert!(
            matches!(err, Error::Io(ref m) if m.contains("disk full")),
            "{err}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // a budget below the floor is refused
        let small = ExternalSort {
            memory_budget: MIN_MEMORY_BUDGET - 1,
            ..job
        };
        let err = external::sort_external::<u32>(
            &external::GpuRuns {
                sorter: &sorter(gpu),
                gpu,
            },
            bytemuck::cast_slice(&keys),
            None,
            &small,
            Sink {
                keys: &mut Vec::new(),
                values: None,
                permutation: None,
            },
            &mut |_, _| {},
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    }
}

#[test]
fn argsorts_of_key_words_match_a_stable_lexicographic_sort() {
    // Sorter::argsort_words (DataFusion's multi-column ORDER BY): leading words with few values
    // so that later words decide, and rows equal in every word so that stability shows
    use gpusort_core::KeyWord;
    for no_sg in MODES {
        let gpu = gpu(no_sg);
        let s = sorter(gpu);
        let mut r = rng(77);
        for n in [0usize, 1, 2, 1023, 1024, 1025, 4097, 70_001] {
            let a: Vec<u64> = (0..n)
                .map(|_| (r.random_range(0..5u64) << 40) | r.random_range(0..3u64))
                .collect();
            let b: Vec<u32> = (0..n).map(|_| r.random_range(0..4)).collect();
            let c: Vec<u64> = (0..n).map(|_| r.random()).collect();
            let d: Vec<u64> = (0..n).map(|_| r.random_range(0..2)).collect();
            let sets: [Vec<KeyWord<'_>>; 4] = [
                vec![KeyWord::U64(&a)],
                vec![KeyWord::U64(&a), KeyWord::U32(&b)],
                vec![KeyWord::U32(&b), KeyWord::U64(&d), KeyWord::U64(&c)],
                vec![KeyWord::U64(&d), KeyWord::U32(&b)],
            ];
            for words in &sets {
                let got = s
                    .argsort_words(gpu, words)
                    .unwrap()
                    .expect("fits one GPU sort");
                let row = |i: u32| -> Vec<u64> {
                    words
                        .iter()
                        .map(|w| match w {
                            KeyWord::U32(x) => x[i as usize] as u64,
                            KeyWord::U64(x) => x[i as usize],
                        })
                        .collect()
                };
                let mut want: Vec<u32> = (0..n as u32).collect();
                want.sort_by_key(|&i| row(i)); // stable
                assert!(got == want, "n={n} words={}", words.len());
            }
        }
        // more rows than one sort holds: None (the caller goes word by word); bad input refused
        let small = sorter(gpu).with_piece_limit(64);
        let w: Vec<u32> = (0..1000).collect();
        assert!(small
            .argsort_words(gpu, &[KeyWord::U32(&w)])
            .unwrap()
            .is_none());
        assert!(s.argsort_words(gpu, &[]).is_err());
        assert!(s
            .argsort_words(gpu, &[KeyWord::U32(&w), KeyWord::U32(&w[1..])])
            .is_err());
    }
}
