//! Device groups (issue 41) on lavapipe: two and three devices on one adapter must give one
//! device's bytes for every sort (key types, payloads, permutations, descending, segments, key
//! bits, specials, equal keys), every integer scan, every compaction and partition, and every
//! stencil — at sizes that split unevenly — with subgroups and with them forced off. Float
//! additions are associated differently across parts: those scans are held to the CPU's sum
//! within its rounding.

use std::sync::Mutex;

use gpusort_core::multi::sort::Spread;
use gpusort_core::multi::{self, DeviceGroup, DeviceSpec};
use gpusort_core::reference;
use gpusort_core::scan::streamed::{ScanStream, SplitStream};
use gpusort_core::scan::{Predicate, ScanOp};
use gpusort_core::stencil::{self, Boundary, GridShape, Stencil, StencilJob, StencilKernel};
use gpusort_core::{GpuOptions, HostSort, KeyType, Scanner, SortKey, SortOrder, Sorter};
use gpusort_tests::{bits, gpu, Shape};

/// `devices` devices on the tests' adapter.
fn group(devices: usize, no_subgroups: bool) -> DeviceGroup {
    let one = gpu(no_subgroups);
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let options = GpuOptions {
        backend: var("GPUSORT_BACKEND"),
        no_subgroups,
        ..Default::default()
    };
    let spec = DeviceSpec::List(vec![one.adapter.index.to_string(); devices]);
    DeviceGroup::open(&options, &spec).expect("devices on the tests' adapter")
}

fn keys_of<T: SortKey>(b: &[u64]) -> Vec<T> {
    if T::TYPE.is_wide() {
        b.iter().map(|&x| bytemuck::cast::<u64, T>(x)).collect()
    } else {
        b.iter()
            .map(|&x| bytemuck::cast::<u32, T>(((x >> 32) ^ x) as u32))
            .collect()
    }
}

fn as_bytes<T: SortKey>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// One device's sort and the group's, compared byte for byte.
fn sort_case<T: SortKey>(
    g: &DeviceGroup,
    sorters: &[Sorter],
    keys: &[T],
    order: SortOrder,
    carried: bool,
    what: &str,
) {
    let one = g.first();
    let vals: Vec<u32> = (0..keys.len() as u32)
        .map(|i| i.wrapping_mul(2654435761))
        .collect();
    let (mut a, mut b) = (keys.to_vec(), keys.to_vec());
    let (mut va, mut vb) = (vals.clone(), vals.clone());
    let (pa, _) = sorters[0]
        .sort_host(
            one,
            &mut a,
            HostSort {
                values: carried.then_some(&mut va[..]),
                permutation: carried,
                order,
            },
        )
        .unwrap();
    let (pb, stats) = multi::sort::sort_host_spread(
        g,
        sorters,
        &mut b,
        HostSort {
            values: carried.then_some(&mut vb[..]),
            permutation: carried,
            order,
        },
        Spread::Always,
    )
    .unwrap();
    assert_eq!(as_bytes(&a), as_bytes(&b), "{what}: keys");
    assert_eq!(va, vb, "{what}: values");
    assert_eq!(pa, pb, "{what}: permutation");
    assert_eq!(stats.parts.iter().sum::<usize>(), keys.len(), "{what}");
}

fn sorts_of<T: SortKey>(g: &DeviceGroup, sorters: &[Sorter], specials: &[T]) {
    for n in [0usize, 1, 2, 1000, 4097, 70001] {
        for (s, shape) in [Shape::Random, Shape::AllEqual, Shape::FewDistinct]
            .into_iter()
            .enumerate()
        {
            let mut keys: Vec<T> = keys_of(&bits(n, shape, 7 + n as u64 + s as u64));
            // specials sprinkled through random keys
            if matches!(shape, Shape::Random) && n > 100 {
                for (i, x) in specials.iter().enumerate() {
                    keys[i * 37 % n] = *x;
                    keys[(i * 101 + 13) % n] = *x;
                }
            }
            for (desc, carried) in [(false, true), (false, false), (true, true)] {
                let order = SortOrder {
                    descending: desc,
                    segment_size: None,
                };
                let what = format!(
                    "{} n={n} {shape:?} desc={desc} carried={carried} on {}",
                    T::TYPE,
                    g.len()
                );
                sort_case(g, sorters, &keys, order, carried, &what);
            }
        }
    }
    // segments split whole over the devices, the last one short
    let keys: Vec<T> = keys_of(&bits(5003, Shape::Random, 99));
    for seg in [1u32, 7, 1000, 5003, 9000] {
        let order = SortOrder {
            descending: false,
            segment_size: Some(seg),
        };
        sort_case(
            g,
            sorters,
            &keys,
            order,
            true,
            &format!("{} segments of {seg}", T::TYPE),
        );
    }
}

