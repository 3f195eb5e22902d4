//! The stencil suite: Jacobi steps on GPU-resident grids, per stencil (2-D and 3-D, star and box,
//! radius 1..4, reflect boundary), each kernel variant against the vec4 copy of the grid (8 bytes
//! a cell in f32: the bound of one step per pass) measured in the same run:
//!
//! - "1 cell/invocation": one step per pass, the kernel the four-cell one replaced;
//! - "4 cells/invocation": one step per pass (`step4`), where the rows allow it, and "4 cells x M
//!   rows": M rows of them per invocation, sharing their loads along the first axis;
//! - "K steps/pass streamed": K = 1..4 steps per pass through workgroup memory, where a tile fits
//!   (K = 1: one step that reads each input plane once).
//!
//! Steps are timed twelve to a submission (a multiple of every K) and reported per step. The
//! variants are checked against each other (bit for bit between the four-cell kernels) and, up to
//! 2^24 cells, one step against the CPU twin.

use gpusort_core::device::transfer;
use gpusort_core::reference::stencil as reference;
use gpusort_core::stencil::{
    Blocking, Boundary, GridShape, KernelChoice, Stencil, StencilJob, StencilKernel, StencilValue,
};

use super::{measure, measure_copy, measure_warm, skipped, too_big, Case, Ctx};
use crate::{Error, Result};

const STEPS: u32 = 12;

/// The stencils measured at each size: all of them, or two in the quick set.
fn stencils(quick: bool) -> Vec<(usize, Stencil, String)> {
    let mut out = Vec::new();
    let mut add = |dims: usize, boxed: bool, r: u32| {
        let s = if boxed {
            Stencil::boxed(dims, r)
        } else {
            Stencil::star(dims, r)
        }
        .expect("radius 1..4 is valid");
        let name = format!("{dims}-D {} r{r}", if boxed { "box" } else { "star" });
        out.push((dims, s, name));
    };
    if quick {
        add(2, false, 2);
        add(3, false, 1);
        return out;
    }
    for r in 1..=4 {
        add(2, false, r);
    }
    for r in 1..=4 {
        add(2, true, r);
    }
    for r in 1..=4 {
        add(3, false, r);
    }
    // 3-D boxes of radius 3 and 4 (343 and 729 taps) are bound by multiply-adds at a few percent
    // of the copy, and their one-cell reference alone takes minutes at 2^28 cells
    for r in 1..=2 {
        add(3, true, r);
    }
    out
}

/// A stencil's name on the command line: "2-D star r1" is `2d-star-r1`.
fn slug(name: &str) -> String {
    name.to_lowercase().replace("-d ", "d-").replace(' ', "-")
}

/// The stencils `--stencils` names (None: all of them), checked against the full set before
/// anything is measured.
pub(super) fn names(asked: &[String]) -> Result<Option<Vec<String>>, Error> {
    if asked.iter().any(|a| a == "all") {
        return Ok(None);
    }
    let known: Vec<String> = stencils(false).iter().map(|(_, _, n)| slug(n)).collect();
    match asked.iter().find(|a| !known.contains(a)) {
        Some(bad) => Err(Error::usage(format!(
            "--stencils: no stencil {bad}; the stencils are {} (or all)",
            known.join(", ")
        ))),
        None => Ok(Some(asked.to_vec())),
    }
}

