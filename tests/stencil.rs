//! The stencil kernel and streamer against the CPU twin, on lavapipe: every boundary, star and
//! box, radius 1..3, 2-D and 3-D, steps 1..5; and the out-of-core path under small GPU memory
//! budgets, which must match the in-core run bit for bit.
//!
//! Tolerance against the CPU: the GPU may fuse a multiply and an add (WGSL allows it), so f32
//! results may differ from the CPU's separate operations by a few ulps per step; the weights
//! sum to 1, so values stay of the input's magnitude and 1e-5 relative (f32) / 1e-12 (f64)
//! bounds the difference over 5 steps with a wide margin. GPU-to-GPU comparisons are exact.

use gpusort_core::reference;
use gpusort_core::stencil::{
    self, Boundary, GridShape, Stencil, StencilJob, StencilKernel, StencilValue,
};
use gpusort_core::KeyType;
use gpusort_sched::stencil::{plan, Budget, Speeds, StencilPlan, Streaming};
use gpusort_tests::{gpu, rng};
use rand::Rng;

const SPEEDS: Speeds = Speeds {
    upload_bytes_per_s: 1e9,
    download_bytes_per_s: 1e9,
    cells_per_s: 1e9,
};

const BOUNDARIES: [Boundary; 5] = Boundary::ALL;

fn job(
    shape: &[usize],
    stencil: Stencil,
    boundary: Boundary,
    steps: u32,
    dtype: KeyType,
) -> StencilJob {
    StencilJob {
        shape: GridShape::new(shape).unwrap(),
        stencil,
        boundary,
        cval: 0.25,
        steps,
        dtype,
    }
}

fn grid<T: StencilValue>(cells: usize, seed: u64) -> Vec<T> {
    let mut r = rng(seed);
    (0..cells)
        .map(|_| T::from_f64(r.random_range(-4.0..4.0)))
        .collect()
}

fn in_core(job: &StencilJob) -> StencilPlan {
    let budget = Budget {
        memory: u64::MAX / 4,
        max_binding: u64::MAX / 4,
    };
    plan(&job.problem(), budget, SPEEDS, None, Streaming::Reuse).unwrap()
}

/// `kernel`'s job run out of core on a budget of `rows` rows, `time_block` steps a residency,
/// where such a plan exists, against `want` bit for bit; whether it ran.
fn out_of_core_identical(
    kernel: &StencilKernel,
    input: &[f32],
    want: &[f32],
    rows: u64,
    time_block: u64,
    what: &str,
) -> bool {
    let j = kernel.job();
    let budget = Budget {
        memory: rows * j.row_bytes(),
        max_binding: 1 << 30,
    };
    let Ok(p) = plan(
        &j.problem(),
        budget,
        SPEEDS,
        Some(time_block),
        Streaming::Reuse,
    ) else {
        return false;
    };
    let (got, _) = stencil::apply(gpu(false), kernel, &p, input).unwrap();
    assert!(identical(&got, want), "{what}: out of core differs ({p:?})");
    true
}

/// Half the boundaries for case `n`, the other half for case `n + 1`: each pair of neighbouring
/// cases meets every boundary, at half the pipelines (each compiles in seconds on lavapipe).
fn every_other_boundary(n: usize) -> impl Iterator<Item = Boundary> {
    BOUNDARIES
        .into_iter()
        .enumerate()
        .filter(move |(m, _)| (m + n).is_multiple_of(2))
        .map(|(_, b)| b)
}

/// Whether two grids hold the same bits, cell for cell.
fn identical<T: bytemuck::Pod>(a: &[T], b: &[T]) -> bool {
    bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b)
}

fn close<T: StencilValue + Into<f64>>(gpu: &[T], cpu: &[T], tol: f64, what: &str) {
    assert_eq!(gpu.len(), cpu.len());
    for (i, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        let (g, c): (f64, f64) = (g.into(), c.into());
        assert!(
            (g - c).abs() <= tol * c.abs().max(1.0),
            "{what}: cell {i}: gpu {g} cpu {c}"
        );
    }
}

fn check_against_cpu(job: &StencilJob, seed: u64) {
    let gpu = gpu(false);
    let kernel = StencilKernel::new(gpu, job).unwrap();
    let input = grid::<f32>(job.shape.cells(), seed);
    let (out, stats) = stencil::apply(gpu, &kernel, &in_core(job), &input).unwrap();
    let want = reference::stencil::run(
        &input,
        job.shape,
        &job.stencil,
        job.boundary,
        job.cval,
        job.steps,
    );
    let what = format!(
        "{} {:?} r{} {} steps",
        job.shape,
        job.boundary,
        job.stencil.radius(),
        job.steps
    );
    close(&out, &want, 1e-5, &what);
    assert_eq!(
        stats.cell_updates,
        job.shape.cells() as u64 * job.steps as u64
    );
}

#[test]
fn every_boundary_shape_and_radius_matches_the_cpu() {
    let mut case = 0u64;
    for boundary in BOUNDARIES {
        for radius in 1..=3 {
            for dims in [2, 3] {
                for boxed in [false, true] {
                    let stencil = if boxed {
                        Stencil::boxed(dims, radius).unwrap()
                    } else {
                        Stencil::star(dims, radius).unwrap()
                    };
                    // odd sizes, not multiples of anything (one cell per invocation), and rows of
                    // a multiple of 4 (four cells per invocation); steps cycle through 1..=5
                    let shapes: [&[usize]; 2] = if dims == 2 {
                        [&[23, 37], &[21, 36]]
                    } else {
                        [&[9, 7, 13], &[7, 9, 12]]
                    };
                    for shape in shapes {
                        let steps = 1 + (case % 5) as u32;
                        let j = job(shape, stencil.clone(), boundary, steps, KeyType::F32);
                        check_against_cpu(&j, case);
                        case += 1;
                    }
                }
            }
        }
    }
}

#[test]
fn every_step_count_matches_the_cpu() {
    for boundary in BOUNDARIES {
        for steps in 1..=5 {
            let s = Stencil::star(2, 2).unwrap();
            check_against_cpu(
                &job(&[17, 19], s, boundary, steps, KeyType::F32),
                steps as u64,
            );
        }
    }
}

#[test]
fn grids_thinner_than_the_stencil() {
    // axes shorter than 2R+1 (and as short as R): boundaries reflect more than once
    for boundary in BOUNDARIES {
        for shape in [&[3usize, 40][..], &[40, 3], &[3, 3], &[4, 3, 5], &[3, 1, 9]] {
            let dims = shape.len();
            let radius = if shape.contains(&1) { 1 } else { 3 };
            let s = Stencil::boxed(dims, radius).unwrap();
            check_against_cpu(&job(shape, s, boundary, 3, KeyType::F32), 7);
        }
    }
}

