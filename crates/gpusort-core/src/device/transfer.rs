//! Host <-> GPU transfers: the one place that does staging, mapping and waiting.
//!
//! Data moves through staging buffers in chunks: imported host memory where the device offers it
//! (`device::host_memory`: plain cached pages the copy engine reads and writes), else wgpu's
//! mapped buffers. Copies into and out of staging are split across CPU threads, because mapped
//! memory is often uncached for the CPU and one thread reading it is far slower than the link
//! (about 1.5 GB/s on one thread on the GPU machine).

use rayon::prelude::*;

use crate::device::host_memory::HostBuffer;
use crate::device::Gpu;
use crate::error::{Error, Result};

/// Bytes per staging chunk: large enough to amortise a submit, small enough to stay cheap on
/// software adapters.
pub const CHUNK_BYTES: u64 = 64 << 20;
/// Bytes one CPU thread copies into or out of mapped memory at a time.
const PIECE_BYTES: usize = 1 << 20;

/// Round up to wgpu's copy alignment.
pub fn align4(bytes: u64) -> u64 {
    align_to(bytes, 4)
}

/// Round `bytes` up to a multiple of `to`.
pub fn align_to(bytes: u64, to: u64) -> u64 {
    bytes.div_ceil(to) * to
}

/// The size a buffer of at least `bytes` is made with: whole vec4s, so any buffer can be bound
/// as `array<vec4<u32>>`, and never zero, since wgpu rejects empty bindings.
pub fn buffer_size(bytes: u64) -> u64 {
    align_to(bytes, 16).max(16)
}

/// A storage buffer of at least `bytes` ([`buffer_size`]).
pub fn storage_buffer(gpu: &Gpu, label: &str, bytes: u64) -> Result<wgpu::Buffer> {
    buffer(gpu, label, bytes, wgpu::BufferUsages::empty())
}

/// A storage buffer of at least `bytes` that indirect dispatches can also read their sizes from.
pub fn indirect_buffer(gpu: &Gpu, label: &str, bytes: u64) -> Result<wgpu::Buffer> {
    buffer(gpu, label, bytes, wgpu::BufferUsages::INDIRECT)
}

fn buffer(gpu: &Gpu, label: &str, bytes: u64, extra: wgpu::BufferUsages) -> Result<wgpu::Buffer> {
    let size = buffer_size(bytes);
    if size > gpu.limits.max_buffer_size {
        return Err(Error::TooLarge(format!(
            "{label} needs {size} bytes but one buffer holds at most {} on {}",
            gpu.limits.max_buffer_size, gpu.adapter.name
        )));
    }
    gpu.checked(|| {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST
                | extra,
            mapped_at_creation: false,
        })
    })
}

/// A uniform buffer holding `bytes` (small read-only tables).
pub fn uniform_buffer(gpu: &Gpu, label: &str, bytes: &[u8]) -> Result<wgpu::Buffer> {
    if bytes.len() as u64 > gpu.limits.max_uniform_buffer_binding_size {
        return Err(Error::InvalidInput(format!(
            "{label}: {} bytes exceed the largest uniform binding ({} bytes) on {}",
            bytes.len(),
            gpu.limits.max_uniform_buffer_binding_size,
            gpu.adapter.name
        )));
    }
    let buf = gpu.checked(|| {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.len() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    })?;
    gpu.queue.write_buffer(&buf, 0, bytes);
    Ok(buf)
}

/// Pieces of `len` bytes starting at buffer byte `offset`, cut at multiples of the piece size
/// so every piece but the first starts map-aligned: (buffer start, range within the data).
fn pieces(offset: u64, len: usize) -> Vec<(u64, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < len {
        let start = offset + at as u64;
        let next = (start / PIECE_BYTES as u64 + 1) * PIECE_BYTES as u64;
        let n = ((next - start) as usize).min(len - at);
        out.push((start, at..at + n));
        at += n;
    }
    out
}

/// A mapped range must start at a multiple of 8: map from the aligned start and skip the rest.
fn map_window(start: u64, len: usize) -> (std::ops::Range<u64>, usize) {
    let aligned = start - start % wgpu::MAP_ALIGNMENT;
    let skip = (start - aligned) as usize;
    (aligned..align4(start + len as u64), skip)
}

