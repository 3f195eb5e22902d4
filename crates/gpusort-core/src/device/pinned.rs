//! Host memory the GPU copies to and from directly: CUDA's pinned memory, portably. Where the
//! device imports host memory (`device::host_memory`), a [`PinnedBuffer`] is such memory, and
//! [`PinnedBuffer::upload_to`] / [`PinnedBuffer::download_from`] are one copy by the GPU's copy
//! engine at the link's speed, with no CPU copy; elsewhere it is ordinary memory and the same
//! calls go through the staging ring (the same bytes, at the ring's speed).
//!
//! Importing pins every page, which costs more than copying them once (docs/BENCHMARKS.md): a
//! pinned buffer pays where it is filled and transferred again and again (a loop's input and
//! output, a renderer's per-frame keys), not for one transfer.
//!
//! Safety: the GPU reads or writes the host bytes only inside `upload_to` / `download_from`,
//! which borrow the buffer (shared for an upload, exclusive for a download) and return only once
//! the copy is complete — on an error too, after waiting for the device without a time limit —
//! so no CPU view of the bytes overlaps a GPU access (the import's own lifetime rules are
//! `host_memory`'s).

use std::ops::Range;

use super::host_memory::HostBuffer;
use super::Gpu;
use crate::error::{Error, Result};

/// Host memory for repeated transfers to and from one device (see the module's documentation).
pub struct PinnedBuffer {
    backing: Backing,
    len: usize,
    /// The [`Gpu`] it was made for (`Gpu::id`).
    gpu: u64,
}

enum Backing {
    Imported(HostBuffer),
    /// Ordinary memory, 8-byte aligned (views of any key type).
    Plain(Vec<u64>),
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.len)
            .field("imported", &self.is_imported())
            .finish()
    }
}