pub(super) fn suite(
    ctx: &Ctx<'_>,
    sizes: &[u32],
    quick: bool,
    only: &Option<Vec<String>>,
) -> Result<Vec<Case>, Error> {
    // the stencils named (from the full set, --quick or not), else the set --quick says
    let chosen = |set: Vec<(usize, Stencil, String)>| -> Vec<(usize, Stencil, String)> {
        set.into_iter()
            .filter(|(_, _, n)| only.as_ref().is_none_or(|o| o.contains(&slug(n))))
            .collect()
    };
    let list = chosen(stencils(quick && only.is_none()));
    let mut cases = Vec::new();
    for &log in sizes {
        let n = 1usize << log;
        let host = gpusort_core::bench::random_unit_f32(n, log as u64 + 300);
        per_type(ctx, log, &host, &list, quick, &mut cases)?;
        // f64 at its own bound (16 bytes a cell): the narrowest stencils only
        let narrow = chosen(stencils(true));
        if ctx.gpu.features.contains(wgpu::Features::SHADER_F64) && !narrow.is_empty() {
            let wide: Vec<f64> = host.iter().map(|&v| f64::from(v)).collect();
            per_type(ctx, log, &wide, &narrow, quick, &mut cases)?;
        }
        if ctx.cpu {
            let bar = ctx.bar;
            bar.set_message(format!("2^{log}: CPU step"));
            let side = 1usize << (log / 2);
            let job_shape = GridShape::new(&[side, n / side])?;
            let star = Stencil::star(2, 2)?;
            let reps = if n >= 1 << 24 {
                ctx.reps.min(2)
            } else {
                ctx.reps
            };
            let st = measure(reps, || {
                let t = std::time::Instant::now();
                let out = reference::run(&host, job_shape, &star, Boundary::Reflect, 0.0, 1);
                std::hint::black_box(&out);
                Ok(t.elapsed().as_secs_f64())
            })?;
            cases.push(ctx.show(Case {
                skipped: None,
                suite: "stencil".into(),
                case: format!(
                    "CPU twin, 2-D star r2 ({} threads)",
                    rayon::current_num_threads()
                ),
                n: n as u64,
                stats: st.clone(),
                throughput: n as f64 / st.median_s / 1e9,
                unit: "GCells/s".into(),
                relative: 0.0,
                dispatches: None,
                note: "wall clock, f32".into(),
                shown: false,
            }));
        }
    }
    Ok(cases)
}

