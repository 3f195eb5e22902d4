//! The splat renderer's frame: cull splats on the GPU (keep those nearer than the far plane,
//! with their ids), then sort the visible ones by depth with their ids, the visible count never
//! leaving the GPU. Only the final check reads anything back.
//!
//! Run: `cargo run -p gpusort-core --example splat_sort`

use gpusort_core::scan::{CompactJob, Predicate};
use gpusort_core::wgpu::{self, util::DeviceExt};
use gpusort_core::{Algorithm, Gpu, GpuOptions, KeyType, Scanner, SortJob, SortOrder, Sorter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // gpusort's own device here; a renderer passes its own (`Gpu::from_device`)
    let gpu = Gpu::new(&GpuOptions::default())?;
    let device = &gpu.device;
    let splats: u32 = 200_000;
    let far = 0.75f32;
    // view-space depths in [0, 1) and each splat's id
    let depths: Vec<f32> = (0..splats)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 8) as f32 / (1u32 << 24) as f32)
        .collect();
    let ids: Vec<u32> = (0..splats).collect();
    let usage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    let make = |label, contents: &[u8]| {
        device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents,
            usage,
        })
    };
    let depth_buf = make("depths", bytemuck::cast_slice(&depths));
    let id_buf = make("ids", bytemuck::cast_slice(&ids));
    let visible_depths = make("visible depths", &vec![0u8; 4 * splats as usize]);
    let visible_ids = make("visible ids", &vec![0u8; 4 * splats as usize]);
    let counts = make("visible count", &[0u8; 16]);

    let scanner = Scanner::new(&gpu)?;
    // a GPU-resident count needs the radix sort
    let sorter = Sorter::new(&gpu)?.with_algorithm(Algorithm::Radix);
    let mut encoder = device.create_command_encoder(&Default::default());
    // cull: keep depth < far with the ids, in order; the count lands in counts[0]
    scanner.record_compact(
        &gpu,
        &mut encoder,
        &CompactJob {
            src: &depth_buf,
            dst: &visible_depths,
            counts: &counts,
            n: splats,
            payload: Some((&id_buf, &visible_ids)),
            predicate: Predicate::Below(far),
            keep: true,
            base_slot: None,
            count_slot: 0,
        },
    )?;
    // sort back to front (descending depth) the first counts[0] visible splats, ids along
    sorter.record_counted(
        &gpu,
        &mut encoder,
        &SortJob {
            key_type: KeyType::F32,
            order: SortOrder {
                descending: true,
                segment_size: None,
            },
            keys: &visible_depths,
            n: splats,
            values: Some(&visible_ids),
            permutation: None,
        },
        &counts,
    )?;
    gpu.queue.submit([encoder.finish()]);
    gpu.wait()?;

    // the check: the same frame on the CPU
    use gpusort_core::device::transfer::read_vec;
    let count = read_vec::<u32>(&gpu, &counts, 1)?[0] as usize;
    let got_ids: Vec<u32> = read_vec(&gpu, &visible_ids, count)?;
    let mut want: Vec<(f32, u32)> = depths
        .iter()
        .copied()
        .zip(ids)
        .filter(|&(d, _)| d < far)
        .collect();
    // stable: equal depths keep their id order
    want.sort_by(|a, b| b.0.total_cmp(&a.0));
    let want_ids: Vec<u32> = want.iter().map(|&(_, i)| i).collect();
    assert_eq!(count, want.len(), "visible count");
    assert_eq!(got_ids, want_ids, "draw order");
    println!("{count} of {splats} splats visible, drawn back to front: matches the CPU");
    Ok(())
}