#[test]
fn dense_weights_follow_correlate_order() {
    // asymmetric weights catch any flipping; zeros are skipped as scipy skips them
    let w: Vec<f64> = (0..25)
        .map(|i| {
            if i % 3 == 0 {
                0.0
            } else {
                i as f64 / 100.0 - 0.1
            }
        })
        .collect();
    for boundary in BOUNDARIES {
        let s = Stencil::from_weights(2, 2, &w).unwrap();
        check_against_cpu(&job(&[13, 11], s, boundary, 2, KeyType::F32), 3);
    }
    let w3: Vec<f64> = (0..27).map(|i| (i as f64 - 13.0) / 50.0).collect();
    let s = Stencil::from_weights(3, 1, &w3).unwrap();
    check_against_cpu(&job(&[5, 6, 7], s, Boundary::Reflect, 2, KeyType::F32), 4);
}

#[test]
fn constant_boundary_at_every_step_and_specials() {
    // one cell of inf and one of NaN spread as the arithmetic says, on GPU and CPU alike
    let gpu = gpu(false);
    let j = job(
        &[16, 16],
        Stencil::star(2, 1).unwrap(),
        Boundary::Constant,
        3,
        KeyType::F32,
    );
    let kernel = StencilKernel::new(gpu, &j).unwrap();
    let mut input = vec![1.0f32; 256];
    input[0] = f32::INFINITY;
    input[255] = f32::NAN;
    input[100] = -0.0;
    let (out, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
    let want = reference::stencil::run(&input, j.shape, &j.stencil, j.boundary, j.cval, j.steps);
    for (i, (g, c)) in out.iter().zip(&want).enumerate() {
        assert!(
            (g.is_nan() && c.is_nan()) || (g == c) || (g - c).abs() <= 1e-5,
            "cell {i}: gpu {g} cpu {c}"
        );
    }
    assert!(out[0].is_infinite() && out[255].is_nan());
}

/// Rows of one cell (every kernel family's module is built for the grid, so none may fold a
/// division by a zero extent) and other degenerate grids match the CPU twin, every boundary.
#[test]
fn grids_of_one_cell_rows_match_the_cpu() {
    let gpu = gpu(false);
    for (n, shape) in [
        &[1usize, 1, 1][..],
        &[1, 1],
        &[5, 1],
        &[3, 4, 1],
        &[1, 1, 6],
        &[2, 3],
    ]
    .into_iter()
    .enumerate()
    {
        for boundary in BOUNDARIES {
            let j = job(
                shape,
                Stencil::star(shape.len(), 1).unwrap(),
                boundary,
                2,
                KeyType::F32,
            );
            let kernel = StencilKernel::new(gpu, &j).unwrap();
            let input = grid::<f32>(j.shape.cells(), 70 + n as u64);
            let (got, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
            let want =
                reference::stencil::run(&input, j.shape, &j.stencil, j.boundary, j.cval, j.steps);
            close(&got, &want, 1e-5, &format!("{} {boundary:?}", j.shape));
        }
    }
}

/// Taps that read the same value and sit next to each other in tap order (a zero weight between
/// them; at a mirrored x edge the cells left and right of x = 0 are one cell) are still two
/// products added one at a time in every kernel: a driver that saw `0 + w0·v + w1·v` could
/// refactor it into `(w0 + w1)·v` (Mesa's did, in `step4` only), and the kernels would differ in
/// the last bits. Every kernel, with and without subgroups, against one cell an invocation.
#[test]
fn taps_reading_one_value_stay_separate_products_in_every_kernel() {
    let on = gpu(false);
    let off = gpusort_tests::gpu(true);
    let mut w: Vec<f64> = (0..9).map(|i| (i as f64 - 4.5) / 7.0).collect();
    w[1] = 0.0; // (dz, dx) = (-1, -1) and (-1, 1) adjacent in tap order
    let stencil = Stencil::from_weights(2, 1, &w).unwrap();
    for shape in [&[129usize, 4][..], &[60, 36]] {
        for boundary in [Boundary::Mirror, Boundary::Reflect, Boundary::Nearest] {
            let j = job(shape, stencil.clone(), boundary, 8, KeyType::F32);
            let input = grid::<f32>(j.shape.cells(), 5);
            let one = StencilKernel::one_cell(on, &j).unwrap();
            let (want, _) = stencil::apply(on, &one, &in_core(&j), &input).unwrap();
            let what = format!("{} {boundary:?}", j.shape);
            for (name, gpu, choice) in [
                ("four cells", on, stencil::KernelChoice::default()),
                (
                    "in registers",
                    on,
                    stencil::KernelChoice::for_device(on, &j),
                ),
                (
                    "no subgroups",
                    off,
                    stencil::KernelChoice::for_device(off, &j),
                ),
            ] {
                let kernel = StencilKernel::with_choice(gpu, &j, choice).unwrap();
                let (got, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
                assert!(identical(&got, &want), "{what}: {name} ({choice:?})");
            }
        }
    }
}

/// Two cells an invocation of the one-cell step (`KernelChoice::pairs`) against one, bit for
/// bit: f32 rows of an even number of cells that is not a multiple of 4 (the one-cell kernel's
/// grids), 2-D and 3-D, stars, boxes and asymmetric weights, every boundary, in core and out of
/// core; f64 where the device has it. Odd rows keep one cell an invocation.
#[test]
fn pairs_of_cells_are_bit_identical_to_one_cell() {
    let gpu = gpu(false);
    let dense: Vec<f64> = (0..25).map(|i| (i as f64 - 9.0) / 30.0).collect();
    let pairs = stencil::KernelChoice {
        pairs: true,
        ..Default::default()
    };
    let mut cases = 0;
    for (n, (shape, stencil, dtype)) in [
        (
            &[33usize, 30][..],
            Stencil::star(2, 2).unwrap(),
            KeyType::F32,
        ),
        (
            &[20, 26],
            Stencil::from_weights(2, 2, &dense).unwrap(),
            KeyType::F32,
        ),
        (&[9, 11, 14], Stencil::boxed(3, 1).unwrap(), KeyType::F32),
        (&[9, 11, 14], Stencil::star(3, 1).unwrap(), KeyType::F64),
        (&[40, 72], Stencil::star(2, 2).unwrap(), KeyType::F64),
        (&[12, 31], Stencil::star(2, 1).unwrap(), KeyType::F32),
    ]
    .into_iter()
    .enumerate()
    {
        if dtype == KeyType::F64 && !gpu.features.contains(wgpu::Features::SHADER_F64) {
            continue;
        }
        for boundary in every_other_boundary(n) {
            let j = job(shape, stencil.clone(), boundary, 3, dtype);
            let one = StencilKernel::one_cell(gpu, &j).unwrap();
            let two = StencilKernel::with_choice(gpu, &j, pairs).unwrap();
            assert!(!two.four_cells());
            assert_eq!(
                two.choice().pairs,
                shape[shape.len() - 1] % 2 == 0,
                "{}",
                j.shape
            );
            let what = format!("{} {boundary:?} {dtype}", j.shape);
            if dtype == KeyType::F64 {
                let input = grid::<f64>(j.shape.cells(), 40 + n as u64);
                let (want, _) = stencil::apply(gpu, &one, &in_core(&j), &input).unwrap();
                let (got, _) = stencil::apply(gpu, &two, &in_core(&j), &input).unwrap();
                assert!(identical(&got, &want), "{what}: pairs differ");
            } else {
                let input = grid::<f32>(j.shape.cells(), 40 + n as u64);
                let (want, _) = stencil::apply(gpu, &one, &in_core(&j), &input).unwrap();
                let (got, _) = stencil::apply(gpu, &two, &in_core(&j), &input).unwrap();
                assert!(identical(&got, &want), "{what}: pairs differ");
                out_of_core_identical(&two, &input, &want, 12, 2, &what);
            }
            cases += 1;
        }
    }
    assert!(cases >= 12, "only {cases} cases");
}

#[test]
fn f64_grids_where_the_device_has_them() {
    let gpu = gpu(false);
    let j = job(
        &[11, 9, 10],
        Stencil::star(3, 2).unwrap(),
        Boundary::Mirror,
        3,
        KeyType::F64,
    );
    if !gpu.features.contains(wgpu::Features::SHADER_F64) {
        // the refusal is the behaviour to test on such a device
        let e = StencilKernel::new(gpu, &j).err().expect("f64 refused");
        assert!(e.to_string().contains("SHADER_F64"), "{e}");
        return;
    }
    let kernel = StencilKernel::new(gpu, &j).unwrap();
    let input = grid::<f64>(j.shape.cells(), 5);
    let (out, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
    let want = reference::stencil::run(&input, j.shape, &j.stencil, j.boundary, j.cval, j.steps);
    close(&out, &want, 1e-12, "f64");
    // streamed in sub-blocks: the same bits
    let budget = Budget {
        memory: 40 * j.row_bytes(),
        max_binding: 1 << 30,
    };
    let p = plan(&j.problem(), budget, SPEEDS, Some(2), Streaming::Reuse).unwrap();
    assert!(!p.in_core && p.blocks > 1, "{p:?}");
    let (streamed, _) = stencil::apply(gpu, &kernel, &p, &input).unwrap();
    assert!(identical(&streamed, &out));
    // f64 grids run one cell per invocation, and do not stream, whatever their rows
    let j2 = job(
        &[30, 72],
        Stencil::star(2, 2).unwrap(),
        Boundary::Reflect,
        6,
        KeyType::F64,
    );
    let limit = gpu.limits.max_compute_workgroup_storage_size;
    let input2 = grid::<f64>(j2.shape.cells(), 6);
    let plain = StencilKernel::new(gpu, &j2).unwrap();
    assert!(!plain.four_cells());
    assert!(stencil::Blocking::candidates(&j2, limit).is_empty());
    let (a, _) = stencil::apply(gpu, &plain, &in_core(&j2), &input2).unwrap();
    let cpu = reference::stencil::run(
        &input2,
        j2.shape,
        &j2.stencil,
        j2.boundary,
        j2.cval,
        j2.steps,
    );
    close(&a, &cpu, 1e-12, "f64 rows of 72 cells");
}

/// The out-of-core streamer under budgets that force 3..many sub-blocks and several `T`,
/// against the in-core run, bit for bit.
fn out_of_core_matches(j: &StencilJob, seed: u64) {
    let gpu = gpu(false);
    let kernel = StencilKernel::new(gpu, j).unwrap();
    let input = grid::<f32>(j.shape.cells(), seed);
    let (reference, _) = stencil::apply(gpu, &kernel, &in_core(j), &input).unwrap();
    let row = j.row_bytes();
    let mut seen = Vec::new();
    for (rows_budget, time_block) in [
        (12, Some(1)),
        (12, None),
        (20, Some(2)),
        (30, Some(3)),
        (64, None),
    ] {
        for streaming in [Streaming::Reuse, Streaming::Naive] {
            let budget = Budget {
                memory: rows_budget * row,
                max_binding: 1 << 30,
            };
            let p = match plan(&j.problem(), budget, SPEEDS, time_block, streaming) {
                Ok(p) => p,
                Err(_) => continue, // this T does not fit this budget
            };
            assert!(!p.in_core && p.gpu_bytes <= budget.memory, "{p:?}");
            let (out, stats) = stencil::apply(gpu, &kernel, &p, &input).unwrap();
            assert_eq!(stats.blocks_run, p.blocks * p.sweeps);
            let same = identical(&out, &reference);
            assert!(
                same,
                "{} {:?}: plan {p:?} differs from in core",
                j.shape, j.boundary
            );
            seen.push((p.blocks, p.time_block, streaming));
        }
    }
    // the budgets really exercised several sub-block counts and time blocks
    assert!(
        seen.iter().any(|s| s.1 > 1) && seen.iter().any(|s| s.1 == 1),
        "{seen:?}"
    );
    assert!(seen.iter().any(|s| s.2 == Streaming::Naive));
}

#[test]
fn out_of_core_is_bit_identical_to_in_core_2d() {
    for boundary in BOUNDARIES {
        let j = job(
            &[61, 33],
            Stencil::star(2, 2).unwrap(),
            boundary,
            5,
            KeyType::F32,
        );
        out_of_core_matches(&j, 11);
    }
}

#[test]
fn out_of_core_is_bit_identical_to_in_core_3d() {
    for boundary in BOUNDARIES {
        let j = job(
            &[40, 6, 7],
            Stencil::boxed(3, 1).unwrap(),
            boundary,
            4,
            KeyType::F32,
        );
        out_of_core_matches(&j, 12);
    }
}

#[test]
fn bad_jobs_are_refused() {
    let gpu = gpu(false);
    let s = Stencil::star(2, 3).unwrap();
    // radius larger than an axis
    let j = job(&[2, 40], s.clone(), Boundary::Reflect, 1, KeyType::F32);
    assert!(StencilKernel::new(gpu, &j).is_err());
    let j = job(&[20, 40], s.clone(), Boundary::Reflect, 0, KeyType::F32);
    assert!(StencilKernel::new(gpu, &j).is_err());
    let j = job(&[20, 4, 40], s, Boundary::Reflect, 1, KeyType::F32);
    assert!(
        StencilKernel::new(gpu, &j).is_err(),
        "2-D stencil on a 3-D grid"
    );
    assert!(Stencil::star(2, 0).is_err() && Stencil::boxed(3, 9).is_err());
    assert!(Stencil::from_weights(2, 1, &[1.0; 8]).is_err());
    assert!(Stencil::from_weights(2, 1, &[f64::NAN; 9]).is_err());
    assert!("sideways".parse::<Boundary>().is_err());
    // every boundary's name reads back as that boundary
    for b in Boundary::ALL {
        assert_eq!(b.to_string().parse::<Boundary>().unwrap(), b);
    }
    assert!(GridShape::new(&[4]).is_err() && GridShape::new(&[4, 0]).is_err());
}

/// The streamed pass (K steps per pass, a ring of planes per level in workgroup memory) against
/// one step per pass, bit for bit: every boundary, 2-D and 3-D, star and box of radius 1..4,
/// dense weights, grids thinner than the halo, tiles that do not divide the grid, several chunks
/// of rows, in core and out of core (time blocks that mix streamed passes and single steps).
#[test]
fn streamed_passes_are_bit_identical_to_single_steps() {
    let gpu = gpu(false);
    let limit = gpu.limits.max_compute_workgroup_storage_size;
    let w: Vec<f64> = (0..9).map(|i| (i as f64 - 3.0) / 10.0).collect();
    let (mut cases, mut streamed, mut interior) = (0, 0, 0);
    let narrow = |k: u32, rows: u32, vec4s: u32, planes: u32| stencil::Blocking {
        steps: k,
        tile_rows: rows,
        tile_vec4s: vec4s,
        planes,
        workgroup: 32,
        lanes: false,
    };
    // each shape meets every other boundary (every pair is the single-step test's): the pipelines
    // each case compiles made this one test a quarter of CI's GPU tests on lavapipe
    for (n, boundary) in BOUNDARIES.into_iter().enumerate() {
        for (s, (shape, stencil, steps, forced)) in [
            (
                &[70usize, 132][..],
                Stencil::star(2, 1).unwrap(),
                9,
                Some(narrow(2, 1, 32, 3)),
            ),
            (&[45, 68], Stencil::star(2, 2).unwrap(), 6, None),
            (&[5, 8], Stencil::boxed(2, 2).unwrap(), 8, None),
            (
                &[33, 160],
                Stencil::star(2, 4).unwrap(),
                5,
                Some(narrow(3, 1, 32, 1)),
            ),
            (&[40, 12], Stencil::from_weights(2, 1, &w).unwrap(), 7, None),
            (
                &[19, 13, 20],
                Stencil::star(3, 1).unwrap(),
                5,
                Some(narrow(2, 8, 8, 2)),
            ),
            (
                &[10, 9, 48],
                Stencil::star(3, 1).unwrap(),
                3,
                Some(narrow(1, 4, 8, 1)),
            ),
            // big enough for workgroups wholly inside the grid (steps_interior)
            (
                &[300, 400],
                Stencil::star(2, 1).unwrap(),
                4,
                Some(narrow(2, 1, 32, 3)),
            ),
            (
                &[80, 40, 96],
                Stencil::star(3, 1).unwrap(),
                2,
                Some(narrow(1, 8, 8, 1)),
            ),
            (&[12, 9, 16], Stencil::boxed(3, 1).unwrap(), 4, None),
            (&[9, 6, 8], Stencil::star(3, 2).unwrap(), 4, None),
        ]
        .into_iter()
        .enumerate()
        {
            if (s + n) % 2 == 1 {
                continue;
            }
            let j = job(shape, stencil, boundary, steps, KeyType::F32);
            let input = grid::<f32>(j.shape.cells(), 40 + steps as u64 + n as u64);
            let plain = StencilKernel::new(gpu, &j).unwrap();
            assert!(
                plain.four_cells(),
                "{} has rows of a multiple of 4",
                j.shape
            );
            let (want, _) = stencil::apply(gpu, &plain, &in_core(&j), &input).unwrap();
            let cpu = reference::stencil::run(&input, j.shape, &j.stencil, boundary, j.cval, steps);
            close(
                &want,
                &cpu,
                1e-5,
                &format!("{} {boundary:?} four cells", j.shape),
            );
            // several rows of four cells per invocation, tails that do not fill a block; 3-D
            // workgroups along x, or over patches of the plane's rows (8 by default) cut by the
            // grid's y and x
            for (rows, plane_rows) in [(3, 1), (8, 32)] {
                let choice = stencil::KernelChoice {
                    rows,
                    plane_rows,
                    ..Default::default()
                };
                let kernel = StencilKernel::with_choice(gpu, &j, choice).unwrap();
                let (got, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
                assert!(
                    identical(&got, &want),
                    "{} {boundary:?} {rows} rows per invocation, {plane_rows}-row patches differ \
                     from one",
                    j.shape
                );
                let budget = Budget {
                    memory: 40 * j.row_bytes(),
                    max_binding: 1 << 30,
                };
                let out_of_core = plan(&j.problem(), budget, SPEEDS, Some(3), Streaming::Reuse);
                if let (3, Ok(p)) = (rows, out_of_core) {
                    let (got, _) = stencil::apply(gpu, &kernel, &p, &input).unwrap();
                    assert!(
                        identical(&got, &want),
                        "{} {boundary:?} {rows} rows, out of core ({p:?})",
                        j.shape
                    );
                }
            }
            let mut shapes = stencil::Blocking::candidates(&j, limit);
            shapes.extend(forced);
            for b in shapes {
                cases += 1;
                let kernel = StencilKernel::with_blocking(gpu, &j, Some(b)).unwrap();
                interior += kernel.interior_workgroups();
                let (got, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
                let what = format!("{} {boundary:?} r{} {b:?}", j.shape, j.stencil.radius());
                assert!(
                    identical(&got, &want),
                    "{what}: streamed passes differ from single steps"
                );
                if out_of_core_identical(&kernel, &input, &want, 60, 5, &what) {
                    streamed += 1;
                }
            }
        }
    }
    assert!(cases >= 60, "the streamed pass ran {cases} cases");
    assert!(streamed >= 20, "only {streamed} out-of-core cases");
    assert!(interior >= 10, "only {interior} interior workgroups");
}

/// Full boxes too wide to unroll (over 32 taps) run four cells per invocation by looping over
/// their tap rows: against the CPU, one cell per invocation within rounding, bit for bit across
/// rows per invocation and out of core, every boundary; dense weights with a zero keep one cell.
#[test]
fn wide_boxes_loop_their_tap_rows_four_cells_at_a_time() {
    let gpu = gpu(false);
    for (n, (shape, stencil, steps)) in [
        (&[40usize, 48][..], Stencil::boxed(2, 3).unwrap(), 3),
        (&[37, 64], Stencil::boxed(2, 4).unwrap(), 2),
        (&[13, 11, 16], Stencil::boxed(3, 2).unwrap(), 2),
    ]
    .into_iter()
    .enumerate()
    {
        for boundary in every_other_boundary(n) {
            let j = job(shape, stencil.clone(), boundary, steps, KeyType::F32);
            let input = grid::<f32>(j.shape.cells(), 130 + n as u64);
            let kernel = StencilKernel::new(gpu, &j).unwrap();
            assert!(
                kernel.four_cells(),
                "{} {} taps",
                j.shape,
                stencil.taps().len()
            );
            assert!(stencil::Blocking::candidates(&j, 1 << 20).is_empty());
            let (want, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
            let what = format!("{} {boundary:?} {} taps", j.shape, stencil.taps().len());
            let cpu = reference::stencil::run(&input, j.shape, &j.stencil, boundary, j.cval, steps);
            close(&want, &cpu, 1e-5, &what);
            let one = StencilKernel::one_cell(gpu, &j).unwrap();
            let (single, _) = stencil::apply(gpu, &one, &in_core(&j), &input).unwrap();
            close(&want, &single, 1e-5, &what);
            for rows in [1, 3] {
                let choice = stencil::KernelChoice {
                    rows,
                    ..Default::default()
                };
                let other = StencilKernel::with_choice(gpu, &j, choice).unwrap();
                let (got, _) = stencil::apply(gpu, &other, &in_core(&j), &input).unwrap();
                assert!(identical(&got, &want), "{what}: {rows} rows per invocation");
            }
            // room for one and a half grids: sub-blocks
            let budget = Budget {
                memory: 3 * shape[0] as u64 * j.row_bytes() / 2,
                max_binding: 1 << 30,
            };
            let p = plan(&j.problem(), budget, SPEEDS, Some(1), Streaming::Reuse).unwrap();
            assert!(p.blocks > 1, "{what}: {p:?}");
            let (got, _) = stencil::apply(gpu, &kernel, &p, &input).unwrap();
            assert!(identical(&got, &want), "{what}: out of core ({p:?})");
        }
    }
    let mut w = vec![0.5; 49];
    w[3] = 0.0;
    let holed = job(
        &[40, 48],
        Stencil::from_weights(2, 3, &w).unwrap(),
        Boundary::Reflect,
        1,
        KeyType::F32,
    );
    assert!(
        !StencilKernel::new(gpu, &holed).unwrap().four_cells(),
        "48 taps, not a box"
    );
}

/// K steps a pass in registers (`steps_lanes`: each subgroup streams a strip of vec4 columns,
/// neighbours along x through shuffles) against single steps, bit for bit: every boundary, stars
/// and boxes of radius 1..4, dense weights, K up to what the device's subgroups allow, strips
/// that do not divide the box, several strips' chunks of rows, in core and out of core. Without
/// subgroups the blocking is not offered and is refused.
#[test]
fn passes_in_registers_are_bit_identical_to_single_steps() {
    let gpu = gpu(false);
    let off = gpusort_tests::gpu(true);
    let w: Vec<f64> = (0..9).map(|i| (i as f64 - 3.0) / 10.0).collect();
    let (mut cases, mut streamed) = (0, 0);
    for (n, (shape, stencil, steps, ks)) in [
        (
            &[300usize, 400][..],
            Stencil::star(2, 1).unwrap(),
            9,
            &[1u32, 2, 3, 4, 8][..],
        ),
        (&[260, 264], Stencil::star(2, 2).unwrap(), 7, &[2, 3, 6][..]),
        (&[200, 336], Stencil::boxed(2, 1).unwrap(), 6, &[2, 4][..]),
        (&[150, 512], Stencil::star(2, 4).unwrap(), 4, &[1, 2][..]),
        (&[120, 200], Stencil::boxed(2, 2).unwrap(), 5, &[2][..]),
        (
            &[90, 160],
            Stencil::from_weights(2, 1, &w).unwrap(),
            4,
            &[3][..],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        for boundary in every_other_boundary(n) {
            let j = job(shape, stencil.clone(), boundary, steps, KeyType::F32);
            let input = grid::<f32>(j.shape.cells(), 90 + n as u64);
            let plain = StencilKernel::new(gpu, &j).unwrap();
            let (want, _) = stencil::apply(gpu, &plain, &in_core(&j), &input).unwrap();
            for &k in ks {
                assert!(
                    stencil::Blocking::lanes(off, &j, k).is_none(),
                    "no subgroups"
                );
                let Some(b) = stencil::Blocking::lanes(gpu, &j, k) else {
                    panic!(
                        "{} r{} K={k}: no blocking in registers",
                        j.shape,
                        stencil.radius()
                    );
                };
                assert!(
                    StencilKernel::with_blocking(off, &j, Some(b)).is_err(),
                    "refused without subgroups"
                );
                let kernel = StencilKernel::with_blocking(gpu, &j, Some(b)).unwrap();
                assert!(
                    kernel.interior_workgroups() > 0,
                    "{} K={k}: no interior",
                    j.shape
                );
                cases += 1;
                let (got, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
                let what = format!("{} {boundary:?} r{} {b:?}", j.shape, stencil.radius());
                assert!(
                    identical(&got, &want),
                    "{what}: passes in registers differ from single steps"
                );
                if out_of_core_identical(&kernel, &input, &want, 60, u64::from(k.max(2) + 1), &what)
                {
                    streamed += 1;
                }
            }
        }
    }
    assert!(cases >= 25, "only {cases} cases in registers");
    assert!(streamed >= 10, "only {streamed} out-of-core cases");
    // the default without measuring: K = 4 in registers for 3-row windows of at most 9 taps,
    // K = 3 for 5-row ones, none for wider stencils, short jobs, or without subgroups
    for (stencil, steps, want) in [
        (Stencil::star(2, 1).unwrap(), 10, Some(4)),
        (Stencil::boxed(2, 1).unwrap(), 4, Some(4)),
        (Stencil::star(2, 2).unwrap(), 10, Some(3)),
        (Stencil::star(2, 1).unwrap(), 3, None),
        (Stencil::boxed(2, 2).unwrap(), 10, None),
        (Stencil::star(2, 3).unwrap(), 10, None),
    ] {
        let j = job(&[300, 400], stencil, Boundary::Reflect, steps, KeyType::F32);
        let got = stencil::KernelChoice::for_device(gpu, &j).blocking;
        assert_eq!(
            got.map(|b| (b.steps, b.lanes)),
            want.map(|k| (k, true)),
            "{j:?}"
        );
        assert_eq!(StencilKernel::planned(gpu, &j).unwrap().blocking(), got);
        assert!(stencil::KernelChoice::for_device(off, &j)
            .blocking
            .is_none());
    }
    // 3-D grids: three steps in registers for the radius-1 star where the job has three
    // steps, no blocking for wider stencils, wrap, or without subgroups
    for (stencil, boundary, steps, want) in [
        (Stencil::star(3, 1).unwrap(), Boundary::Reflect, 8, Some(3)),
        (Stencil::star(3, 1).unwrap(), Boundary::Constant, 3, Some(3)),
        (Stencil::star(3, 1).unwrap(), Boundary::Reflect, 2, None),
        (Stencil::star(3, 1).unwrap(), Boundary::Wrap, 8, None),
        (Stencil::boxed(3, 1).unwrap(), Boundary::Reflect, 8, None),
        (Stencil::star(3, 2).unwrap(), Boundary::Reflect, 8, None),
    ] {
        let cube = job(&[20, 16, 32], stencil, boundary, steps, KeyType::F32);
        let got = stencil::KernelChoice::for_device(gpu, &cube).blocking;
        assert_eq!(got.map(|b| b.steps), want, "{cube:?}");
        assert!(got.is_none_or(|b| b.is_planes(&cube)));
        assert!(stencil::KernelChoice::for_device(off, &cube)
            .blocking
            .is_none());
    }
}

/// A device's tuning (`gpusort tune`) replaces the defaults' steps a pass where it has them,
/// K = 1 meaning one step a pass; values the kernels cannot take are refused.
#[test]
fn a_tuning_replaces_the_default_steps_a_pass() {
    let gpu = gpu(false);
    let two_d = job(
        &[300, 400],
        Stencil::star(2, 1).unwrap(),
        Boundary::Reflect,
        10,
        KeyType::F32,
    );
    let cube = job(
        &[20, 16, 32],
        Stencil::star(3, 1).unwrap(),
        Boundary::Reflect,
        10,
        KeyType::F32,
    );
    let steps = |j: &StencilJob, t: &stencil::StencilTuning| {
        let c = stencil::KernelChoice::for_device_tuned(gpu, j, t);
        c.blocking.map(|b| (b.steps, b.workgroup, b.is_planes(j)))
    };
    let none = stencil::StencilTuning::default();
    assert_eq!(steps(&two_d, &none).map(|s| s.0), Some(4));
    assert_eq!(steps(&cube, &none).map(|s| (s.0, s.2)), Some((3, true)));
    let tuned = stencil::StencilTuning {
        lanes_3_rows: Some(2),
        lanes_5_rows: None,
        planes_r1: Some([2, 256, 1]),
    };
    assert!(tuned.checked().is_ok());
    assert_eq!(steps(&two_d, &tuned).map(|s| s.0), Some(2));
    assert_eq!(steps(&cube, &tuned), Some((2, 256, true)));
    let single = stencil::StencilTuning {
        lanes_3_rows: Some(1),
        lanes_5_rows: None,
        planes_r1: Some([1, 0, 0]),
    };
    assert!(single.checked().is_ok());
    assert_eq!(steps(&two_d, &single), None);
    assert_eq!(steps(&cube, &single), None);
    // the radius-2 star keeps its default where only radius 1 is tuned
    let r2 = job(
        &[300, 400],
        Stencil::star(2, 2).unwrap(),
        Boundary::Reflect,
        10,
        KeyType::F32,
    );
    assert_eq!(steps(&r2, &tuned).map(|s| s.0), Some(3));
    for bad in [
        stencil::StencilTuning {
            lanes_3_rows: Some(9),
            ..Default::default()
        },
        stencil::StencilTuning {
            planes_r1: Some([5, 512, 1]),
            ..Default::default()
        },
        stencil::StencilTuning {
            planes_r1: Some([2, 300, 1]),
            ..Default::default()
        },
    ] {
        assert!(bad.checked().is_err(), "{bad:?}");
    }
}

/// K steps a pass on 3-D grids in registers (`steps_planes`: a workgroup streams a tile of the
/// plane along z, neighbours along x through shuffles and along y through workgroup memory, the
/// grid's edges mirrored in the kernel) against single steps, bit for bit: every boundary but
/// wrap (refused), stars and boxes, asymmetric weights (a mirrored cell taken from the wrong side
/// would show), several tiles along y and strips along x that do not divide the grid, several
/// chunks along z, every workgroup size that fits, in core and out of core. Without subgroups it
/// is not offered and is refused.
#[test]
fn passes_in_registers_on_3d_grids_are_bit_identical_to_single_steps() {
    let gpu = gpu(false);
    let off = gpusort_tests::gpu(true);
    let dense: Vec<f64> = (0..27).map(|i| (i as f64 - 11.0) / 40.0).collect();
    let (mut cases, mut streamed) = (0, 0);
    for (n, (shape, stencil, steps, ks)) in [
        // 11 vec4s a row: two strips of 6 output lanes on subgroups of 8; 75 rows: two tiles
        (
            &[23usize, 75, 44][..],
            Stencil::star(3, 1).unwrap(),
            4,
            &[1u32, 2, 4][..],
        ),
        // 100 planes: chunks of 36 planes for K = 1
        (&[100, 12, 16], Stencil::star(3, 1).unwrap(), 3, &[1, 3][..]),
        (&[17, 20, 40], Stencil::star(3, 2).unwrap(), 4, &[2][..]),
        (
            &[15, 14, 36],
            Stencil::from_weights(3, 1, &dense).unwrap(),
            2,
            &[2][..],
        ),
        (&[12, 11, 24], Stencil::star(3, 4).unwrap(), 2, &[1][..]),
    ]
    .into_iter()
    .enumerate()
    {
        for boundary in BOUNDARIES {
            let j = job(shape, stencil.clone(), boundary, steps, KeyType::F32);
            let input = grid::<f32>(j.shape.cells(), 190 + n as u64);
            let plain = StencilKernel::new(gpu, &j).unwrap();
            let (want, _) = stencil::apply(gpu, &plain, &in_core(&j), &input).unwrap();
            for &k in ks {
                assert!(
                    stencil::Blocking::lanes(off, &j, k).is_none(),
                    "no subgroups"
                );
                let planes = stencil::Blocking::plane_shapes(gpu, &j)
                    .into_iter()
                    .filter(|b| b.steps == k);
                // measured by choose_kernel: the first shape that fits, for K from 2 on
                let measured: Vec<_> = stencil::Blocking::device_candidates(gpu, &j)
                    .into_iter()
                    .filter(|b| b.is_planes(&j) && b.steps == k)
                    .collect();
                let first = stencil::Blocking::lanes(gpu, &j, k);
                assert_eq!(
                    measured,
                    first.filter(|_| k >= 2).into_iter().collect::<Vec<_>>()
                );
                let first = stencil::Blocking::lanes(gpu, &j, k);
                if boundary == Boundary::Wrap {
                    assert!(first.is_none(), "{} wrap: no planes in registers", j.shape);
                    assert_eq!(planes.count(), 0);
                    continue;
                }
                let first = first.unwrap_or_else(|| {
                    panic!(
                        "{} r{} K={k}: no pass in registers",
                        j.shape,
                        stencil.radius()
                    )
                });
                assert!(first.is_planes(&j));
                assert!(
                    StencilKernel::with_blocking(off, &j, Some(first)).is_err(),
                    "refused without subgroups"
                );
                for b in planes {
                    let kernel = StencilKernel::with_blocking(gpu, &j, Some(b)).unwrap();
                    cases += 1;
                    let (got, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
                    let what = format!("{} {boundary:?} r{} {b:?}", j.shape, stencil.radius());
                    assert!(
                        identical(&got, &want),
                        "{what}: passes in registers differ from single steps"
                    );
                    if b.workgroup == first.workgroup
                        && out_of_core_identical(
                            &kernel,
                            &input,
                            &want,
                            40,
                            u64::from(k.max(2)),
                            &what,
                        )
                    {
                        streamed += 1;
                    }
                }
            }
        }
    }
    assert!(cases >= 40, "only {cases} cases in registers");
    assert!(streamed >= 8, "only {streamed} out-of-core cases");
}

/// What the streamed pass refuses, and the measured choice: `choose_kernel` returns a choice that
/// runs and gives the single steps' result, and small grids are not measured.
/// 3-D single steps on workgroups over patches of the plane's rows (the default) give the same
/// bytes as workgroups along x: patches cut by the grid's y and x edges, rows narrower than a
/// patch, several rows per invocation; planes too small for patches keep workgroups along x.
#[test]
fn plane_patches_are_bit_identical_to_workgroups_along_x() {
    let gpu = gpu(false);
    for (shape, stencil, boundary, rows, plane_rows, patch) in [
        // 25 vec4s a row: a patch of 8 rows x 32 vec4s, cut at x and at y (50 = 6 x 8 + 2)
        (
            &[5, 50, 100],
            Stencil::star(3, 2).unwrap(),
            Boundary::Reflect,
            2,
            8,
            8,
        ),
        (
            &[5, 50, 100],
            Stencil::star(3, 2).unwrap(),
            Boundary::Reflect,
            3,
            16,
            16,
        ),
        // 32-row patches of 8 vec4s: 40 rows = 32 + 8
        (
            &[6, 40, 96],
            Stencil::boxed(3, 1).unwrap(),
            Boundary::Wrap,
            2,
            32,
            32,
        ),
        // 6 vec4s a row: patches of 32 rows x 8 vec4s, more rows than asked
        (
            &[7, 60, 24],
            Stencil::star(3, 1).unwrap(),
            Boundary::Constant,
            1,
            8,
            32,
        ),
        // a plane of 12 vec4s: workgroups along x
        (
            &[9, 3, 16],
            Stencil::star(3, 1).unwrap(),
            Boundary::Nearest,
            2,
            8,
            1,
        ),
    ] {
        let j = job(shape, stencil, boundary, 3, KeyType::F32);
        let input = grid::<f32>(j.shape.cells(), 77);
        let along_x = stencil::KernelChoice {
            rows,
            plane_rows: 1,
            ..Default::default()
        };
        let along_x = StencilKernel::with_choice(gpu, &j, along_x).unwrap();
        assert_eq!(along_x.plane_patch_rows(), 1);
        let (want, _) = stencil::apply(gpu, &along_x, &in_core(&j), &input).unwrap();
        let choice = stencil::KernelChoice {
            rows,
            plane_rows,
            ..Default::default()
        };
        let kernel = StencilKernel::with_choice(gpu, &j, choice).unwrap();
        assert_eq!(kernel.plane_patch_rows(), patch, "{}", j.shape);
        let (got, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
        assert!(
            identical(&got, &want),
            "{} {boundary:?}: {plane_rows}-row patches differ from workgroups along x",
            j.shape
        );
    }
}

#[test]
fn blocking_is_checked_and_measured() {
    let gpu = gpu(false);
    let j = job(
        &[64, 64],
        Stencil::star(2, 1).unwrap(),
        Boundary::Reflect,
        8,
        KeyType::F32,
    );
    let odd = job(
        &[64, 66],
        Stencil::star(2, 1).unwrap(),
        Boundary::Reflect,
        8,
        KeyType::F32,
    );
    let wide = job(
        &[64, 64],
        Stencil::boxed(2, 3).unwrap(),
        Boundary::Reflect,
        8,
        KeyType::F32,
    );
    let limit = gpu.limits.max_compute_workgroup_storage_size;
    assert!(
        stencil::Blocking::candidates(&odd, limit).is_empty(),
        "rows of 66 cells"
    );
    assert!(
        stencil::Blocking::candidates(&wide, limit).is_empty(),
        "49 taps"
    );
    let b = stencil::Blocking::choose(&j, limit, 2).unwrap();
    for bad in [
        stencil::Blocking { steps: 5, ..b },
        stencil::Blocking { tile_vec4s: 2, ..b },
        stencil::Blocking { tile_rows: 3, ..b },
        stencil::Blocking { workgroup: 96, ..b },
        stencil::Blocking { planes: 0, ..b },
        stencil::Blocking {
            tile_vec4s: 1 << 20,
            ..b
        },
    ] {
        assert!(
            StencilKernel::with_blocking(gpu, &j, Some(bad)).is_err(),
            "{bad:?}"
        );
    }
    assert!(StencilKernel::with_blocking(gpu, &odd, Some(b)).is_err());
    let chosen = stencil::choose_kernel(gpu, &j, 1 << 20).unwrap();
    let kernel = StencilKernel::with_choice(gpu, &j, chosen).unwrap();
    let input = grid::<f32>(j.shape.cells(), 77);
    let plain = StencilKernel::new(gpu, &j).unwrap();
    let (want, _) = stencil::apply(gpu, &plain, &in_core(&j), &input).unwrap();
    let (got, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
    assert!(identical(&got, &want), "{chosen:?}");
    // small grids are not measured: the device's default (here 4 steps a pass in registers)
    let planned = StencilKernel::planned(gpu, &j).unwrap();
    assert_eq!(planned.choice(), stencil::KernelChoice::for_device(gpu, &j));
    assert!(planned.blocking().is_some_and(|b| b.lanes && b.steps == 4));
    // in registers: at most 8 steps, and a halo the narrowest subgroup leaves output lanes of
    let lanes = stencil::Blocking::lanes(gpu, &j, 2).unwrap();
    assert!(StencilKernel::with_blocking(gpu, &j, Some(lanes)).is_ok());
    let broad = job(
        &[64, 256],
        Stencil::star(2, 4).unwrap(),
        Boundary::Reflect,
        8,
        KeyType::F32,
    );
    let nine = stencil::Blocking { steps: 9, ..lanes };
    assert!(StencilKernel::with_blocking(gpu, &j, Some(nine)).is_err());
    // radius 4, 8 steps: 8 lanes of halo at each side
    let min_lanes = gpu.subgroups().map_or(0, |s| s.min_size);
    let eight = stencil::Blocking { steps: 8, ..lanes };
    assert_eq!(
        StencilKernel::with_blocking(gpu, &broad, Some(eight)).is_ok(),
        16 < min_lanes,
        "subgroups of {min_lanes}"
    );
    let bad_rows = stencil::KernelChoice {
        rows: 9,
        ..Default::default()
    };
    assert!(StencilKernel::with_choice(gpu, &j, bad_rows).is_err());
    for plane_rows in [0, 3, 64] {
        let bad = stencil::KernelChoice {
            plane_rows,
            ..Default::default()
        };
        assert!(
            StencilKernel::with_choice(gpu, &j, bad).is_err(),
            "{plane_rows}"
        );
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // each case compiles a kernel (seconds on a software adapter): few, but varied
        #![proptest_config(ProptestConfig::with_cases(12))]

        /// Random grids, stencils, boundaries, steps and budgets: the GPU agrees with the CPU twin,
        /// and a streamed run with the budget's plan is bit-identical to the in-core run.
        #[test]
        fn random_jobs_match_the_cpu_and_stream_identically(
            dims in 2usize..=3,
            extents in prop::collection::vec(1usize..24, 3),
            radius in 1u32..=3,
            boxed in any::<bool>(),
            boundary in 0usize..5,
            steps in 1u32..=4,
            budget_rows in 6u64..40,
            seed in any::<u64>(),
        ) {
            let shape: Vec<usize> = extents[..dims].iter().map(|&n| n.max(radius as usize)).collect();
            let stencil = if boxed { Stencil::boxed(dims, radius) } else { Stencil::star(dims, radius) }.unwrap();
            let j = job(&shape, stencil, BOUNDARIES[boundary], steps, KeyType::F32);
            let gpu = gpu(false);
            let kernel = StencilKernel::new(gpu, &j).unwrap();
            let input = grid::<f32>(j.shape.cells(), seed);
            let (got, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
            let want = reference::stencil::run(&input, j.shape, &j.stencil, j.boundary, j.cval, j.steps);
            close(&got, &want, 1e-5, &format!("{} {:?}", j.shape, j.boundary));
            let budget = Budget { memory: budget_rows * j.row_bytes(), max_binding: 1 << 30 };
            if let Ok(p) = plan(&j.problem(), budget, SPEEDS, None, Streaming::Reuse) {
                let (streamed, _) = stencil::apply(gpu, &kernel, &p, &input).unwrap();
                prop_assert!(
                    identical(&streamed, &got),
                    "{} {:?}: {p:?}", j.shape, j.boundary
                );
            }
        }
    }
}

/// `apply_into_until` (the Python package's stencils, stopped by Ctrl-C) sends the steps in
/// several submissions and gives `apply`'s result bit for bit; a stop it sees ends the job with
/// `Error::Cancelled`. With and without subgroups, an even and an odd step count.
#[test]
fn stencils_in_stoppable_submissions_match_and_stop() {
    for subgroups in [false, true] {
        let gpu = gpu(subgroups);
        for steps in [20, 37] {
            let j = job(
                &[48, 40],
                Stencil::star(2, 2).unwrap(),
                Boundary::Reflect,
                steps,
                KeyType::F32,
            );
            let kernel = StencilKernel::new(gpu, &j).unwrap();
            let input: Vec<f32> = grid(48 * 40, 31);
            let (want, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
            let mut got = vec![0f32; input.len()];
            let checks = std::cell::Cell::new(0);
            let never = || {
                checks.set(checks.get() + 1);
                false
            };
            stencil::apply_into_until(gpu, &kernel, &in_core(&j), &input, &mut got, &never)
                .unwrap();
            // (the first submission takes 8 steps, so there were at least two)
            assert!(checks.get() >= 2, "{} submissions", checks.get());
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&want),
                "steps {steps}, subgroups {subgroups}"
            );
            let calls = std::cell::Cell::new(0);
            let after_one = || {
                calls.set(calls.get() + 1);
                calls.get() > 1
            };
            let stopped =
                stencil::apply_into_until(gpu, &kernel, &in_core(&j), &input, &mut got, &after_one);
            assert!(
                matches!(stopped, Err(gpusort_core::Error::Cancelled)),
                "{stopped:?}"
            );
        }
    }
}

/// A job out of core stops after the sub-block in flight once `stop()` holds
/// (`Error::Cancelled`, the GPU idle: the same kernel then runs the job whole, bit for bit), and
/// runs to the same result where it never holds.
#[test]
fn streamed_stencils_stop_between_sub_blocks() {
    let gpu = gpu(false);
    let j = job(
        &[200, 64],
        Stencil::star(2, 1).unwrap(),
        Boundary::Nearest,
        3,
        KeyType::F32,
    );
    let kernel = StencilKernel::new(gpu, &j).unwrap();
    let input: Vec<f32> = grid(j.shape.cells(), 41);
    let (want, _) = stencil::apply(gpu, &kernel, &in_core(&j), &input).unwrap();
    let budget = Budget {
        memory: 40 * j.row_bytes(),
        max_binding: 1 << 30,
    };
    let p = plan(&j.problem(), budget, SPEEDS, Some(1), Streaming::Reuse).unwrap();
    assert!(!p.in_core && p.blocks > 2, "{p:?}");
    let mut got = vec![0f32; input.len()];
    let checks = std::cell::Cell::new(0);
    let after_one = || {
        checks.set(checks.get() + 1);
        checks.get() > 1
    };
    let stopped = stencil::apply_into_until(gpu, &kernel, &p, &input, &mut got, &after_one);
    assert!(
        matches!(stopped, Err(gpusort_core::Error::Cancelled)),
        "{stopped:?}"
    );
    assert_eq!(checks.get(), 2, "stopped at the second check");
    let never = || false;
    stencil::apply_into_until(gpu, &kernel, &p, &input, &mut got, &never).unwrap();
    assert!(identical(&got, &want));
}