#[test]
fn group_sorts_give_one_devices_bytes() {
    for (devices, no_subgroups) in [(2, false), (3, true)] {
        let g = group(devices, no_subgroups);
        let sorters: Vec<Sorter> = g.gpus().iter().map(|x| Sorter::new(x).unwrap()).collect();
        sorts_of::<u32>(&g, &sorters, &[0, u32::MAX]);
        sorts_of::<i32>(&g, &sorters, &[i32::MIN, -1, 0, i32::MAX]);
        sorts_of::<f32>(&g, &sorters, &gpusort_tests::f32_specials());
        sorts_of::<u64>(&g, &sorters, &[0, u64::MAX]);
        sorts_of::<i64>(&g, &sorters, &[i64::MIN, 0, i64::MAX]);
        if g.gpus()
            .iter()
            .all(|x| x.features.contains(wgpu::Features::SHADER_F64))
        {
            sorts_of::<f64>(&g, &sorters, &gpusort_tests::f64_specials());
        }
    }
}

#[test]
fn group_sorts_on_key_bits_keep_ties_in_order() {
    let g = group(3, false);
    let keys: Vec<u32> = keys_of(&bits(30001, Shape::Random, 5));
    for range in [0..8u32, 4..20, 16..32] {
        let sorters: Vec<Sorter> = g
            .gpus()
            .iter()
            .map(|x| Sorter::new(x).unwrap().with_key_bits(range.clone()))
            .collect();
        for desc in [false, true] {
            let order = SortOrder {
                descending: desc,
                segment_size: None,
            };
            for carried in [true, false] {
                sort_case(
                    &g,
                    &sorters,
                    &keys,
                    order,
                    carried,
                    &format!("bits {range:?} desc={desc}"),
                );
            }
        }
    }
}

#[test]
fn a_group_of_one_is_that_device() {
    let g = group(1, false);
    let sorters = vec![Sorter::new(g.first()).unwrap()];
    let keys: Vec<f32> = keys_of(&bits(5000, Shape::Random, 3));
    sort_case(
        &g,
        &sorters,
        &keys,
        SortOrder::default(),
        true,
        "one device",
    );
    assert!(multi::sort::sort_host(&g, &[], &mut keys.clone(), HostSort::default()).is_err());
}

/// The group's scan assembled from its sink.
fn group_scan<T: SortKey>(
    g: &DeviceGroup,
    scanners: &[Scanner],
    data: &[T],
    op: ScanOp,
    inclusive: bool,
    chunk: usize,
) -> Vec<T> {
    let out = Mutex::new(vec![T::zeroed(); data.len()]);
    let seen = Mutex::new(0usize);
    let job = ScanStream::new(op, inclusive, chunk);
    multi::scan::scan_streamed(g, scanners, data, &job, &|at, piece| {
        out.lock().unwrap()[at..at + piece.len()].copy_from_slice(piece);
        *seen.lock().unwrap() += piece.len();
        Ok(())
    })
    .unwrap();
    assert_eq!(*seen.lock().unwrap(), data.len(), "every element once");
    out.into_inner().unwrap()
}

fn scans_of<T: SortKey>(g: &DeviceGroup, scanners: &[Scanner], ops: &[ScanOp]) {
    for n in [0usize, 1, 5, 1000, 20011] {
        let data: Vec<T> = keys_of(&bits(n, Shape::Random, 11 + n as u64));
        for &op in ops {
            for inclusive in [true, false] {
                let got = group_scan(g, scanners, &data, op, inclusive, 1024);
                let want = if T::TYPE.is_wide() {
                    reference::scan::scan64(&data, op, inclusive)
                } else {
                    reference::scan::scan(&data, op, inclusive)
                };
                assert_eq!(
                    as_bytes(&got),
                    as_bytes(&want),
                    "{} {op:?} inclusive={inclusive} n={n} on {}",
                    T::TYPE,
                    g.len()
                );
            }
        }
    }
}

