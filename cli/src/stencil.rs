//! `gpusort stencil`: Jacobi steps of a stencil over a 2-D or 3-D grid, in core or streamed
//! through the GPU in sub-blocks (METHODS.md method 4).

use std::path::PathBuf;

use clap::ValueEnum;
use gpusort_core::reference::check;
use gpusort_core::stencil::{
    self, Boundary, GridShape, Stencil, StencilJob, StencilKernel, StencilValue,
};
use gpusort_core::KeyType;
use gpusort_sched::stencil::{plan, Budget, Speeds, StencilPlan, Streaming};

use crate::error::{CliError, CliResult};
use crate::{progress, Engine, Global};
use gpusort_files::{
    check_distinct, output_format, resolve_output, shown, Format, Input, Named, Output, Scratch,
    Written,
};

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Kind {
    /// The cross of 2·d·R + 1 points along the axes.
    Star,
    /// The whole (2R+1)^d box.
    Box,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum GridDtype {
    F32,
    F64,
}

#[derive(clap::Args, Debug)]
pub struct StencilArgs {
    /// Input grid: raw little-endian (with --shape) or .npy (2-D or 3-D, C order).
    pub input: PathBuf,
    /// Output (same format as the input). Default: INPUT's name with `.stencil` before the extension.
    #[arg(short, long, conflicts_with = "in_place")]
    pub output: Option<PathBuf>,
    /// Replace the input with the result (crash-safe: temporary file, then rename).
    #[arg(long)]
    pub in_place: bool,
    /// Shape of a raw grid, outermost axis first: ZxYxX or YxX. For .npy it must match if given.
    #[arg(long)]
    pub shape: Option<String>,
    /// Cell type of a raw grid (default f32); for .npy it must match the header if given.
    #[arg(long, value_enum)]
    pub dtype: Option<GridDtype>,
    /// Equal weights summing to 1 on a star or a box.
    #[arg(long, value_enum, default_value = "star", conflicts_with = "weights")]
    pub stencil: Kind,
    /// Reach of the stencil in cells (1..=8). With --weights it follows from their shape.
    #[arg(long)]
    pub radius: Option<u32>,
    /// A dense (2R+1)^d .npy array of weights (f32 or f64), applied like scipy.ndimage.correlate.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// What lies outside the grid, as in scipy.ndimage.
    #[arg(long, default_value = "reflect", value_parser = Boundary::NAMES)]
    pub boundary: String,
    /// The outside value of --boundary constant: a value the grid's type holds, NaN and ±inf
    /// included (as scipy.ndimage takes them: sums that reach them are NaN or infinite).
    #[arg(long, default_value = "0", allow_negative_numbers = true)]
    pub cval: String,
    /// Jacobi steps (each reads the previous grid).
    #[arg(long, default_value_t = 1)]
    pub steps: u32,
    /// GPU memory the job may use, e.g. 512M or 8G (default: four times the device's largest
    /// storage binding). Grids that do not fit are streamed in sub-blocks.
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    pub gpu_memory: Option<String>,
    /// Steps per residency of a sub-block (default: chosen by the planner).
    #[arg(long, value_name = "T")]
    pub time_block: Option<u64>,
    /// Steps per pass on chip (1..=8): each workgroup streams its tile of the grid down its
    /// rows and advances it K steps in one pass, recomputing only the tile's halo. 2-D grids on
    /// GPUs with subgroups keep the K steps in registers (any K up to 8); otherwise they pass
    /// through workgroup memory (K up to 4).
    /// Default: measured per job of 2^40 cell updates or more (the fastest K on this device), 1
    /// otherwise. Every K gives the same result bit for bit.
    #[arg(long, value_name = "K")]
    pub on_chip_steps: Option<u32>,
    /// Print the plan and its predicted time, and stop.
    #[arg(long)]
    pub plan: bool,
    /// Stream naively (halos re-sent, one step per transfer): the baseline the method is
    /// measured against.
    #[arg(long, hide = true)]
    pub naive_streaming: bool,
    /// Check the result against the CPU reference before writing it.
    #[arg(long)]
    pub verify: bool,
}

/// `4096x4096`, `64x512x512` (also `,` or ` ` as separators).
pub fn parse_shape(s: &str) -> Result<Vec<usize>, CliError> {
    let parts: Vec<&str> = s
        .split(['x', 'X', ',', ' '])
        .filter(|p| !p.is_empty())
        .collect();
    let dims: Result<Vec<usize>, _> = parts.iter().map(|p| p.parse::<usize>()).collect();
    match dims {
        Ok(d) if (2..=3).contains(&d.len()) && !d.contains(&0) => Ok(d),
        _ => Err(CliError::usage(format!(
            "--shape '{s}' is not a grid shape: give 2 or 3 positive sizes, outermost first, like 4096x4096 or 64x512x512"
        ))),
    }
}

fn read_weights(path: &std::path::Path, dims: usize) -> Result<(u32, Vec<f64>), CliError> {
    let w = Input::open_array_or(path, None, KeyType::F32)?;
    let shown = w.shown();
    let shown = shown.as_str();
    if w.format != Format::Npy {
        return Err(CliError::usage(format!(
            "--weights {shown} must be a .npy file"
        )));
    }
    let side = w.shape[0];
    if w.shape.len() != dims || w.shape.iter().any(|&n| n != side) || side % 2 == 0 {
        return Err(CliError::usage(format!(
            "--weights {shown} has shape {:?}; a {dims}-D grid needs a (2R+1)^{dims} array, like {:?}",
            w.shape,
            vec![5; dims]
        )));
    }
    let values: Vec<f64> = match w.dtype {
        KeyType::F32 => w.to_vec::<f32>().into_iter().map(f64::from).collect(),
        KeyType::F64 => w.to_vec::<f64>(),
        other => {
            return Err(CliError::usage(format!(
                "--weights {shown} holds {other}; weights must be f32 or f64"
            )))
        }
    };
    Ok(((side / 2) as u32, values))
}

pub fn run(g: &Global, args: &StencilArgs) -> CliResult {
    // the same limits on every engine (the CPU engine has no on-chip passes, but a value no
    // engine takes is the user's mistake wherever the job would run)
    if let Some(k) = args.on_chip_steps {
        if !(1..=stencil::MAX_LANE_STEPS).contains(&k) {
            return Err(CliError::usage(format!(
                "--on-chip-steps {k} is out of range (1..={})",
                stencil::MAX_LANE_STEPS
            )));
        }
    }
    if args.time_block == Some(0) {
        return Err(CliError::usage(
            "--time-block 0: a residency advances at least one step",
        ));
    }
    if args.steps == 0 {
        return Err(CliError::usage("--steps must be at least 1"));
    }
    let asked_dtype = args.dtype.map(|d| match d {
        GridDtype::F32 => KeyType::F32,
        GridDtype::F64 => KeyType::F64,
    });
    // raw grids are f32 unless told otherwise: the common case for simulation data
    let input = Input::open_array_or(&args.input, asked_dtype, KeyType::F32)?;
    if !matches!(input.dtype, KeyType::F32 | KeyType::F64) {
        return Err(CliError::usage(format!(
            "{} holds {}; stencil grids hold f32 or f64",
            input.shown(),
            input.dtype
        )));
    }
    let asked_shape = args.shape.as_deref().map(parse_shape).transpose()?;
    let extents = match (input.format, asked_shape) {
        (Format::Raw, None) => {
            return Err(CliError::usage(format!(
                "{} is a raw file: give its shape with --shape (e.g. 4096x4096 or 64x512x512)",
                input.shown()
            )))
        }
        (Format::Raw, Some(s)) => {
            let cells = s.iter().try_fold(1usize, |a, &n| a.checked_mul(n));
            if cells != Some(input.len) {
                return Err(CliError::usage(format!(
                    "--shape {} has {} cells but {} holds {} {} values",
                    args.shape.as_deref().unwrap_or_default(),
                    cells.map_or("too many".to_string(), |c| c.to_string()),
                    input.shown(),
                    input.len,
                    input.dtype
                )));
            }
            s
        }
        (Format::Npy, asked) => {
            if !(2..=3).contains(&input.shape.len()) {
                return Err(CliError::usage(format!(
                    "{} is {}-D (shape {:?}); stencil grids are 2-D or 3-D",
                    input.shown(),
                    input.shape.len(),
                    input.shape
                )));
            }
            if let Some(s) = asked.filter(|s| *s != input.shape) {
                return Err(CliError::usage(format!(
                    "--shape {s:?} does not match the shape {:?} in {}",
                    input.shape,
                    input.shown()
                )));
            }
            input.shape.clone()
        }
    };
    let shape = GridShape::new(&extents)?;
    let dims = shape.dims();
    let stencil = match &args.weights {
        Some(path) => {
            let (radius, w) = read_weights(path, dims)?;
            if args.radius.is_some_and(|r| r != radius) {
                return Err(CliError::usage(format!(
                    "--radius {} does not match the weights' radius {radius}",
                    args.radius.unwrap_or_default()
                )));
            }
            Stencil::from_weights(dims, radius, &w)?
        }
        None => {
            let radius = args.radius.unwrap_or(1);
            match args.stencil {
                Kind::Star => Stencil::star(dims, radius)?,
                Kind::Box => Stencil::boxed(dims, radius)?,
            }
        }
    };
    let cval = match input.dtype {
        KeyType::F64 => crate::parse_value::<f64>("--cval", &args.cval)?,
        _ => f64::from(crate::parse_value::<f32>("--cval", &args.cval)?),
    };
    let job = StencilJob {
        shape,
        stencil,
        boundary: args.boundary.parse()?,
        cval,
        steps: args.steps,
        dtype: input.dtype,
    };
    job.validate()?;
    let budget_bytes = args
        .gpu_memory
        .as_deref()
        .map(|b| crate::parse_bytes("--gpu-memory", b))
        .transpose()?;
    let dest = resolve_output(&input, args.output.as_deref(), args.in_place, "stencil")?;
    let mut inputs = vec![Named {
        flag: "",
        path: &input.path,
    }];
    if let Some(w) = &args.weights {
        inputs.push(Named {
            flag: "--weights",
            path: w,
        });
    }
    check_distinct(
        &inputs,
        &[Written {
            flag: "-o",
            path: &dest,
            replaces: args.in_place.then_some(0),
        }],
    )?;
    let format = output_format(&input, args.output.as_deref());

    if let Engine::Cpu { why } = g.engine()? {
        if args.plan {
            println!(
                "{}plan       on {}: the grid and one scratch copy in host memory, rows on all cores",
                describe_job(&job),
                Engine::cpu_words(why)
            );
            return Ok(());
        }
        return match job.dtype {
            KeyType::F64 => run_on_cpu::<f64>(g, args, &job, &input, (&dest, format), why),
            _ => run_on_cpu::<f32>(g, args, &job, &input, (&dest, format), why),
        };
    }
    if !args.plan && g.several_devices()? {
        let group = g.group()?;
        if gpusort_core::multi::stencil::fits(&group, &job) {
            return match job.dtype {
                KeyType::F64 => run_group::<f64>(g, args, &group, &job, &input, &dest, format),
                _ => run_group::<f32>(g, args, &group, &job, &input, &dest, format),
            };
        }
        if !g.quiet {
            eprintln!(
                "gpusort: note: a part of this grid with its halos exceeds one binding on a device of the group, so it runs on one device (streamed)"
            );
        }
    }
    let gpu = g.gpu()?;
    let kernel = build_kernel(&gpu, &job, args)?;
    let budget = Budget {
        memory: budget_bytes.unwrap_or(4 * gpu.max_binding()),
        max_binding: gpu.max_binding(),
    };
    let streaming = if args.naive_streaming {
        Streaming::Naive
    } else {
        Streaming::Reuse
    };
    let placeholder = Speeds {
        upload_bytes_per_s: 1e10,
        download_bytes_per_s: 1e10,
        cells_per_s: 1e11,
    };
    let mut speeds = None;
    let mut chosen = plan(
        &job.problem(),
        budget,
        placeholder,
        args.time_block,
        streaming,
    )
    .map_err(|e| CliError::usage(e.to_string()))?;
    // The prediction (and, out of core, the choice of T) needs this device's speeds.
    if args.plan || !chosen.in_core {
        let measured = stencil::measure_speeds(&gpu, &kernel, 32 << 20)?;
        chosen = plan(&job.problem(), budget, measured, args.time_block, streaming)
            .map_err(|e| CliError::usage(e.to_string()))?;
        speeds = Some(measured);
    }
    if args.plan {
        print!("{}", describe(&job, &chosen, budget, speeds, &kernel));
        return Ok(());
    }
    if g.show_timings() {
        eprintln!("plan: {}", summary_line(&job, &chosen));
    }
    match job.dtype {
        KeyType::F64 => run_typed::<f64>(g, args, &gpu, &kernel, &chosen, &input, (&dest, format)),
        _ => run_typed::<f32>(g, args, &gpu, &kernel, &chosen, &input, (&dest, format)),
    }
}

/// The step kernels for `job` on `gpu`: measured (`StencilKernel::planned`), or the number of
/// on-chip steps asked for.
fn build_kernel(
    gpu: &gpusort_core::Gpu,
    job: &StencilJob,
    args: &StencilArgs,
) -> Result<StencilKernel, CliError> {
    Ok(match args.on_chip_steps {
        None => StencilKernel::planned_tuned(gpu, job, &crate::tuning::stencil(gpu))?,
        Some(1) => StencilKernel::new(gpu, job)?,
        Some(k) if (2..=stencil::MAX_LANE_STEPS).contains(&k) => {
            let limit = gpu.limits.max_compute_workgroup_storage_size;
            let b = stencil::Blocking::for_device(gpu, job, k).ok_or_else(|| {
                CliError::usage(format!(
                    "--on-chip-steps {k}: no pass of {k} steps fits this job on {} (it needs rows of a multiple of 4 cells and at most 32 taps; then subgroups wider than the halo on a 2-D grid, or on a 3-D grid for at most 4 steps and a boundary other than wrap; or for 1 to 4 steps a tile within {} bytes of workgroup memory of which 40% is output)",
                    gpu.adapter.name, limit
                ))
            })?;
            StencilKernel::with_blocking(gpu, job, Some(b))?
        }
        Some(k) => {
            return Err(CliError::usage(format!(
                "--on-chip-steps must be 1 to {}, not {k}",
                stencil::MAX_LANE_STEPS
            )))
        }
    })
}

/// A stencil over several devices (`--devices`), each holding its part of the grid
/// (gpusort_core::multi::stencil): bit-identical to one device.
fn run_group<T: StencilValue + Into<f64>>(
    g: &Global,
    args: &StencilArgs,
    group: &gpusort_core::multi::DeviceGroup,
    job: &StencilJob,
    input: &Input,
    dest: &std::path::Path,
    format: Format,
) -> CliResult {
    let start = std::time::Instant::now();
    // the first device's choice of kernel on every device: each device compiles the same one
    let first = build_kernel(group.first(), job, args)?;
    let mut kernels = vec![];
    for gpu in &group.gpus()[1..] {
        kernels.push(StencilKernel::with_choice(gpu, job, first.choice())?);
    }
    kernels.insert(0, first);
    let bar = progress::spinner(g.progress, g.quiet);
    bar.set_message(format!("{} steps on {}", job.steps, group.describe()));
    // into anonymous memory, then positioned writes on all cores: faulting in a fresh mapped
    // output costs more than the download itself (as in `gpusort sort`)
    let mut host = vec![0u8; input.bytes().len()];
    let stats = gpusort_core::multi::stencil::run(group, &kernels, input.bytes(), &mut host)?;
    bar.finish_and_clear();
    if args.verify {
        check::stenciled(
            job,
            &input.to_vec::<T>(),
            bytemuck::cast_slice::<u8, T>(&host),
        )?;
    }
    let t = std::time::Instant::now();
    let mut out = Output::create(dest)?;
    {
        use rayon::prelude::*;
        let w = out.positioned_array(format, job.dtype, &job.shape.extents())?;
        host.par_chunks(16 << 20)
            .enumerate()
            .try_for_each(|(i, piece)| w.write_at((i * (16 << 20)) as u64, piece))?;
    }
    out.commit()?;
    let write_s = t.elapsed().as_secs_f64();
    if !g.quiet {
        crate::outcome!(
            "{} on {}",
            outcome(job, None, start.elapsed().as_secs_f64(), dest, args.verify),
            group.describe()
        );
    }
    if g.show_timings() {
        let updates = job.shape.cells() as f64 * job.steps as f64;
        crate::outcome!(
            "time: {:.2} GCells/s per step end to end; rows per device {:?}, {} rounds of {} steps between halo exchanges; slowest device: upload {:.3} s, steps {:.3} s, exchanges {:.3} s (and {:.3} s waiting for the others), download {:.3} s; {} {:.3} s",
            updates / stats.seconds.max(1e-9) / 1e9,
            stats.parts,
            stats.rounds,
            stats.round_steps,
            stats.upload_s,
            stats.compute_s,
            stats.exchange_s,
            stats.wait_s,
            stats.download_s,
            gpusort_files::write_words(),
            write_s,
        );
    }
    Ok(())
}

fn run_typed<T: StencilValue + Into<f64>>(
    g: &Global,
    args: &StencilArgs,
    gpu: &gpusort_core::Gpu,
    kernel: &StencilKernel,
    chosen: &StencilPlan,
    input: &Input,
    (dest, format): (&std::path::Path, Format),
) -> CliResult {
    let job = kernel.job();
    let bar = progress::bar(
        g.progress,
        g.quiet,
        chosen.blocks * chosen.sweeps,
        "sub-blocks",
    );
    let mut out = Output::create(dest)?;
    let mut map = out.map_array(format, job.dtype, &job.shape.extents())?;
    let mut scratch = if chosen.sweeps > 1 {
        Some(Scratch::new(input.bytes().len() as u64, dest)?)
    } else {
        None
    };
    let dst: &mut [u8] = map.as_deref_mut().unwrap_or(&mut []);
    let stats = stencil::run(
        gpu,
        kernel,
        chosen,
        input.bytes(),
        dst,
        scratch.as_mut().map(|s| s.bytes()),
        // (Ctrl-C ends the process, its files cleaned up: main.rs; the job needs no stop here)
        &mut |done, _| {
            bar.set_position(done);
            std::ops::ControlFlow::Continue(())
        },
    )?;
    bar.finish_and_clear();
    drop(scratch);
    if args.verify {
        let got: &[T] = bytemuck::cast_slice(map.as_deref().unwrap_or(&[]));
        check::stenciled(job, &input.to_vec::<T>(), got)?;
    }
    if let Some(m) = map.take() {
        m.flush()
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", shown(dest))))?;
    }
    out.commit()?;
    if !g.quiet {
        crate::outcome!("{}", outcome(job, None, stats.seconds, dest, args.verify));
    }
    if g.show_timings() {
        let updates = job.shape.cells() as f64 * job.steps as f64;
        crate::outcome!(
            "time: {:.2} GCells/s per step end to end; {} sub-block runs, {:.1} MiB up, {:.1} MiB down; host {:.3} s filling staging, {:.3} s draining it, {:.3} s waiting for the GPU",
            updates / stats.seconds.max(1e-9) / 1e9,
            stats.blocks_run,
            stats.bytes_up as f64 / (1 << 20) as f64,
            stats.bytes_down as f64 / (1 << 20) as f64,
            stats.fill_s,
            stats.drain_s,
            stats.wait_s,
        );
    }
    Ok(())
}

/// A stencil on the CPU engine: bit-identical to the CPU twin (so --verify compares exactly),
/// into the output's memory map, with a scratch grid of the same size.
fn run_on_cpu<T: StencilValue + Into<f64>>(
    g: &Global,
    args: &StencilArgs,
    job: &StencilJob,
    input: &Input,
    (dest, format): (&std::path::Path, Format),
    why: &str,
) -> CliResult {
    let start = std::time::Instant::now();
    let bar = progress::spinner(g.progress, g.quiet);
    bar.set_message(format!("{} steps on the CPU", job.steps));
    let grid = input.elements::<T>();
    let mut out = Output::create(dest)?;
    let mut map = out.map_array(format, job.dtype, &job.shape.extents())?;
    let mut scratch = if job.steps > 1 {
        Some(Scratch::new(input.bytes().len() as u64, dest)?)
    } else {
        None
    };
    if let Some(m) = map.as_mut() {
        let dst: &mut [T] = bytemuck::cast_slice_mut(&mut m[..]);
        let tmp: &mut [T] = match scratch.as_mut() {
            Some(s) => bytemuck::cast_slice_mut(s.bytes()),
            None => &mut [],
        };
        gpusort_core::cpu_engine::stencil(
            &grid,
            dst,
            tmp,
            job.shape,
            &job.stencil,
            job.boundary,
            job.cval,
            job.steps,
        );
        if args.verify {
            check::stenciled(job, &grid, dst)?;
        }
        m.flush()
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", shown(dest))))?;
    }
    drop((map, scratch));
    out.commit()?;
    bar.finish_and_clear();
    if !g.quiet {
        let on = Engine::cpu_words(why);
        let seconds = start.elapsed().as_secs_f64();
        crate::outcome!("{}", outcome(job, Some(&on), seconds, dest, args.verify));
    }
    Ok(())
}

/// A stencil job's outcome line: what ran, where (when not the GPU), how long, and the output.
fn outcome(
    job: &StencilJob,
    on: Option<&str>,
    seconds: f64,
    dest: &std::path::Path,
    verified: bool,
) -> String {
    format!(
        "{} {} of a radius-{} stencil ({} taps) on a {} {} grid{} in {seconds:.3} s -> {}{}",
        job.steps,
        if job.steps == 1 { "step" } else { "steps" },
        job.stencil.radius(),
        job.stencil.taps().len(),
        job.shape,
        job.dtype,
        on.map(|w| format!(" with {w}")).unwrap_or_default(),
        shown(dest),
        if verified { ", verified" } else { "" }
    )
}

/// The result of `job` on `grid` against the CPU twin, within the tolerance the tests use (the
/// GPU may fuse a multiply and an add).
fn summary_line(job: &StencilJob, p: &StencilPlan) -> String {
    if p.in_core {
        format!(
            "in core: {} {} on {}",
            job.steps,
            if job.steps == 1 { "step" } else { "steps" },
            job.shape
        )
    } else {
        format!(
            "out of core: {} sub-blocks of {} rows, {} steps per residency, {} sweeps",
            p.blocks, p.block_rows, p.time_block, p.sweeps
        )
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

/// The grid and stencil lines of a `--plan` report.
fn describe_job(job: &StencilJob) -> String {
    format!(
        "grid       {} {} ({})\nstencil    radius {}, {} taps, boundary {}, {} steps\n",
        job.shape,
        job.dtype,
        mib(job.shape.cells() as u64 * job.cell_bytes()),
        job.stencil.radius(),
        job.stencil.taps().len(),
        job.boundary,
        job.steps
    )
}

/// The `--plan` report.
fn describe(
    job: &StencilJob,
    p: &StencilPlan,
    budget: Budget,
    speeds: Option<Speeds>,
    kernel: &StencilKernel,
) -> String {
    let mut s = describe_job(job);
    if p.in_core {
        s += "plan       in core: one upload, every step on the GPU, one download\n";
    } else {
        s += &format!(
            "plan       out of core ({}): {} sub-blocks of {} rows, T = {} steps per residency, halo {} rows, {} sweeps\n",
            if p.streaming == Streaming::Reuse { "overlaps kept on the GPU" } else { "naive: halos re-sent" },
            p.blocks, p.block_rows, p.time_block, p.halo_rows, p.sweeps
        );
    }
    let cells = if kernel.four_cells() {
        format!("4 cells x {} rows per invocation", kernel.choice().rows)
    } else {
        "1 cell per invocation (f64, rows not a multiple of 4 cells, or over 32 taps)".to_string()
    };
    s += &match kernel.blocking() {
        Some(b) if b.is_planes(kernel.job()) => format!(
            "on chip    {} steps per pass in registers, workgroups of {} invocations ({} rows each) streaming tiles of the plane along z (edges included), {cells}\n",
            b.steps, b.workgroup, b.tile_rows
        ),
        Some(b) if b.lanes => format!(
            "on chip    {} steps per pass in registers, each subgroup streaming a strip of its lanes' columns (edges: tiles of {}x{} cells), {cells}\n",
            b.steps,
            b.tile_rows,
            4 * b.tile_vec4s
        ),
        Some(b) => format!(
            "on chip    {} steps per pass, streamed in tiles of {}x{} cells with their halos, {cells}\n",
            b.steps,
            b.tile_rows,
            4 * b.tile_vec4s
        ),
        None => format!("on chip    1 step per pass, {cells}\n"),
    };
    let useful = job.shape.cells() as f64 * job.steps as f64;
    s += &format!(
        "gpu memory {} of a {} budget (largest binding {})\n",
        mib(p.gpu_bytes),
        mib(budget.memory),
        mib(budget.max_binding)
    );
    s += &format!(
        "transfers  {} up, {} down; {:.3e} cell updates ({:.1}% redundant)\n",
        mib(p.bytes_up),
        mib(p.bytes_down),
        p.cell_updates as f64,
        (p.cell_updates as f64 / useful - 1.0).max(0.0) * 100.0
    );
    if let Some(sp) = speeds {
        s += &format!(
            "measured   upload {:.2} GB/s, download {:.2} GB/s, kernel {:.2} GCells/s\n",
            sp.upload_bytes_per_s / 1e9,
            sp.download_bytes_per_s / 1e9,
            sp.cells_per_s / 1e9
        );
    }
    s += &format!("predicted  {:.3} s\n", p.predicted_s);
    s
}