/// Copy `data` into the mapped buffer `stage` at byte `offset` (a multiple of 4), on all cores
/// (each thread maps its own disjoint range: wgpu's write views are not `Send`).
pub fn write_mapped(stage: &wgpu::Buffer, offset: u64, data: &[u8]) {
    pieces(offset, data.len())
        .into_par_iter()
        .for_each(|(start, range)| {
            let (window, skip) = map_window(start, range.len());
            let mut view = stage
                .get_mapped_range_mut(window)
                .expect("range inside the mapped staging buffer");
            view.slice(skip..skip + range.len())
                .copy_from_slice(&data[range]);
        });
}

/// Copy `out.len()` bytes from the mapped buffer `stage` at byte `offset` (a multiple of 4) into
/// `out`, on all cores (mapped memory is often uncached: one thread reads it far slower than
/// the link).
pub fn read_mapped(stage: &wgpu::Buffer, offset: u64, out: &mut [u8]) {
    let mut parts: Vec<(u64, &mut [u8])> = Vec::new();
    let mut rest = out;
    for (start, range) in pieces(offset, rest.len()) {
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(range.len());
        parts.push((start, piece));
        rest = tail;
    }
    parts.into_par_iter().for_each(|(start, piece)| {
        let (window, skip) = map_window(start, piece.len());
        let view = stage
            .get_mapped_range(window)
            .expect("range inside the mapped staging buffer");
        piece.copy_from_slice(&view[skip..skip + piece.len()]);
    });
}

/// Staging buffers per direction in the ring: while the GPU copies one chunk, the CPU fills (or
/// drains) the next.
pub const RING_SLOTS: usize = 3;

/// One staging buffer of the ring: wgpu's mapped staging memory, or imported host memory where
/// the device offers it (`device::host_memory`).
struct RingSlot {
    backing: Backing,
    size: u64,
    upload: bool,
}

enum Backing {
    Mapped {
        buf: wgpu::Buffer,
        mapped: bool,
        /// A map requested after a submission that uses the buffer.
        pending: Option<(MapResult, Option<wgpu::SubmissionIndex>)>,
    },
    /// Plain host memory the GPU copies directly: no maps; the CPU waits for the submission
    /// that last used it before touching it.
    Host {
        host: HostBuffer,
        pending: Option<wgpu::SubmissionIndex>,
    },
}

impl RingSlot {
    fn new(gpu: &Gpu, size: u64, upload: bool) -> Result<RingSlot> {
        if gpu.host_memory_import() {
            if let Some(host) = gpu
                .host_import
                .as_ref()
                .and_then(|h| h.buffer(&gpu.device, size))
            {
                let size = host.len() as u64;
                return Ok(RingSlot {
                    backing: Backing::Host {
                        host,
                        pending: None,
                    },
                    size,
                    upload,
                });
            }
        }
        let label = if upload {
            "ring upload"
        } else {
            "ring download"
        };
        let buf = mappable_buffer(gpu, label, size, upload)?;
        Ok(RingSlot {
            backing: Backing::Mapped {
                buf,
                mapped: upload,
                pending: None,
            },
            size,
            upload,
        })
    }

    fn is_host(&self) -> bool {
        matches!(self.backing, Backing::Host { .. })
    }

    fn buffer(&self) -> &wgpu::Buffer {
        match &self.backing {
            Backing::Mapped { buf, .. } => buf,
            Backing::Host { host, .. } => host.buffer(),
        }
    }

    /// Wait until the GPU has finished with the buffer (and, mapped, its map has come back).
    fn settle(&mut self, gpu: &Gpu) -> Result<()> {
        match &mut self.backing {
            Backing::Mapped {
                mapped, pending, ..
            } => {
                if let Some((rx, submission)) = pending.take() {
                    wait_map(gpu, submission.as_ref(), rx)?;
                    *mapped = true;
                }
            }
            Backing::Host { pending, .. } => {
                if let Some(submission) = pending.take() {
                    gpu.wait_for(submission)?;
                }
            }
        }
        Ok(())
    }

