//! A stencil on a grid that lives on the GPU: eight steps of a radius-1 star (a 5-point
//! smoothing) recorded into one encoder, checked against the CPU twin.
//!
//! Run: `cargo run -p gpusort-core --example stencil_grid`

use gpusort_core::device::transfer;
use gpusort_core::stencil::{Boundary, GridShape, Stencil, StencilJob, StencilKernel};
use gpusort_core::{reference, Gpu, GpuOptions, KeyType};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::new(&GpuOptions::default())?;
    let (rows, cols) = (300usize, 500usize);
    let grid: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let job = StencilJob {
        shape: GridShape::new(&[rows, cols])?,
        stencil: Stencil::star(2, 1)?,
        boundary: Boundary::Reflect,
        cval: 0.0,
        steps: 8,
        dtype: KeyType::F32,
    };
    let kernel = StencilKernel::new(&gpu, &job)?;
    // the grid and a second buffer of its size, as a simulation would keep them
    let a = transfer::buffer_from(&gpu, "grid", &grid)?;
    let b = transfer::storage_buffer(&gpu, "grid'", a.size())?;
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    let result = kernel.record_steps(&gpu, &mut encoder, &a, &b, job.steps)?;
    gpu.queue.submit([encoder.finish()]);
    gpu.wait()?;
    let got: Vec<f32> = transfer::read_vec(&gpu, result, grid.len())?;

    let want = reference::stencil::run(
        &grid,
        job.shape,
        &job.stencil,
        job.boundary,
        job.cval,
        job.steps,
    );
    // bit-identical to the twin: the same taps summed in the same order
    assert!(
        got.iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits()),
        "stencil differs from its twin"
    );
    println!(
        "{} steps on a {rows}x{cols} grid on {}: identical to the CPU twin",
        job.steps, gpu.adapter.name
    );
    Ok(())
}