#[test]
fn group_scans_match_the_cpu() {
    use ScanOp::*;
    for (devices, no_subgroups) in [(2, true), (3, false)] {
        let g = group(devices, no_subgroups);
        let scanners: Vec<Scanner> = g.gpus().iter().map(|x| Scanner::new(x).unwrap()).collect();
        scans_of::<u32>(&g, &scanners, &[Add, Max, Min, Xor, And, Or]);
        scans_of::<i32>(&g, &scanners, &[Add, Max, Min]);
        scans_of::<u64>(&g, &scanners, &[Add, Max, Xor]);
        scans_of::<i64>(&g, &scanners, &[Add, Min]);
        // f32 additions: within the rounding of the running sum of |x|
        let data: Vec<f32> = (0..20011)
            .map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0)
            .collect();
        for inclusive in [true, false] {
            let got = group_scan(&g, &scanners, &data, Add, inclusive, 1024);
            let want = reference::scan::scan(&data, Add, inclusive);
            let mut abs = 0.0f64;
            for i in 0..data.len() {
                abs += data[i].abs() as f64;
                let d = (got[i] as f64 - want[i] as f64).abs();
                assert!(
                    d <= 1e-5 * abs + 1e-6,
                    "f32 add at {i}: {} vs {}",
                    got[i],
                    want[i]
                );
            }
        }
    }
}

fn splits_of<T: SortKey>(g: &DeviceGroup, scanners: &[Scanner], pivot: T) {
    for n in [0usize, 1, 7, 1000, 20011] {
        let data: Vec<T> = keys_of(&bits(n, Shape::Random, 21 + n as u64));
        let payload: Vec<u32> = (0..n as u32).map(|i| i ^ 0x5555).collect();
        for predicate in [
            Predicate::Below(pivot),
            Predicate::AtLeast(pivot),
            Predicate::NonZero,
        ] {
            for rest in [true, false] {
                let plan = multi::scan::SplitPlan::new(g, &data, &predicate, 1024);
                let total = plan.total();
                let out = Mutex::new(vec![T::zeroed(); n]);
                let pay = Mutex::new(vec![0u32; n]);
                let job = SplitStream {
                    payload: Some(&payload),
                    predicate,
                    chunk: 1024,
                    rest,
                };
                let kept = multi::scan::split_streamed(g, scanners, &data, &job, &plan, &|c| {
                    let (mut o, mut p) = (out.lock().unwrap(), pay.lock().unwrap());
                    let pl = c.payload.unwrap();
                    o[c.kept_at..c.kept_at + c.kept].copy_from_slice(&c.elements[..c.kept]);
                    p[c.kept_at..c.kept_at + c.kept].copy_from_slice(&pl[..c.kept]);
                    if rest {
                        let others = c.range.len() - c.kept;
                        let at = total + c.rest_at;
                        o[at..at + others].copy_from_slice(&c.elements[c.kept..]);
                        p[at..at + others].copy_from_slice(&pl[c.kept..]);
                    }
                    Ok(())
                })
                .unwrap();
                let (want, wpay, split) =
                    reference::scan::partition(&data, Some(&payload), &predicate);
                let len = if rest { n } else { split };
                assert_eq!(kept, split, "{} {predicate:?} n={n}", T::TYPE);
                let (o, p) = (out.into_inner().unwrap(), pay.into_inner().unwrap());
                assert_eq!(
                    as_bytes(&o[..len]),
                    as_bytes(&want[..len]),
                    "{} {predicate:?} n={n} rest={rest}",
                    T::TYPE
                );
                assert_eq!(
                    &p[..len],
                    &wpay.unwrap()[..len],
                    "{} payload {predicate:?} n={n}",
                    T::TYPE
                );
            }
        }
    }
}