    /// Ready for the CPU to fill (mapped for writing).
    fn ready_to_fill(&mut self, gpu: &Gpu) -> Result<()> {
        self.settle(gpu)?;
        let size = self.size;
        if let Backing::Mapped {
            buf,
            mapped: false,
            pending,
        } = &mut self.backing
        {
            *pending = Some((request_map(buf, wgpu::MapMode::Write, size), None));
            self.settle(gpu)?;
        }
        Ok(())
    }

    /// Ready for the GPU to copy into (unmapped).
    fn ready_to_receive(&mut self, gpu: &Gpu) -> Result<()> {
        self.settle(gpu)?;
        self.release();
        Ok(())
    }

    /// Copy `data` into the buffer at byte `offset` (a multiple of 4), on all cores.
    fn fill(&mut self, offset: u64, data: &[u8]) {
        match &mut self.backing {
            Backing::Mapped { buf, .. } => Filler::Mapped(buf).fill(offset, data),
            Backing::Host { host, .. } => Filler::Host(host.bytes_mut()).fill(offset, data),
        }
    }

    /// Copy `out.len()` bytes of the buffer from byte `offset` (a multiple of 4), on all cores.
    fn drain(&self, offset: u64, out: &mut [u8]) {
        match &self.backing {
            Backing::Mapped { buf, .. } => Drainer::Mapped(buf).drain(offset, out),
            Backing::Host { host, .. } => Drainer::Host(host.bytes()).drain(offset, out),
        }
    }

    /// `f` of the first `len` bytes where the GPU put them (after `settle`): the imported
    /// memory itself, or the mapped range.
    fn lend_bytes(&self, len: usize, f: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        match &self.backing {
            Backing::Mapped { buf, .. } => f(&buf
                .get_mapped_range(0..len as u64)
                .expect("range inside the mapped staging buffer")),
            Backing::Host { host, .. } => f(&host.bytes()[..len]),
        }
    }

    /// The CPU is done with the buffer: hand it to the GPU (unmap).
    fn release(&mut self) {
        if let Backing::Mapped { buf, mapped, .. } = &mut self.backing {
            if *mapped {
                buf.unmap();
                *mapped = false;
            }
        }
    }

    /// A submission now uses the buffer; the CPU may touch it again once that is done (mapped:
    /// in `mode` for `len` bytes).
    fn submitted(&mut self, submission: wgpu::SubmissionIndex, mode: wgpu::MapMode, len: u64) {
        match &mut self.backing {
            Backing::Mapped { buf, pending, .. } => {
                *pending = Some((request_map(buf, mode, len), Some(submission)));
            }
            Backing::Host { pending, .. } => *pending = Some(submission),
        }
    }
}

