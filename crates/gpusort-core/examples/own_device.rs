//! A program that owns its wgpu device sorts, scans and compacts its own buffers through
//! gpusort, inside one command encoder of its own, then checks the results on the CPU.
//!
//! Run: `cargo run -p gpusort-core --example own_device`

use gpusort_core::scan::{CompactJob, Predicate, ScanJob, ScanOp};
use gpusort_core::wgpu::{self, util::DeviceExt};
use gpusort_core::{Gpu, KeyType, Scanner, SortJob, SortOrder, Sorter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The caller's device: gpusort adapts to the limits and features it was created with.
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::PRIMARY;
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&Default::default()))?;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("my renderer"),
        // the adapter's limits allow bindings past wgpu's default 128 MiB; subgroups make the
        // scans and the radix sort faster where the adapter has them
        required_limits: adapter.limits(),
        required_features: adapter.features() & wgpu::Features::SUBGROUP,
        ..Default::default()
    }))?;
    let gpu = Gpu::from_device(device.clone(), queue.clone(), Some(&adapter.get_info()))?;
    println!("gpusort on {} ({})", gpu.adapter.name, gpu.adapter.backend);

    let n: u32 = 100_000;
    let keys: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761) >> 8).collect();
    let usage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    let make = |label, contents: &[u8]| {
        device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents,
            usage,
        })
    };
    let key_buf = make("keys", bytemuck::cast_slice(&keys));
    let sums = make("prefix sums", &vec![0u8; 4 * n as usize]);
    let kept = make("kept", &vec![0u8; 4 * n as usize]);
    let counts = make("counts", &[0u8; 16]);

    let sorter = Sorter::new(&gpu)?;
    let scanner = Scanner::new(&gpu)?;
    let mut encoder = device.create_command_encoder(&Default::default());
    // 1. sort the keys in place
    sorter.record(
        &gpu,
        &mut encoder,
        &SortJob {
            key_type: KeyType::U32,
            order: SortOrder::default(),
            keys: &key_buf,
            n,
            values: None,
            permutation: None,
        },
    )?;
    // 2. an inclusive max-scan of the sorted keys (which is the keys again: a check)
    scanner.record_scan(
        &gpu,
        &mut encoder,
        &ScanJob {
            src: &key_buf,
            dst: &sums,
            n,
            key_type: KeyType::U32,
            op: ScanOp::Max,
            inclusive: true,
            carry: None,
        },
    )?;
    // 3. keep the keys below 2^20, in order; their count stays on the GPU in counts[0]
    scanner.record_compact(
        &gpu,
        &mut encoder,
        &CompactJob {
            src: &key_buf,
            dst: &kept,
            counts: &counts,
            n,
            payload: None,
            predicate: Predicate::Below(1u32 << 20),
            keep: true,
            base_slot: None,
            count_slot: 0,
        },
    )?;
    queue.submit([encoder.finish()]);

    let sorted: Vec<u32> = read(&device, &queue, &key_buf, n as usize);
    let scanned: Vec<u32> = read(&device, &queue, &sums, n as usize);
    let count = read::<u32>(&device, &queue, &counts, 1)[0] as usize;
    let small: Vec<u32> = read(&device, &queue, &kept, count);

    let mut want = keys.clone();
    want.sort_unstable();
    assert_eq!(sorted, want, "sort");
    assert_eq!(scanned, want, "max-scan of sorted keys");
    let want_small: Vec<u32> = want.iter().copied().filter(|&k| k < 1 << 20).collect();
    assert_eq!(small, want_small, "compaction");
    println!("sorted {n} keys, scanned them, kept {count} below 2^20: all match the CPU");
    Ok(())
}

/// The caller's own read-back: a copy into a mappable buffer.
fn read<T: bytemuck::Pod>(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    src: &wgpu::Buffer,
    len: usize,
) -> Vec<T> {
    let bytes = (len * size_of::<T>()).next_multiple_of(4).max(4) as u64;
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("read back"),
        size: bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(src, 0, &staging, 0, bytes);
    queue.submit([encoder.finish()]);
    staging
        .slice(..)
        .map_async(wgpu::MapMode::Read, |r| r.expect("map"));
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    let data = staging.slice(..).get_mapped_range().expect("mapped");
    bytemuck::cast_slice(&data)[..len].to_vec()
}