#[test]
fn group_compactions_and_partitions_match_the_cpu() {
    for (devices, no_subgroups) in [(3, true), (2, false)] {
        let g = group(devices, no_subgroups);
        let scanners: Vec<Scanner> = g.gpus().iter().map(|x| Scanner::new(x).unwrap()).collect();
        splits_of::<u32>(&g, &scanners, 1 << 31);
        splits_of::<f32>(&g, &scanners, 0.0);
        splits_of::<i64>(&g, &scanners, 0);
    }
}

#[test]
fn group_stencils_are_bit_identical_to_one_device() {
    let mut exchanges = 0;
    let mut local_parts = 0;
    for (devices, no_subgroups) in [(2, false), (3, true)] {
        let g = group(devices, no_subgroups);
        let one = g.first();
        for boundary in [
            Boundary::Reflect,
            Boundary::Wrap,
            Boundary::Constant,
            Boundary::Nearest,
        ] {
            for (shape, st, steps) in [
                // wide enough for passes in registers (the planned kernel with subgroups)
                (&[300usize, 160][..], Stencil::star(2, 1).unwrap(), 13),
                (&[97, 20], Stencil::boxed(2, 2).unwrap(), 5),
                (&[2, 36], Stencil::star(2, 1).unwrap(), 3),
                (&[40, 9, 12], Stencil::star(3, 1).unwrap(), 6),
                (&[130, 6, 8], Stencil::star(3, 2).unwrap(), 4),
            ] {
                let job = StencilJob {
                    shape: GridShape::new(shape).unwrap(),
                    stencil: st,
                    boundary,
                    cval: 0.25,
                    steps,
                    dtype: KeyType::F32,
                };
                let input: Vec<f32> = (0..job.shape.cells())
                    .map(|i| ((i * 7919) % 1013) as f32 / 97.0 - 5.0)
                    .collect();
                let k1 = StencilKernel::new(one, &job).unwrap();
                let (want, _) = stencil::apply(one, &k1, &plan(&job), &input).unwrap();
                // the kernels a job gets (`planned`): K steps a pass in registers for the 2-D
                // r1 star where the devices have subgroups, against single steps on one device
                let kernels: Vec<StencilKernel> = g
                    .gpus()
                    .iter()
                    .map(|x| StencilKernel::planned(x, &job).unwrap())
                    .collect();
                if !no_subgroups && shape == [300, 160] {
                    assert!(kernels[0].blocking().is_some_and(|b| b.lanes));
                    assert!(kernels[0].interior_workgroups() > 0);
                }
                assert!(multi::stencil::fits(&g, &job));
                let (got, stats) = multi::stencil::apply(&g, &kernels, &input).unwrap();
                exchanges += stats.rounds - 1;
                // one device holding the grid in slabs (wrap: a single slab is its own halo)
                for per_device in [1, 2] {
                    let lay = multi::stencil::SlabLayout::with_slabs(&job, 1, per_device);
                    let mut alone = vec![0f32; input.len()];
                    multi::stencil::run_laid_out(
                        &g.prefix(1),
                        &kernels[..1],
                        &lay,
                        bytemuck::cast_slice(&input),
                        bytemuck::cast_slice_mut(&mut alone),
                    )
                    .unwrap();
                    assert_eq!(
                        as_bytes(&alone),
                        as_bytes(&want),
                        "{shape:?} {boundary} one device, {per_device} slabs"
                    );
                }
                // parts held as several slabs a device (as where a part exceeds one binding),
                // and halos exchanged through the host after every step
                for (what, lay) in [
                    (
                        "in slabs",
                        multi::stencil::SlabLayout::with_slabs(&job, devices, 3),
                    ),
                    (
                        "exchanging every step",
                        multi::stencil::SlabLayout::with_rounds(&job, devices, 1, 1, 1),
                    ),
                    // slabs of one device exchange every step, devices every three
                    (
                        "exchanging locally more often",
                        multi::stencil::SlabLayout::with_rounds(&job, devices, 2, 3, 1),
                    ),
                ] {
                    let mut laid = vec![0f32; input.len()];
                    let s = multi::stencil::run_laid_out(
                        &g,
                        &kernels,
                        &lay,
                        bytemuck::cast_slice(&input),
                        bytemuck::cast_slice_mut(&mut laid),
                    )
                    .unwrap();
                    exchanges += s.rounds - 1;
                    local_parts += u64::from(lay.local_steps < lay.round_steps);
                    assert_eq!(
                        as_bytes(&laid),
                        as_bytes(&want),
                        "{shape:?} {boundary} {what}"
                    );
                }
                assert_eq!(
                    as_bytes(&got),
                    as_bytes(&want),
                    "{shape:?} {boundary} steps {steps} on {devices} devices ({} rounds of {})",
                    stats.rounds,
                    stats.round_steps
                );
            }
        }
    }
    assert!(exchanges > 0, "some runs exchanged halos");
    assert!(
        local_parts > 0,
        "some runs exchanged between slabs of a device within rounds"
    );
}