/// `dst.copy_from_slice(src)` in pieces on all cores.
fn par_copy(dst: &mut [u8], src: &[u8]) {
    dst.par_chunks_mut(PIECE_BYTES)
        .zip(src.par_chunks(PIECE_BYTES))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// The staging ring the device keeps for its whole life: up to [`RING_SLOTS`] buffers each way,
/// created on first use, re-created only to grow past the largest chunk asked of them (never per
/// call). Every host<->GPU copy of the library goes through it. Imported host memory serves
/// both ways, so there the downloads take the uploads' buffers (`up`): a process that uploads
/// and downloads imports one set, since importing is what a one-shot command pays most for.
#[derive(Default)]
pub(crate) struct Ring {
    up: Vec<RingSlot>,
    down: Vec<RingSlot>,
    /// Streamed jobs' staging slots, kept for the next job: importing or mapping a fresh one
    /// costs about half a second a GiB, more than the chunks it stages (see
    /// [`StagingSlot::lend`]).
    lent: Vec<StagingSlot>,
}

/// Staging slots the device keeps between streamed jobs (two: what one job uses).
const KEPT_STAGING_SLOTS: usize = 2;

impl Ring {
    /// Slot `i % RING_SLOTS` of one direction, holding at least `size` bytes.
    fn slot(&mut self, gpu: &Gpu, i: usize, size: u64, upload: bool) -> Result<&mut RingSlot> {
        let shared = gpu.host_memory_import() && self.up.iter().all(RingSlot::is_host);
        let slots = if upload || shared {
            &mut self.up
        } else {
            &mut self.down
        };
        let k = i % RING_SLOTS;
        if k == slots.len() {
            slots.push(RingSlot::new(gpu, size, upload)?);
        } else if slots[k].size < size || (!slots[k].is_host() && slots[k].upload != upload) {
            // too small, or mapped for the other direction (an import that failed)
            slots[k].settle(gpu)?;
            slots[k] = RingSlot::new(gpu, size, upload)?;
        }
        Ok(&mut slots[k])
    }
}

/// Whether the staging ring's buffers (made by the first transfer) are all in imported host
/// memory ([`Gpu::host_memory_import`]); false before any transfer and on the mapped path.
pub fn ring_in_host_memory(gpu: &Gpu) -> bool {
    let ring = gpu.staging.lock().unwrap_or_else(|p| p.into_inner());
    let mut slots = ring.up.iter().chain(&ring.down).peekable();
    slots.peek().is_some() && slots.all(|s| matches!(s.backing, Backing::Host { .. }))
}

/// A [`PinnedBuffer`](super::PinnedBuffer)'s transfers, for measuring them against the staging
/// ring: makes one of `bytes` (timed: what importing memory costs per call), fills it, then
/// times one upload into `dst` and one download back (the copy engine alone, no CPU copy) and
/// checks the round trip. Returns seconds (import, host -> GPU, GPU -> host); None where the
/// device cannot import host memory.
pub fn pinned_copy_seconds(
    gpu: &Gpu,
    dst: &wgpu::Buffer,
    bytes: u64,
) -> Result<Option<(f64, f64, f64)>> {
    if !gpu.host_memory_import() {
        return Ok(None);
    }
    let bytes = align4(bytes.min(dst.size())) as usize;
    let t = std::time::Instant::now();
    let mut host = super::PinnedBuffer::new(gpu, bytes)?;
    let import_s = t.elapsed().as_secs_f64();
    if !host.is_imported() {
        return Ok(None);
    }
    for (i, w) in host.as_mut_slice::<u32>().iter_mut().enumerate() {
        *w = (i as u32).wrapping_mul(2654435761);
    }
    gpu.wait()?;
    let t = std::time::Instant::now();
    host.upload_to(gpu, 0..bytes, dst, 0)?;
    let up = t.elapsed().as_secs_f64();
    host.bytes_mut().fill(0);
    let t = std::time::Instant::now();
    host.download_from(gpu, dst, 0, 0..bytes)?;
    let down = t.elapsed().as_secs_f64();
    let intact = host
        .as_slice::<u32>()
        .iter()
        .enumerate()
        .all(|(i, &w)| w == (i as u32).wrapping_mul(2654435761));
    if !intact {
        return Err(Error::InvalidInput(
            "a pinned buffer's round trip came back different".into(),
        ));
    }
    Ok(Some((import_s, up, down)))
}

/// Copy `data` into `dst` at byte `offset`. `data.len()` and `offset` must be multiples of 4.
pub fn upload(gpu: &Gpu, dst: &wgpu::Buffer, offset: u64, data: &[u8]) -> Result<()> {
    upload_chunked(gpu, dst, offset, data, CHUNK_BYTES)
}

/// [`upload`] through staging chunks of `chunk` bytes (for measuring). Chunk i is written into
/// ring slot i % RING_SLOTS on all cores while the GPU still copies the chunks before it; a slot
/// is only waited for when it comes round again. The copies are queued in order before any
/// later submission, so the caller need not wait for them.
pub fn upload_chunked(
    gpu: &Gpu,
    dst: &wgpu::Buffer,
    offset: u64,
    data: &[u8],
    chunk: u64,
) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    debug_assert!(data.len().is_multiple_of(4) && offset.is_multiple_of(4));
    let chunk = align4(chunk.min(data.len() as u64));
    let mut ring = gpu.staging.lock().unwrap_or_else(|p| p.into_inner());
    for (i, part) in data.chunks(chunk as usize).enumerate() {
        let len = part.len() as u64;
        let slot = ring.slot(gpu, i, chunk, true)?;
        slot.ready_to_fill(gpu)?;
        slot.fill(0, part);
        slot.release();
        let mut enc = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("upload"),
            });
        enc.copy_buffer_to_buffer(slot.buffer(), 0, dst, offset + i as u64 * chunk, len);
        let submission = gpu.queue.submit([enc.finish()]);
        let size = slot.size;
        slot.submitted(submission, wgpu::MapMode::Write, size);
    }
    Ok(())
}

