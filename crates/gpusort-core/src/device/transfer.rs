//! Host <-> GPU transfers: the one place that does staging, mapping and waiting.
//!
//! Data moves through mapped staging buffers in chunks. Copies into and out of mapped memory are
//! split across CPU threads, because mapped memory is often uncached for the CPU and one thread
//! reading it is far slower than the link (about 1.5 GB/s on one thread on the GPU machine).

use rayon::prelude::*;

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

/// One staging buffer of the ring and its map state.
struct RingSlot {
    buf: wgpu::Buffer,
    size: u64,
    upload: bool,
    mapped: bool,
    /// A map requested after a submission that uses the buffer.
    pending: Option<(MapResult, Option<wgpu::SubmissionIndex>)>,
}

impl RingSlot {
    fn new(gpu: &Gpu, size: u64, upload: bool) -> Result<RingSlot> {
        let usage = if upload {
            wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC
        } else {
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST
        };
        let buf = gpu.checked(|| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(if upload {
                    "ring upload"
                } else {
                    "ring download"
                }),
                size,
                usage,
                mapped_at_creation: upload,
            })
        })?;
        Ok(RingSlot {
            buf,
            size,
            upload,
            mapped: upload,
            pending: None,
        })
    }

    /// Wait for a requested map (the GPU has finished with the buffer).
    fn settle(&mut self, gpu: &Gpu) -> Result<()> {
        if let Some((rx, submission)) = self.pending.take() {
            StagingSlot::wait(gpu, submission.as_ref(), rx)?;
            self.mapped = true;
        }
        Ok(())
    }

    /// Ready for the CPU to fill: mapped for writing.
    fn ready_to_fill(&mut self, gpu: &Gpu) -> Result<()> {
        self.settle(gpu)?;
        if !self.mapped {
            self.pending = Some((
                request_map(&self.buf, wgpu::MapMode::Write, self.size),
                None,
            ));
            self.settle(gpu)?;
        }
        Ok(())
    }

    /// Ready for the GPU to copy into: unmapped.
    fn ready_to_receive(&mut self, gpu: &Gpu) -> Result<()> {
        self.settle(gpu)?;
        if self.mapped {
            self.buf.unmap();
            self.mapped = false;
        }
        Ok(())
    }

    fn unmap(&mut self) {
        self.buf.unmap();
        self.mapped = false;
    }
}

/// The staging ring the device keeps for its whole life: up to [`RING_SLOTS`] buffers each way,
/// created on first use, re-created only to grow past the largest chunk asked of them (never per
/// call). Every host<->GPU copy of the library goes through it.
#[derive(Default)]
pub(crate) struct Ring {
    up: Vec<RingSlot>,
    down: Vec<RingSlot>,
}

impl Ring {
    /// Slot `i % RING_SLOTS` of one direction, holding at least `size` bytes.
    fn slot(&mut self, gpu: &Gpu, i: usize, size: u64, upload: bool) -> Result<&mut RingSlot> {
        let slots = if upload { &mut self.up } else { &mut self.down };
        let k = i % RING_SLOTS;
        if k == slots.len() {
            slots.push(RingSlot::new(gpu, size, upload)?);
        } else if slots[k].size < size {
            slots[k].settle(gpu)?;
            slots[k] = RingSlot::new(gpu, size, upload)?;
        }
        debug_assert_eq!(slots[k].upload, upload);
        Ok(&mut slots[k])
    }
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
        write_mapped(&slot.buf, 0, part);
        slot.unmap();
        let mut enc = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("upload"),
            });
        enc.copy_buffer_to_buffer(&slot.buf, 0, dst, offset + i as u64 * chunk, len);
        let submission = gpu.queue.submit([enc.finish()]);
        slot.pending = Some((
            request_map(&slot.buf, wgpu::MapMode::Write, slot.size),
            Some(submission),
        ));
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
    if out.is_empty() {
        return Ok(());
    }
    debug_assert!(out.len().is_multiple_of(4) && offset.is_multiple_of(4));
    let chunk = align4(chunk.min(out.len() as u64));
    let total = out.len() as u64;
    let chunks = total.div_ceil(chunk) as usize;
    let mut ring = gpu.staging.lock().unwrap_or_else(|p| p.into_inner());
    let queue_copy = |ring: &mut Ring, i: usize| -> Result<()> {
        let at = i as u64 * chunk;
        let len = chunk.min(total - at);
        let slot = ring.slot(gpu, i, chunk, false)?;
        slot.ready_to_receive(gpu)?;
        let mut enc = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("download"),
            });
        enc.copy_buffer_to_buffer(src, offset + at, &slot.buf, 0, len);
        let submission = gpu.queue.submit([enc.finish()]);
        slot.pending = Some((
            request_map(&slot.buf, wgpu::MapMode::Read, len),
            Some(submission),
        ));
        Ok(())
    };
    for i in 0..chunks.min(RING_SLOTS) {
        queue_copy(&mut ring, i)?;
    }
    for (i, part) in out.chunks_mut(chunk as usize).enumerate() {
        let slot = ring.slot(gpu, i, chunk, false)?;
        slot.settle(gpu)?;
        read_mapped(&slot.buf, 0, part);
        slot.unmap();
        if i + RING_SLOTS < chunks {
            queue_copy(&mut ring, i + RING_SLOTS)?;
        }
        landed(i * chunk as usize, part)?;
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
    let mut out = vec![T::zeroed(); len];
    download(gpu, src, 0, bytemuck::cast_slice_mut(&mut out))?;
    Ok(out)
}