fn plan(job: &StencilJob) -> gpusort_sched::stencil::StencilPlan {
    use gpusort_sched::stencil::{plan, Budget, Speeds, Streaming};
    let budget = Budget {
        memory: u64::MAX / 4,
        max_binding: u64::MAX / 4,
    };
    let speeds = Speeds {
        upload_bytes_per_s: 1e9,
        download_bytes_per_s: 1e9,
        cells_per_s: 1e9,
    };
    plan(&job.problem(), budget, speeds, None, Streaming::Reuse).unwrap()
}

#[test]
fn shares_larger_than_one_gpu_sort_go_in_several_buckets_a_device() {
    // a piece limit stands in for a binding: each device sorts several key ranges in turn
    let g = group(2, false);
    let sorters: Vec<Sorter> = g
        .gpus()
        .iter()
        .map(|x| Sorter::new(x).unwrap().with_piece_limit(3000))
        .collect();
    let plain = [Sorter::new(g.first()).unwrap()];
    for (s, shape) in [Shape::Random, Shape::FewDistinct, Shape::AllEqual]
        .into_iter()
        .enumerate()
    {
        let keys: Vec<f32> = keys_of(&bits(20011, shape, 61 + s as u64));
        let mut want = keys.clone();
        let (pw, _) = plain[0]
            .sort_host(
                g.first(),
                &mut want,
                HostSort {
                    permutation: true,
                    ..HostSort::default()
                },
            )
            .unwrap();
        let mut got = keys.clone();
        let (pg, stats) = multi::sort::sort_host(
            &g,
            &sorters,
            &mut got,
            HostSort {
                permutation: true,
                ..HostSort::default()
            },
        )
        .unwrap();
        assert_eq!(as_bytes(&got), as_bytes(&want), "{shape:?}");
        assert_eq!(pg, pw, "{shape:?}");
        assert_eq!(stats.parts.len(), 2);
    }
}

#[test]
fn inputs_one_device_sorts_whole_stay_on_it_unless_asked() {
    let g = group(2, false);
    let sorters: Vec<Sorter> = g.gpus().iter().map(|x| Sorter::new(x).unwrap()).collect();
    let keys: Vec<u32> = keys_of(&bits(50_000, Shape::Random, 8));
    let (mut a, mut b) = (keys.clone(), keys.clone());
    let (_, auto) = multi::sort::sort_host(&g, &sorters, &mut a, HostSort::default()).unwrap();
    assert_eq!(
        auto.parts,
        vec![keys.len()],
        "one GPU sort: the first device alone"
    );
    let (_, spread) =
        multi::sort::sort_host_spread(&g, &sorters, &mut b, HostSort::default(), Spread::Always)
            .unwrap();
    assert_eq!(spread.parts.len(), 2);
    assert!(
        spread.parts.iter().all(|&p| p > 20_000),
        "{:?}",
        spread.parts
    );
    assert_eq!(a, b);
    // a piece limit (as a binding would) makes one device's sort pieces: then it spreads
    let limited: Vec<Sorter> = g
        .gpus()
        .iter()
        .map(|x| Sorter::new(x).unwrap().with_piece_limit(10_000))
        .collect();
    let mut c = keys.clone();
    let (_, st) = multi::sort::sort_host(&g, &limited, &mut c, HostSort::default()).unwrap();
    assert_eq!(st.parts.len(), 2);
    assert_eq!(a, c);
}