/// Copy `out.len()` bytes of `src` starting at byte `offset` into `out` (multiples of 4).
pub fn download(gpu: &Gpu, src: &wgpu::Buffer, offset: u64, out: &mut [u8]) -> Result<()> {
    download_chunked(gpu, src, offset, out, CHUNK_BYTES)
}

/// [`download`] through staging chunks of `chunk` bytes (for measuring). The copies of the first
/// RING_SLOTS chunks are queued at once; each time the CPU has drained a slot (on all cores),
/// the copy of the chunk that slot takes next is queued, so the GPU copies while the CPU drains.
pub fn download_chunked(
    gpu: &Gpu,
    src: &wgpu::Buffer,
    offset: u64,
    out: &mut [u8],
    chunk: u64,
) -> Result<()> {
    download_each(gpu, src, offset, out, chunk, &mut |_, _| Ok(()))
}

/// [`download_chunked`], handing each chunk to `landed` (its offset in `out`, its bytes) as soon
/// as it is in `out`, so the caller can write it out while later chunks still download.
pub fn download_each<'a>(
    gpu: &Gpu,
    src: &wgpu::Buffer,
    offset: u64,
    out: &'a mut [u8],
    chunk: u64,
    landed: &mut dyn FnMut(usize, &'a [u8]) -> Result<()>,
) -> Result<()> {
    let len = out.len() as u64;
    let mut rest: &'a mut [u8] = out;
    download_through(gpu, src, offset, len, chunk, &mut |at, bytes| {
        // chunks land in order, one each: the next piece of `out` is this chunk's
        let (part, tail) = std::mem::take(&mut rest).split_at_mut(bytes.len());
        rest = tail;
        par_copy(part, bytes);
        landed(at, part)
    })
}

/// Hand `len` bytes of `src` from byte `offset` to `landed(at, bytes)` chunk by chunk (`at`
/// counted from `offset`), straight out of the staging memory: for callers that pass the bytes
/// on (into a file) rather than keep them, so no host buffer the size of the result is filled
/// (its page faults and copy cost more than the link). `landed` runs while the GPU copies the
/// next chunks into the other slots; a slot is reused only after `landed` returns.
pub fn download_through(
    gpu: &Gpu,
    src: &wgpu::Buffer,
    offset: u64,
    len: u64,
    chunk: u64,
    landed: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    debug_assert!(len.is_multiple_of(4) && offset.is_multiple_of(4));
    let chunk = align4(chunk.min(len));
    let chunks = len.div_ceil(chunk) as usize;
    let part = |i: usize| (i as u64 * chunk, chunk.min(len - i as u64 * chunk));
    let mut ring = gpu.staging.lock().unwrap_or_else(|p| p.into_inner());
    let queue_copy = |ring: &mut Ring, i: usize| -> Result<()> {
        let (at, n) = part(i);
        let slot = ring.slot(gpu, i, chunk, false)?;
        slot.ready_to_receive(gpu)?;
        let mut enc = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("download"),
            });
        enc.copy_buffer_to_buffer(src, offset + at, slot.buffer(), 0, n);
        let submission = gpu.queue.submit([enc.finish()]);
        slot.submitted(submission, wgpu::MapMode::Read, n);
        Ok(())
    };
    for i in 0..chunks.min(RING_SLOTS) {
        queue_copy(&mut ring, i)?;
    }
    for i in 0..chunks {
        let (at, n) = part(i);
        let slot = ring.slot(gpu, i, chunk, false)?;
        slot.settle(gpu)?;
        slot.lend_bytes(n as usize, &mut |bytes| landed(at as usize, bytes))?;
        slot.release();
        if i + RING_SLOTS < chunks {
            queue_copy(&mut ring, i + RING_SLOTS)?;
        }
    }
    Ok(())
}

/// Upload a slice of plain values into a new storage buffer.
pub fn buffer_from<T: bytemuck::Pod>(gpu: &Gpu, label: &str, data: &[T]) -> Result<wgpu::Buffer> {
    let bytes: &[u8] = bytemuck::cast_slice(data);
    let buf = storage_buffer(gpu, label, bytes.len() as u64)?;
    upload(gpu, &buf, 0, bytes)?;
    Ok(buf)
}