type MapResult = std::sync::mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>;

/// One slot of a staging ring: an upload and a download buffer, mapped once and reused for every
/// chunk of a streamed job (never re-created per call). The cycle: `wait_upload`, `fill`,
/// `done_filling`; record copies from `upload_buffer` and into `download_buffer`; submit and call
/// `submitted`; later `wait_download`, `drain`, `done_draining`. Keeping two or more slots lets
/// the CPU fill and drain one while the GPU works on another.
pub struct StagingSlot {
    up: wgpu::Buffer,
    down: wgpu::Buffer,
    up_len: u64,
    up_mapped: Option<MapResult>,
    down_mapped: Option<MapResult>,
    submission: Option<wgpu::SubmissionIndex>,
}

fn request_map(buffer: &wgpu::Buffer, mode: wgpu::MapMode, len: u64) -> MapResult {
    let (tx, rx) = std::sync::mpsc::channel();
    buffer.map_async(mode, 0..len.max(4), move |r| {
        let _ = tx.send(r);
    });
    rx
}

/// A buffer the GPU copies results into for the host to read (`MAP_READ | COPY_DST`).
pub fn readback_buffer(gpu: &Gpu, bytes: u64) -> Result<wgpu::Buffer> {
    gpu.checked(|| {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: align_to(bytes.max(4), wgpu::COPY_BUFFER_ALIGNMENT),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    })
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
    // polled, not waited on: later submissions may still run (that is the point)
    let start = std::time::Instant::now();
    loop {
        match ready.try_recv() {
            Ok(Ok(())) => break,
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
    read_mapped(buffer, 0, out);
    buffer.unmap();
    Ok(())
}

impl StagingSlot {
    /// A slot for uploads of up to `up_bytes` and downloads of up to `down_bytes`; the upload
    /// side starts mapped.
    pub fn new(gpu: &Gpu, up_bytes: u64, down_bytes: u64) -> Result<StagingSlot> {
        let make = |label: &str, size: u64, usage: wgpu::BufferUsages, mapped: bool| {
            gpu.checked(|| {
                gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size: align4(size.max(4)),
                    usage,
                    mapped_at_creation: mapped,
                })
            })
        };
        Ok(StagingSlot {
            up: make(
                "staging upload",
                up_bytes,
                wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                true,
            )?,
            down: make(
                "staging download",
                down_bytes,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                false,
            )?,
            up_len: align4(up_bytes.max(4)),
            up_mapped: None,
            down_mapped: None,
            submission: None,
        })
    }

    pub fn upload_buffer(&self) -> &wgpu::Buffer {
        &self.up
    }

    pub fn download_buffer(&self) -> &wgpu::Buffer {
        &self.down
    }

    fn wait(gpu: &Gpu, submission: Option<&wgpu::SubmissionIndex>, rx: MapResult) -> Result<()> {
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

    /// Wait until the upload side is mapped again (the GPU has read the last chunk).
    pub fn wait_upload(&mut self, gpu: &Gpu) -> Result<()> {
        match self.up_mapped.take() {
            Some(rx) => StagingSlot::wait(gpu, self.submission.as_ref(), rx),
            None => Ok(()),
        }
    }

    /// Copy `data` into the upload side at byte `offset`, on all cores.
    pub fn fill(&self, offset: u64, data: &[u8]) {
        write_mapped(&self.up, offset, data);
    }

    /// Hand the upload side to the GPU.
    pub fn done_filling(&mut self) {
        self.up.unmap();
    }

    /// After submitting the copies that use this slot: map both sides again when the GPU is done
    /// (the download side for `down_len` bytes).
    pub fn submitted(&mut self, submission: wgpu::SubmissionIndex, down_len: u64) {
        self.submission = Some(submission);
        self.up_mapped = Some(request_map(&self.up, wgpu::MapMode::Write, self.up_len));
        self.down_mapped = Some(request_map(&self.down, wgpu::MapMode::Read, down_len));
    }

    /// Wait until the download side holds the GPU's results.
    pub fn wait_download(&mut self, gpu: &Gpu) -> Result<()> {
        let rx = self
            .down_mapped
            .take()
            .ok_or_else(|| Error::Map("no download was requested on this staging slot".into()))?;
        StagingSlot::wait(gpu, self.submission.as_ref(), rx)
    }

    /// Copy `out.len()` bytes from the download side at byte `offset`, on all cores.
    pub fn drain(&self, offset: u64, out: &mut [u8]) {
        read_mapped(&self.down, offset, out);
    }

    /// Give the download side back for the next chunk.
    pub fn done_draining(&mut self) {
        self.down.unmap();
    }
}