impl PinnedBuffer {
    /// `bytes` zeroed bytes for transfers with `gpu`: imported host memory where the device
    /// imports it and its staging uses it ([`Gpu::host_memory_import`]), else ordinary memory.
    pub fn new(gpu: &Gpu, bytes: usize) -> Result<PinnedBuffer> {
        let imported = match &gpu.host_import {
            Some(import) if gpu.host_memory_import() => import.buffer(&gpu.device, bytes as u64),
            _ => None,
        };
        let backing = match imported {
            Some(host) => Backing::Imported(host),
            None => {
                let mut words = Vec::new();
                words.try_reserve_exact(bytes.div_ceil(8)).map_err(|_| {
                    Error::InvalidInput(format!("cannot allocate {bytes} bytes of host memory"))
                })?;
                words.resize(bytes.div_ceil(8), 0);
                Backing::Plain(words)
            }
        };
        Ok(PinnedBuffer {
            backing,
            len: bytes,
            gpu: gpu.id,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the GPU copies this memory directly (imported), rather than through the ring.
    pub fn is_imported(&self) -> bool {
        matches!(self.backing, Backing::Imported(_))
    }

    pub fn bytes(&self) -> &[u8] {
        match &self.backing {
            Backing::Imported(h) => &h.bytes()[..self.len],
            Backing::Plain(w) => &bytemuck::cast_slice(w)[..self.len],
        }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        match &mut self.backing {
            Backing::Imported(h) => &mut h.bytes_mut()[..len],
            Backing::Plain(w) => &mut bytemuck::cast_slice_mut(w)[..len],
        }
    }

    /// The whole elements of type `T` the buffer holds (the memory is 8-byte aligned).
    pub fn as_slice<T: bytemuck::Pod>(&self) -> &[T] {
        let whole = self.len - self.len % std::mem::size_of::<T>().max(1);
        bytemuck::cast_slice(&self.bytes()[..whole])
    }

    /// [`PinnedBuffer::as_slice`], for filling.
    pub fn as_mut_slice<T: bytemuck::Pod>(&mut self) -> &mut [T] {
        let whole = self.len - self.len % std::mem::size_of::<T>().max(1);
        bytemuck::cast_slice_mut(&mut self.bytes_mut()[..whole])
    }

    /// Copy bytes `range` of this buffer to `dst` from byte `dst_offset`, and wait until the copy
    /// is done. Offsets and length are multiples of 4 (wgpu's copy alignment).
    pub fn upload_to(
        &self,
        gpu: &Gpu,
        range: Range<usize>,
        dst: &wgpu::Buffer,
        dst_offset: u64,
    ) -> Result<()> {
        if !self.check(gpu, &range, dst, dst_offset)? {
            return Ok(());
        }
        match &self.backing {
            Backing::Imported(host) => copy_and_wait(
                gpu,
                host.buffer(),
                range.start as u64,
                dst,
                dst_offset,
                range.len(),
            ),
            Backing::Plain(_) => {
                super::transfer::upload(gpu, dst, dst_offset, &self.bytes()[range])?;
                gpu.wait()
            }
        }
    }

    /// Copy `range.len()` bytes of `src` from byte `src_offset` into bytes `range` of this
    /// buffer, and wait until the copy is done. Offsets and length are multiples of 4.
    pub fn download_from(
        &mut self,
        gpu: &Gpu,
        src: &wgpu::Buffer,
        src_offset: u64,
        range: Range<usize>,
    ) -> Result<()> {
        if !self.check(gpu, &range, src, src_offset)? {
            return Ok(());
        }
        match &self.backing {
            Backing::Imported(host) => copy_and_wait(
                gpu,
                src,
                src_offset,
                host.buffer(),
                range.start as u64,
                range.len(),
            ),
            Backing::Plain(_) => {
                super::transfer::download(gpu, src, src_offset, &mut self.bytes_mut()[range])
            }
        }
    }

    /// Whether a transfer of `range` with `buffer` at `offset` has bytes to copy; an error where
    /// it is not one this buffer can make.
    fn check(
        &self,
        gpu: &Gpu,
        range: &Range<usize>,
        buffer: &wgpu::Buffer,
        offset: u64,
    ) -> Result<bool> {
        if gpu.id != self.gpu {
            return Err(Error::InvalidInput(
                "a pinned buffer transfers with the device it was made for".into(),
            ));
        }
        let aligned = |v: u64| v.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        if range.start > range.end || range.end > self.len {
            return Err(Error::InvalidInput(format!(
                "bytes {}..{} are outside a pinned buffer of {} bytes",
                range.start, range.end, self.len
            )));
        }
        let len = range.len() as u64;
        if !aligned(range.start as u64) || !aligned(len) || !aligned(offset) {
            return Err(Error::InvalidInput(format!(
                "a transfer's offsets and length must be multiples of 4 bytes (bytes {}..{}, GPU offset {offset})",
                range.start, range.end
            )));
        }
        if offset
            .checked_add(len)
            .is_none_or(|end| end > buffer.size())
        {
            return Err(Error::InvalidInput(format!(
                "{len} bytes from byte {offset} are outside a GPU buffer of {} bytes",
                buffer.size()
            )));
        }
        Ok(!range.is_empty())
    }
}

/// One GPU copy, waited for; on an error too, the device is waited for without a time limit
/// before returning, so that no copy into host memory can outlive the borrow (module docs).
fn copy_and_wait(
    gpu: &Gpu,
    src: &wgpu::Buffer,
    src_offset: u64,
    dst: &wgpu::Buffer,
    dst_offset: u64,
    len: usize,
) -> Result<()> {
    let submitted = gpu.checked(|| {
        let mut enc = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("pinned copy"),
            });
        enc.copy_buffer_to_buffer(src, src_offset, dst, dst_offset, len as u64);
        gpu.queue.submit([enc.finish()])
    });
    let waited = match submitted {
        Ok(submission) => gpu.wait_for(submission),
        Err(e) => Err(e),
    };
    if waited.is_err() {
        let _ = gpu.device.poll(wgpu::PollType::wait_indefinitely());
    }
    waited
}