/// Read `len` values of `T` from the start of `src`.
pub fn read_vec<T: bytemuck::Pod>(gpu: &Gpu, src: &wgpu::Buffer, len: usize) -> Result<Vec<T>> {
    let mut out = zeroed_vec(len);
    download(gpu, src, 0, bytemuck::cast_slice_mut(&mut out))?;
    Ok(out)
}

/// A zeroed vector of `len` values for results to land in: fresh pages from the system, on
/// Linux advised to be huge pages, so that writing a GiB of results takes 512 page faults
/// rather than 262144 (the faults, not the copies, bounded downloads into new vectors).
pub fn zeroed_vec<T: bytemuck::Zeroable + Clone>(len: usize) -> Vec<T> {
    let v: Vec<T> = bytemuck::zeroed_vec(len);
    super::pages::advise_huge_range(v.as_ptr().cast(), std::mem::size_of_val(v.as_slice()));
    v
}

/// Ask the system to back the not yet touched pages of `bytes` (a fresh allocation, such as an
/// Arrow buffer about to be filled) with huge pages, as [`zeroed_vec`] does; changes no contents.
pub fn advise_huge_pages(bytes: &[u8]) {
    super::pages::advise_huge_range(bytes.as_ptr(), bytes.len());
}

pub type MapResult = std::sync::mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>;

/// One slot of a streamed job's staging: an upload and a download buffer (imported host memory
/// where the device offers it, else mapped buffers), made once and reused for every chunk. The
/// cycle: `wait_upload`, `fill`, `done_filling`; record copies from `upload_buffer` and into
/// `download_buffer`; submit and call `submitted`; later `wait_download`, `drain`,
/// `done_draining`. Keeping two or more slots lets the CPU fill and drain one while the GPU works
/// on another.
pub struct StagingSlot {
    up: RingSlot,
    down: RingSlot,
}

/// Wait for `submission` (or all work), then for the map it was to bring back.
fn wait_map(gpu: &Gpu, submission: Option<&wgpu::SubmissionIndex>, rx: MapResult) -> Result<()> {
    match submission {
        Some(idx) => gpu.wait_for(idx.clone())?,
        None => gpu.wait()?,
    }
    match rx.recv_timeout(crate::device::GPU_WAIT_TIMEOUT) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Error::Map(e.to_string())),
        Err(_) => Err(Error::Timeout(crate::device::GPU_WAIT_TIMEOUT)),
    }
}

fn request_map(buffer: &wgpu::Buffer, mode: wgpu::MapMode, len: u64) -> MapResult {
    let (tx, rx) = std::sync::mpsc::channel();
    buffer.map_async(mode, 0..len.max(4), move |r| {
        let _ = tx.send(r);
    });
    rx
}

/// A buffer the host maps: `upload` (`MAP_WRITE | COPY_SRC`, mapped from the start) for the GPU
/// to copy from, else (`MAP_READ | COPY_DST`) for the GPU to copy results into.
fn mappable_buffer(gpu: &Gpu, label: &str, bytes: u64, upload: bool) -> Result<wgpu::Buffer> {
    let usage = if upload {
        wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC
    } else {
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST
    };
    gpu.checked(|| {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: align_to(bytes.max(4), wgpu::COPY_BUFFER_ALIGNMENT),
            usage,
            mapped_at_creation: upload,
        })
    })
}

/// A buffer the GPU copies results into for the host to read (`MAP_READ | COPY_DST`).
pub fn readback_buffer(gpu: &Gpu, bytes: u64) -> Result<wgpu::Buffer> {
    mappable_buffer(gpu, "readback", bytes, false)
}

/// Ask for `buffer` (a [`readback_buffer`]) mapped for reading once the submissions that write
/// it are done; call after submitting them, then [`finish_read`].
pub fn request_read(buffer: &wgpu::Buffer) -> MapResult {
    request_map(buffer, wgpu::MapMode::Read, buffer.size())
}

/// After waiting for the submission that fills `buffer`: copy its first `out.len()` bytes into
/// `out` and unmap it for the next use.
pub fn finish_read(
    gpu: &Gpu,
    buffer: &wgpu::Buffer,
    ready: MapResult,
    out: &mut [u8],
) -> Result<()> {
    wait_mapped(gpu, ready)?;
    read_mapped(buffer, 0, out);
    buffer.unmap();
    Ok(())
}