/// Every stencil of `list` on grids of `host`'s cells and type, each variant against the copy
/// (`quick`: one of each kind of variant, so that a software adapter compiles few kernels).
fn per_type<T: StencilValue + Into<f64>>(
    ctx: &Ctx<'_>,
    log: u32,
    host: &[T],
    list: &[(usize, Stencil, String)],
    quick: bool,
    cases: &mut Vec<Case>,
) -> Result<(), Error> {
    let (gpu, timer, bar, reps) = (ctx.gpu, ctx.timer, ctx.bar, ctx.reps);
    let ty = T::TYPE;
    let cell = std::mem::size_of::<T>();
    let n = host.len();
    if let Some(why) = too_big(gpu, std::mem::size_of_val(host) as u64) {
        cases.push(ctx.show(skipped("stencil", n as u64, &format!("{ty} stencils"), why)));
        return Ok(());
    }
    bar.inc_length(1);
    let a = transfer::buffer_from(gpu, "bench grid", host)?;
    let b = transfer::storage_buffer(gpu, "bench grid out", std::mem::size_of_val(host) as u64)?;
    let case = |name: &str, stats: &gpusort_core::bench::Stats, relative: f64, note: String| Case {
        skipped: None,
        suite: "stencil".into(),
        case: name.into(),
        n: n as u64,
        stats: stats.clone(),
        throughput: n as f64 / stats.median_s / 1e9,
        unit: "GCells/s".into(),
        relative,
        dispatches: Some(1),
        note,
        shown: false,
    };
    bar.set_message(format!("2^{log}: copy"));
    let copy_st = measure_copy(ctx, &a, &b)?;
    cases.push(ctx.show(case(
        &match ty {
            gpusort_core::KeyType::F32 => "vec4 copy (bound)".to_string(),
            _ => format!("{ty} vec4 copy (bound)"),
        },
        &copy_st,
        1.0,
        format!("{} bytes per cell", 2 * cell),
    )));
    bar.inc(1);
    let side = 1usize << (log / 2);
    let cube = 1usize << (log / 3);
    for (dims, stencil, sname) in list {
        let sname = match ty {
            gpusort_core::KeyType::F32 => sname.clone(),
            _ => format!("{ty} {sname}"),
        };
        let shape = if *dims == 2 {
            GridShape::new(&[side, n / side])?
        } else {
            GridShape::new(&[cube, cube, n / (cube * cube)])?
        };
        let job = StencilJob {
            shape,
            stencil: stencil.clone(),
            boundary: Boundary::Reflect,
            cval: 0.0,
            steps: STEPS,
            dtype: ty,
        };
        let mut variants: Vec<(String, StencilKernel)> = vec![(
            format!("{sname}, 1 cell/invocation"),
            StencilKernel::one_cell(gpu, &job)?,
        )];
        // cells one an invocation (f64): two neighbours an invocation, shared loads
        let pairs = KernelChoice {
            pairs: true,
            ..KernelChoice::default()
        };
        let paired = StencilKernel::with_choice(gpu, &job, pairs)?;
        if !paired.four_cells() && paired.choice().pairs {
            variants.push((format!("{sname}, 2 cells/invocation"), paired));
        }
        // workgroups along x first (the kernels before plane patches), then 3-D patches
        let one_row = KernelChoice {
            rows: 1,
            plane_rows: 1,
            ..KernelChoice::default()
        };
        let four = StencilKernel::with_choice(gpu, &job, one_row)?;
        if four.four_cells() {
            variants.push((format!("{sname}, 4 cells/invocation"), four));
            let rows_tried: &[u32] = if quick { &[4] } else { &[2, 4, 8] };
            for &rows in rows_tried {
                let choice = KernelChoice {
                    rows,
                    plane_rows: 1,
                    ..KernelChoice::default()
                };
                variants.push((
                    format!("{sname}, 4 cells x {rows} rows/invocation"),
                    StencilKernel::with_choice(gpu, &job, choice)?,
                ));
            }
            // 3-D: a workgroup over a patch of the plane's rows instead of along x (2 x 8: the
            // default)
            let patches: &[(u32, u32)] = if quick {
                &[(2, 8)]
            } else {
                &[(2, 4), (2, 8), (2, 16), (4, 8)]
            };
            for &(rows, plane_rows) in patches {
                if *dims != 3 {
                    break;
                }
                let choice = KernelChoice {
                    rows,
                    plane_rows,
                    ..KernelChoice::default()
                };
                variants.push((
                    format!("{sname}, 4 cells x {rows} rows/invocation, {plane_rows}-row patches"),
                    StencilKernel::with_choice(gpu, &job, choice)?,
                ));
            }
        }
        // 3-D grids: every workgroup shape of the passes in registers, K = 2..4
        let mut blockings = Blocking::device_candidates(gpu, &job);
        blockings.retain(|b| !b.is_planes(&job));
        blockings.extend(
            Blocking::plane_shapes(gpu, &job)
                .into_iter()
                .filter(|b| b.steps >= 2),
        );
        if quick {
            // one of each: a streamed step, two streamed, two in registers (the first shape)
            let mut seen = Vec::new();
            blockings.retain(|b| {
                let kind = (b.steps, b.lanes);
                let keep = b.steps <= 2 && !seen.contains(&kind);
                seen.push(kind);
                keep
            });
        }
        for blocking in blockings {
            variants.push((
                match (blocking.steps, blocking.lanes) {
                    (k, true) if blocking.is_planes(&job) => format!(
                        "{sname}, {k} steps/pass in registers, {} invocations x {} rows",
                        blocking.workgroup, blocking.tile_rows
                    ),
                    (1, false) => format!("{sname}, 1 step/pass streamed"),
                    (k, false) => format!("{sname}, {k} steps/pass streamed"),
                    (k, true) => format!("{sname}, {k} steps/pass in registers"),
                },
                StencilKernel::with_blocking(gpu, &job, Some(blocking))?,
            ));
        }
        bar.inc_length(variants.len() as u64);
        let mut first: Option<Vec<T>> = None;
        let mut four_result: Option<Vec<T>> = None;
        for (name, kernel) in &variants {
            bar.set_message(format!("2^{log}: {name}"));
            let st = measure_warm(reps, ctx.warm, || {
                Ok(timer.time(
                    gpu,
                    |_| {},
                    |enc| kernel.record_steps(gpu, enc, &a, &b, STEPS).map(|_| ()),
                )? / STEPS as f64)
            })?;
            // the result of STEPS steps from the same input, against the other variants
            transfer::upload(gpu, &a, 0, bytemuck::cast_slice(host))?;
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            let out = kernel.record_steps(gpu, &mut enc, &a, &b, STEPS)?;
            gpu.queue.submit([enc.finish()]);
            let got: Vec<T> = transfer::read_vec(gpu, out, n)?;
            transfer::upload(gpu, &a, 0, bytemuck::cast_slice(host))?;
            let checked = match (&first, &four_result) {
                (None, _) => {
                    // the first variant: one step against the CPU twin, where that is quick
                    let note = if n <= 1 << 24 {
                        let mut enc = gpu.device.create_command_encoder(&Default::default());
                        kernel.record_steps(gpu, &mut enc, &a, &b, 1)?;
                        gpu.queue.submit([enc.finish()]);
                        let one: Vec<T> = transfer::read_vec(gpu, &b, n)?;
                        let want =
                            reference::run(host, job.shape, &job.stencil, job.boundary, 0.0, 1);
                        if one
                            .iter()
                            .zip(&want)
                            .any(|(&g, &w)| (g.into() - w.into()).abs() > 1e-5)
                        {
                            return Err(Error::runtime(format!(
                                "bench: {name} of 2^{log} differs from the CPU's on {}",
                                gpu.adapter.name
                            )));
                        }
                        "one step checked against the CPU"
                    } else {
                        "the reference variant"
                    };
                    first = Some(got);
                    note
                }
                (Some(f), None) => {
                    // a multiply-add may fuse differently in another kernel: close, not equal
                    if f.iter()
                        .zip(&got)
                        .any(|(&x, &y)| (x.into() - y.into()).abs() > 1e-5)
                    {
                        return Err(Error::runtime(format!(
                            "bench: {name} of 2^{log} differs from one cell per invocation on {}",
                            gpu.adapter.name
                        )));
                    }
                    four_result = Some(got);
                    "within 1e-5 of 1 cell per invocation"
                }
                (Some(_), Some(f)) => {
                    if bytemuck::cast_slice::<T, u8>(f) != bytemuck::cast_slice::<T, u8>(&got) {
                        return Err(Error::runtime(format!(
                            "bench: {name} of 2^{log} differs from single steps on {}",
                            gpu.adapter.name
                        )));
                    }
                    "bit-identical to 1 step per pass"
                }
            };
            let tiles = match kernel.blocking() {
                Some(b) if b.is_planes(&job) => {
                    format!(
                        "tiles of {} invocations x {} rows streamed along z; ",
                        b.workgroup, b.tile_rows
                    )
                }
                Some(b) if b.lanes => format!(
                    "strips of a subgroup's lanes, edges in tiles of {}x{} cells; ",
                    b.tile_rows,
                    4 * b.tile_vec4s
                ),
                Some(b) => format!("tiles of {}x{} cells; ", b.tile_rows, 4 * b.tile_vec4s),
                None => String::new(),
            };
            let note = format!(
                "grid {}, {} taps; {tiles}{:.0}% of copy bandwidth per step; {checked}",
                job.shape,
                job.stencil.taps().len(),
                100.0 * copy_st.median_s / st.median_s,
            );
            cases.push(ctx.show(case(name, &st, st.median_s / copy_st.median_s, note)));
            bar.inc(1);
        }
    }
    Ok(())
}