/// Wait until a map asked for by [`request_read`] or [`request_write`] is done: polled, not
/// waited on, so later submissions may still run (that is the point).
pub fn wait_mapped(gpu: &Gpu, ready: MapResult) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        match ready.try_recv() {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => return Err(Error::Map(e.to_string())),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                return Err(Error::Map("the map request was dropped".into()))
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                if start.elapsed() > crate::device::GPU_WAIT_TIMEOUT {
                    return Err(Error::Timeout(crate::device::GPU_WAIT_TIMEOUT));
                }
                let _ = gpu.device.poll(wgpu::PollType::Poll);
                std::thread::yield_now();
            }
        }
    }
}

/// A buffer the host fills for the GPU to copy from (`MAP_WRITE | COPY_SRC`), mapped from the
/// start; after each copy from it is submitted, [`request_write`] maps it again.
pub fn upload_stage(gpu: &Gpu, bytes: u64) -> Result<wgpu::Buffer> {
    mappable_buffer(gpu, "upload stage", bytes, true)
}

/// Ask for `buffer` (an [`upload_stage`]) mapped for writing once the submissions that read it
/// are done; [`wait_mapped`] before filling it.
pub fn request_write(buffer: &wgpu::Buffer) -> MapResult {
    request_map(buffer, wgpu::MapMode::Write, buffer.size())
}

/// Copy `len` bytes from the mapped buffer `src` at byte `from` into the mapped buffer `dst` at
/// byte `to` (multiples of 4), on all cores, with no copy in between: the two may belong to
/// different devices (one device's readback straight into another's upload staging).
pub fn copy_mapped(src: &wgpu::Buffer, from: u64, dst: &wgpu::Buffer, to: u64, len: usize) {
    // pieces cut on dst's map alignment (its views must not overlap; src's read views may)
    pieces(to, len).into_par_iter().for_each(|(start, range)| {
        let (window, skip) = map_window(start, range.len());
        let mut out = dst
            .get_mapped_range_mut(window)
            .expect("range inside the mapped destination");
        let (src_window, src_skip) = map_window(from + range.start as u64, range.len());
        let view = src
            .get_mapped_range(src_window)
            .expect("range inside the mapped source");
        out.slice(skip..skip + range.len())
            .copy_from_slice(&view[src_skip..src_skip + range.len()]);
    });
}

impl StagingSlot {
    /// A slot for uploads of up to `up_bytes` and downloads of up to `down_bytes`; the upload
    /// side starts ready to fill.
    pub fn new(gpu: &Gpu, up_bytes: u64, down_bytes: u64) -> Result<StagingSlot> {
        Ok(StagingSlot {
            up: RingSlot::new(gpu, align4(up_bytes.max(4)), true)?,
            down: RingSlot::new(gpu, align4(down_bytes.max(4)), false)?,
        })
    }

    /// Like [`StagingSlot::new`], but reusing a slot an earlier job gave back
    /// ([`StagingSlot::give_back`]) where one is large enough, so that repeated calls (a
    /// Python loop of scans) do not pay for new staging memory each time.
    pub fn lend(gpu: &Gpu, up_bytes: u64, down_bytes: u64) -> Result<StagingSlot> {
        let kept = {
            let mut ring = gpu.staging.lock().unwrap_or_else(|p| p.into_inner());
            let fits = ring
                .lent
                .iter()
                .position(|s| s.up.size >= up_bytes && s.down.size >= down_bytes);
            fits.map(|i| ring.lent.swap_remove(i))
        };
        match kept {
            Some(slot) => Ok(slot),
            None => StagingSlot::new(gpu, up_bytes, down_bytes),
        }
    }

    /// Keep this slot for the next job (the device keeps the two most recent). Give back only a
    /// slot whose job ran to the end: its download side drained, its upload side free or
    /// waiting on a submission.
    pub fn give_back(self, gpu: &Gpu) {
        let mut ring = gpu.staging.lock().unwrap_or_else(|p| p.into_inner());
        // slots made before the staging path changed (`Gpu::set_host_memory_import`) are dropped
        if self.up.is_host() != gpu.host_memory_import() {
            return;
        }
        ring.lent.push(self);
        if ring.lent.len() > KEPT_STAGING_SLOTS {
            ring.lent.remove(0);
        }
    }

    pub fn upload_buffer(&self) -> &wgpu::Buffer {
        self.up.buffer()
    }

    pub fn download_buffer(&self) -> &wgpu::Buffer {
        self.down.buffer()
    }

    /// Wait until the GPU is done with both sides (the last chunk's results are in the download
    /// side, the upload side may be filled again).
    pub fn wait(&mut self, gpu: &Gpu) -> Result<()> {
        self.down.settle(gpu)?;
        self.up.ready_to_fill(gpu)
    }

    /// The two sides at once, after [`StagingSlot::wait`]: the CPU may fill the upload side
    /// while it drains the download side (they are separate buffers).
    pub fn sides(&mut self) -> (Filler<'_>, Drainer<'_>) {
        let filler = match &mut self.up.backing {
            Backing::Mapped { buf, .. } => Filler::Mapped(buf),
            Backing::Host { host, .. } => Filler::Host(host.bytes_mut()),
        };
        let drainer = match &self.down.backing {
            Backing::Mapped { buf, .. } => Drainer::Mapped(buf),
            Backing::Host { host, .. } => Drainer::Host(host.bytes()),
        };
        (filler, drainer)
    }

    /// Wait until the upload side may be filled again (the GPU has read the last chunk).
    pub fn wait_upload(&mut self, gpu: &Gpu) -> Result<()> {
        self.up.ready_to_fill(gpu)
    }

    /// Copy `data` into the upload side at byte `offset`, on all cores.
    pub fn fill(&mut self, offset: u64, data: &[u8]) {
        self.up.fill(offset, data);
    }

    /// Hand the upload side to the GPU.
    pub fn done_filling(&mut self) {
        self.up.release();
    }

    /// After submitting the copies that use this slot: the CPU may use both sides again when the
    /// GPU is done (the download side for `down_len` bytes).
    pub fn submitted(&mut self, submission: wgpu::SubmissionIndex, down_len: u64) {
        let up_len = self.up.size;
        self.up
            .submitted(submission.clone(), wgpu::MapMode::Write, up_len);
        self.down
            .submitted(submission, wgpu::MapMode::Read, down_len);
    }

    /// Wait until the download side holds the GPU's results.
    pub fn wait_download(&mut self, gpu: &Gpu) -> Result<()> {
        self.down.settle(gpu)
    }

    /// Copy `out.len()` bytes from the download side at byte `offset`, on all cores.
    pub fn drain(&self, offset: u64, out: &mut [u8]) {
        self.down.drain(offset, out);
    }

    /// Give the download side back for the next chunk.
    pub fn done_draining(&mut self) {
        self.down.release();
    }
}

/// A slot's upload side, lent for filling ([`StagingSlot::sides`]). Only the buffer or the
/// bytes travel (not the slot, whose pending map is not shareable between threads).
pub enum Filler<'a> {
    Mapped(&'a wgpu::Buffer),
    Host(&'a mut [u8]),
}

impl Filler<'_> {
    /// Copy `data` into the upload side at byte `offset` (a multiple of 4), on all cores.
    pub fn fill(&mut self, offset: u64, data: &[u8]) {
        match self {
            Filler::Mapped(buf) => write_mapped(buf, offset, data),
            Filler::Host(bytes) => {
                let at = offset as usize;
                par_copy(&mut bytes[at..at + data.len()], data)
            }
        }
    }
}

/// A slot's download side, lent for draining ([`StagingSlot::sides`]).
pub enum Drainer<'a> {
    Mapped(&'a wgpu::Buffer),
    Host(&'a [u8]),
}

impl Drainer<'_> {
    /// Copy `out.len()` bytes from the download side at byte `offset`, on all cores.
    pub fn drain(&self, offset: u64, out: &mut [u8]) {
        match self {
            Drainer::Mapped(buf) => read_mapped(buf, offset, out),
            Drainer::Host(bytes) => {
                let at = offset as usize;
                par_copy(out, &bytes[at..at + out.len()])
            }
        }
    }
}
