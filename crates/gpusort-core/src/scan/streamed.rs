//! Scans and compactions of host arrays of any length, piece by piece (issue 8's pipelined jobs).
//!
//! The array goes through the GPU in chunks: while the GPU scans (or compacts) chunk k, the CPU
//! drains chunk k - 1 out of the other staging slot and fills chunk k + 1 into it, both at once
//! on all cores (its upload and download sides are separate buffers), and a writer thread
//! hands finished chunks to the caller's sink. So file reading, PCIe copies, the kernels and
//! file writing overlap, and neither the input nor the output has to fit in one storage
//! binding or in GPU memory: a 10 GiB file scans through two chunk-sized GPU buffers.
//! A scan carries the value through each chunk's end to the next chunk on the GPU
//! ([`Carry`]), so chunks never wait for the host; a compaction's chunks are independent (each
//! keeps its own elements, in order).
//! One queue runs everything in submission order, so one GPU buffer per role suffices; the two
//! staging slots ([`StagingSlot`]) are what lets the CPU and the GPU work at once.

use std::sync::mpsc;

use crate::device::transfer::{self, Drainer, Filler, StagingSlot};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::SortKey;
use crate::scan::{Carry, CompactJob, Predicate, ScanJob, ScanOp, Scanner};

/// Staging slots a streamed job uses: as many as the device keeps between jobs
/// (`StagingSlot::give_back`), since a slot made afresh costs more than the chunks it stages.
const SLOTS: usize = 2;

/// Bytes of input per chunk unless the caller asks otherwise: big enough that a chunk's kernel
/// and copies dwarf the per-chunk submit and map (tens of microseconds), small enough that
/// the first chunk's upload and the last chunk's download, which do not overlap anything, stay
/// short.
pub const DEFAULT_CHUNK_BYTES: u64 = 64 << 20;

/// Elements of `elem_bytes` per chunk: `bytes` (or [`DEFAULT_CHUNK_BYTES`]) capped by the
/// device's largest storage binding, a whole number of vec4s, at least one.
pub fn chunk_elements(gpu: &Gpu, elem_bytes: usize, bytes: Option<u64>) -> usize {
    let bytes = bytes.unwrap_or(DEFAULT_CHUNK_BYTES).min(gpu.max_binding());
    let elems = (bytes / elem_bytes as u64) as usize;
    (elems / 4 * 4).max(4)
}

/// Elements of `elem_bytes` per chunk for a job of `len` elements: about a sixteenth of the job
/// (so that the first chunk's fill and the last chunk's drain, which nothing overlaps, stay a
/// small part of it) between 4 MiB and [`DEFAULT_CHUNK_BYTES`], capped by one binding.
pub fn chunk_elements_for(gpu: &Gpu, elem_bytes: usize, len: usize) -> usize {
    let bytes = (len as u64 * elem_bytes as u64 / 16).clamp(4 << 20, DEFAULT_CHUNK_BYTES);
    chunk_elements(gpu, elem_bytes, Some(bytes))
}

/// Elements of `elem_bytes` per chunk for a process that streams one job of `len` elements (a
/// command): its staging slots are made for that job, and pinning them costs about a fifth of a
/// second per GiB (docs/BENCHMARKS.md), so chunks are a sixty-fourth of the job between 4 MiB and
/// [`DEFAULT_CHUNK_BYTES`] — smaller slots, a few more submissions.
pub fn chunk_elements_one_shot(gpu: &Gpu, elem_bytes: usize, len: usize) -> usize {
    let bytes = (len as u64 * elem_bytes as u64 / 64).clamp(4 << 20, DEFAULT_CHUNK_BYTES);
    chunk_elements(gpu, elem_bytes, Some(bytes))
}

/// (elements per chunk: `chunk`, no more than `len` needs, cut to whole vec4s, at least one;
/// chunks of `len` elements).
fn chunking(len: usize, chunk: usize) -> (usize, usize) {
    let chunk = chunk.min(len.next_multiple_of(4)).max(4) / 4 * 4;
    (chunk, len.div_ceil(chunk))
}

/// The chunk loop both jobs share. For chunk k: `fill(k, filler)` copies its input into a
/// slot's upload side; `record(k, encoder, slot)` records the copies and kernels and returns
/// how many bytes of the download side the results take; after the GPU is done,
/// `drain(k, drainer)` copies the results out of the download side. The CPU drains chunk
/// k - SLOTS and fills chunk k at once (one slot, two buffers) while the GPU works on the chunks
/// between. Drained chunks go, in order, to `sink` on a writer thread while later chunks run.
pub(crate) fn run_chunks<P: Send, F, R, D, S>(
    gpu: &Gpu,
    chunks: usize,
    (up_bytes, down_bytes): (u64, u64),
    mut fill: F,
    mut record: R,
    mut drain: D,
    mut sink: S,
) -> Result<()>
where
    F: FnMut(usize, &mut Filler<'_>) + Send,
    R: FnMut(usize, &mut wgpu::CommandEncoder, &StagingSlot) -> Result<u64>,
    D: FnMut(usize, &Drainer<'_>) -> P + Send,
    S: FnMut(usize, P) -> Result<()> + Send,
{
    let started = std::time::Instant::now();
    let mut slots = Vec::new();
    for _ in 0..SLOTS.min(chunks.max(1)) {
        slots.push(StagingSlot::lend(gpu, up_bytes, down_bytes)?);
    }
    let nslots = slots.len();
    // where the loop's time goes (RUST_LOG=gpusort_core=debug): slots, waits for the GPU, the
    // CPU's copies, recording and submitting; the writer's time is its own thread's
    let slots_s = started.elapsed().as_secs_f64();
    let (mut wait_s, mut copy_s, mut submit_s) = (0f64, 0f64, 0f64);
    let result = std::thread::scope(|scope| {
        // two chunks may wait for the writer: enough to keep it busy, bounded memory
        let (tx, rx) = mpsc::sync_channel::<(usize, P)>(2);
        let writer = scope.spawn(move || -> Result<f64> {
            let mut busy = 0f64;
            for (k, done) in rx {
                let t = std::time::Instant::now();
                sink(k, done)?;
                busy += t.elapsed().as_secs_f64();
            }
            Ok(busy)
        });
        let mut step = |k: usize| -> Result<()> {
            let slot = &mut slots[k % nslots];
            let t = std::time::Instant::now();
            slot.wait(gpu)?;
            wait_s += t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            // the chunk this slot held, drained while the next one is filled in
            let earlier = k.checked_sub(nslots);
            let now = (k < chunks).then_some(k);
            let (mut filler, drainer) = slot.sides();
            let (drained, ()) = rayon::join(
                || earlier.map(|e| drain(e, &drainer)),
                || {
                    if let Some(k) = now {
                        fill(k, &mut filler)
                    }
                },
            );
            slot.done_draining();
            slot.done_filling();
            copy_s += t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            if let Some(k) = now {
                let mut enc = gpu.device.create_command_encoder(&Default::default());
                let down = record(k, &mut enc, slot)?;
                let idx = gpu.queue.submit([enc.finish()]);
                slot.submitted(idx, down);
            }
            submit_s += t.elapsed().as_secs_f64();
            if let (Some(e), Some(done)) = (earlier, drained) {
                // a closed channel means the writer failed: stop; its error is the one reported
                tx.send((e, done))
                    .map_err(|_| Error::Io("the writer stopped".into()))?;
            }
            Ok(())
        };
        let mut result = Ok(());
        // past the last chunk, each slot that held one is drained
        for k in (0..chunks + nslots).filter(|&k| k < chunks || k >= nslots) {
            // a caller who gave up (crate::cancel) stops the job between chunks
            if crate::cancel::requested() {
                result = Err(Error::Cancelled);
                break;
            }
            result = step(k);
            if result.is_err() {
                break;
            }
        }
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(Error::Io("the writer thread panicked".into())));
        if let Ok(writer_s) = &written {
            tracing::debug!(
                "streamed job, {chunks} chunks in {:.3} s: staging slots {slots_s:.3} s, \
                 waits for the GPU {wait_s:.3} s, CPU copies {copy_s:.3} s, recording and \
                 submitting {submit_s:.3} s; the writer thread busy {writer_s:.3} s",
                started.elapsed().as_secs_f64()
            );
        }
        written.map(|_| ()).and(result)
    });
    // a failed job may leave a slot mid-copy: only finished ones go back for the next job
    if result.is_ok() {
        for slot in slots {
            slot.give_back(gpu);
        }
    }
    result
}

/// One chunk of a streamed split as it lands in the staging memory
/// ([`Scanner::split_streamed_with`]): its input range, how many of its elements matched, and
/// its results — the matching elements, then (when the rest was asked for) the others, with
/// their payload — to copy out, on all cores, before the drain returns.
pub struct SplitDrain<'a, T> {
    pub range: std::ops::Range<usize>,
    pub kept: usize,
    len: usize,
    drainer: &'a Drainer<'a>,
    payload_at: Option<u64>,
    _elements: std::marker::PhantomData<T>,
}

impl<T: SortKey> SplitDrain<'_, T> {
    /// How many result elements the chunk has: `kept`, or its whole length with the rest.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copy results `from..from + out.len()` into `out`.
    pub fn elements_into(&self, from: usize, out: &mut [T]) {
        assert!(from + out.len() <= self.len, "past the chunk's results");
        let size = T::TYPE.size() as u64;
        self.drainer
            .drain(from as u64 * size, bytemuck::cast_slice_mut(out));
    }

    /// Copy the payload of results `from..from + out.len()` into `out` (a split with a payload).
    pub fn payload_into(&self, from: usize, out: &mut [u32]) {
        assert!(from + out.len() <= self.len, "past the chunk's results");
        let at = self.payload_at.expect("a split with a payload");
        self.drainer
            .drain(at + from as u64 * 4, bytemuck::cast_slice_mut(out));
    }
}

/// One chunk of a streamed split: its input range, its elements (the matching ones first, then,
/// when the rest was asked for, the others) with their payload, and how many matched.
pub struct ChunkSplit<'a, T> {
    pub range: std::ops::Range<usize>,
    pub elements: &'a [T],
    pub payload: Option<&'a [u32]>,
    pub kept: usize,
}

/// A streamed scan: the operation, inclusive or exclusive, the elements staged at a time (see
/// [`chunk_elements`]) and what everything before the input combines to (`before`: a part of a
/// longer array, whose results are then the longer array's for this part; None: nothing comes
/// before).
#[derive(Clone, Copy, Debug)]
pub struct ScanStream<T> {
    pub op: ScanOp,
    pub inclusive: bool,
    pub chunk: usize,
    pub before: Option<T>,
}

impl<T> ScanStream<T> {
    /// A scan of a whole array: nothing before it.
    pub fn new(op: ScanOp, inclusive: bool, chunk: usize) -> ScanStream<T> {
        ScanStream {
            op,
            inclusive,
            chunk,
            before: None,
        }
    }

    /// The same scan of a part of a longer array whose elements before it combine to `before`
    /// (a device group's part: multi::scan).
    pub fn after(self, before: T) -> ScanStream<T> {
        ScanStream {
            before: Some(before),
            ..self
        }
    }
}

/// A streamed split (compaction, partition): the elements matching `predicate` first, then,
/// with `rest`, the others, both in order, each chunk on its own, with their `payload`; `chunk`
/// elements are staged at a time (see [`chunk_elements`]).
#[derive(Clone, Copy, Debug)]
pub struct SplitStream<'a, T> {
    pub payload: Option<&'a [u32]>,
    pub predicate: Predicate<T>,
    pub chunk: usize,
    pub rest: bool,
}

impl Scanner {
    /// Scan `input` of any length in chunks, handing each chunk's results to `sink(first
    /// element, results)` in order, on another thread, while later chunks are still on the GPU.
    /// Same results as [`Scanner::scan`] (with `before`, the longer array's for this part, with
    /// no pass of the host over them).
    pub fn scan_streamed<T: SortKey>(
        &self,
        gpu: &Gpu,
        input: &[T],
        job: &ScanStream<T>,
        mut sink: impl FnMut(usize, &[T]) -> Result<()> + Send,
    ) -> Result<()> {
        let (step, _) = chunking(input.len(), job.chunk);
        let len = |k: usize| (input.len() - k * step).min(step);
        self.scan_chunks(
            gpu,
            input,
            job,
            |k, slot| {
                let mut out = vec![T::zeroed(); len(k)];
                slot.drain(0, bytemuck::cast_slice_mut(&mut out));
                out
            },
            |k, out| sink(k * step, &out),
        )
    }

    /// Scan `input` into `out` (the same length) in chunks, each chunk's results copied from the
    /// staging slot straight into its place in `out` on all cores (host arrays in and out with
    /// no intermediate copy: the Python package's scans), then handed to `landed(first element,
    /// results)` in order on another thread while later chunks are on the GPU (a file's scan
    /// checks them and starts their writeback there). Same results as [`Scanner::scan`].
    pub fn scan_into<T: SortKey>(
        &self,
        gpu: &Gpu,
        input: &[T],
        out: &mut [T],
        job: &ScanStream<T>,
        mut landed: impl FnMut(usize, &[T]) -> Result<()> + Send,
    ) -> Result<()> {
        crate::scan::check_lengths(input.len(), out.len())?;
        let (step, _) = chunking(input.len(), job.chunk);
        let mut pieces = out.chunks_mut(step);
        self.scan_chunks(
            gpu,
            input,
            job,
            |_, slot| {
                // chunks drain in order, one each: the next piece of `out` is this chunk's
                let piece = pieces.next()?;
                slot.drain(0, bytemuck::cast_slice_mut(piece));
                Some(&*piece)
            },
            |k, piece| match piece {
                Some(piece) => landed(k * step, piece),
                None => Ok(()),
            },
        )
    }

    /// The chunk loop of both scans: `drain(k, slot)` takes chunk k's results out of its slot,
    /// `sink(k, what drain made)` gets them on the writer thread; the job's `before` is the
    /// running value the first chunk starts from.
    fn scan_chunks<T: SortKey, P: Send>(
        &self,
        gpu: &Gpu,
        input: &[T],
        job: &ScanStream<T>,
        drain: impl FnMut(usize, &Drainer<'_>) -> P + Send,
        sink: impl FnMut(usize, P) -> Result<()> + Send,
    ) -> Result<()> {
        let ScanStream {
            op,
            inclusive,
            chunk,
            ..
        } = *job;
        // (element bits)
        let before = job
            .before
            .map(|b| bytemuck::cast_slice::<T, u32>(std::slice::from_ref(&b))[0]);
        if T::TYPE.is_wide() {
            return Err(Error::InvalidInput(format!(
                "scans of {} are not supported (u32, i32, f32)",
                T::TYPE
            )));
        }
        let (chunk, chunks) = chunking(input.len(), chunk);
        let bytes = chunk as u64 * 4;
        let src = transfer::storage_buffer(gpu, "scan chunk", bytes)?;
        let dst = transfer::storage_buffer(gpu, "scan chunk out", bytes)?;
        let carry = transfer::storage_buffer(gpu, "scan carry", 16)?;
        if let Some(b) = before {
            // slot 0, which the first chunk then reads
            gpu.queue.write_buffer(&carry, 0, &b.to_le_bytes());
        }
        let piece = |k: usize| &input[k * chunk..((k + 1) * chunk).min(input.len())];
        run_chunks(
            gpu,
            chunks,
            (bytes, bytes),
            |k, slot| slot.fill(0, bytemuck::cast_slice(piece(k))),
            |k, enc, slot| {
                let len = piece(k).len() as u64 * 4;
                enc.copy_buffer_to_buffer(slot.upload_buffer(), 0, &src, 0, len);
                // chunk k reads slot k % 2 and writes the other: never the slot its tiles read
                let c = Carry {
                    buffer: &carry,
                    read: (k > 0 || before.is_some()).then_some((k % 2) as u32),
                    write: ((k + 1) % 2) as u32,
                };
                let n = len as u32 / 4;
                self.record_scan(
                    gpu,
                    enc,
                    &ScanJob {
                        src: &src,
                        dst: &dst,
                        n,
                        key_type: T::TYPE,
                        op,
                        inclusive,
                        carry: Some(c),
                    },
                )?;
                enc.copy_buffer_to_buffer(&dst, 0, slot.download_buffer(), 0, len);
                Ok(len)
            },
            drain,
            sink,
        )
    }

    /// Split `input` (any length) chunk by chunk as `job` says (a compaction keeps the matching
    /// elements alone: `rest` false); `sink` gets each chunk's [`ChunkSplit`] in order, on another
    /// thread, while later chunks are on the GPU. Returns how many matched in all. A partition of
    /// the whole input is every chunk's matching part, then every chunk's rest (what `gpusort
    /// partition` writes). Each chunk's whole output area is copied back (the kept count is only
    /// known on the GPU then): downloads move up to the input's size, whatever is kept. Same
    /// results as [`Scanner::compact`] and [`Scanner::partition`] per chunk.
    pub fn split_streamed<T: SortKey>(
        &self,
        gpu: &Gpu,
        input: &[T],
        job: &SplitStream<'_, T>,
        mut sink: impl FnMut(ChunkSplit<'_, T>) -> Result<()> + Send,
    ) -> Result<usize> {
        let has_payload = job.payload.is_some();
        self.split_streamed_with(
            gpu,
            input,
            job,
            |c| {
                let mut elements = vec![T::zeroed(); c.len()];
                c.elements_into(0, &mut elements);
                let mut vals = Vec::new();
                if has_payload {
                    vals = vec![0u32; c.len()];
                    c.payload_into(0, &mut vals);
                }
                (c.range.clone(), c.kept, elements, vals)
            },
            |(range, kept, elements, vals)| {
                sink(ChunkSplit {
                    range,
                    elements: &elements,
                    payload: has_payload.then_some(vals.as_slice()),
                    kept,
                })
            },
        )
    }

    /// [`Scanner::split_streamed`] where the caller takes each chunk's results out of the
    /// staging memory itself: `drain` gets a [`SplitDrain`] in chunk order (while the GPU runs
    /// later chunks) and copies its elements straight to where they belong (a file's map, say);
    /// what it returns goes to `sink`, in order, on another thread. Returns how many matched.
    pub fn split_streamed_with<T: SortKey, P: Send>(
        &self,
        gpu: &Gpu,
        input: &[T],
        job: &SplitStream<'_, T>,
        mut drain: impl FnMut(SplitDrain<'_, T>) -> P + Send,
        mut sink: impl FnMut(P) -> Result<()> + Send,
    ) -> Result<usize> {
        let SplitStream {
            payload,
            predicate,
            chunk,
            rest,
        } = *job;
        crate::scan::check_payload(input.len(), payload)?;
        let size = T::TYPE.size() as u64;
        let (chunk, chunks) = chunking(input.len(), chunk);
        let elem_bytes = chunk as u64 * size;
        let pay_bytes = if payload.is_some() {
            chunk as u64 * 4
        } else {
            0
        };
        // upload side: elements, then payload; download side: the same, then the count
        let count_at = elem_bytes + pay_bytes;
        let src = transfer::storage_buffer(gpu, "compact chunk", elem_bytes)?;
        let dst = transfer::storage_buffer(gpu, "compact chunk out", elem_bytes)?;
        let counts = transfer::storage_buffer(gpu, "compact counts", 16)?;
        let pay = match payload {
            Some(_) => Some((
                transfer::storage_buffer(gpu, "payload chunk", pay_bytes)?,
                transfer::storage_buffer(gpu, "payload chunk out", pay_bytes)?,
            )),
            None => None,
        };
        let piece = |k: usize| k * chunk..((k + 1) * chunk).min(input.len());
        let kept = std::sync::atomic::AtomicUsize::new(0);
        run_chunks(
            gpu,
            chunks,
            (count_at, count_at + 16),
            |k, slot| {
                slot.fill(0, bytemuck::cast_slice(&input[piece(k)]));
                if let Some(p) = payload {
                    slot.fill(elem_bytes, bytemuck::cast_slice(&p[piece(k)]));
                }
            },
            |k, enc, slot| {
                let n = piece(k).len() as u64;
                enc.copy_buffer_to_buffer(slot.upload_buffer(), 0, &src, 0, n * size);
                if let Some((pin, _)) = &pay {
                    enc.copy_buffer_to_buffer(slot.upload_buffer(), elem_bytes, pin, 0, n * 4);
                }
                let job = CompactJob {
                    src: &src,
                    dst: &dst,
                    counts: &counts,
                    n: n as u32,
                    payload: pay.as_ref().map(|(a, b)| (a, b)),
                    predicate,
                    keep: true,
                    base_slot: None,
                    count_slot: 0,
                };
                self.record_compact(gpu, enc, &job)?;
                if rest {
                    // the others after the matching ones: the count in slot 0 is their offset
                    self.record_compact(
                        gpu,
                        enc,
                        &CompactJob {
                            keep: false,
                            base_slot: Some(0),
                            count_slot: 1,
                            ..job
                        },
                    )?;
                }
                let down = slot.download_buffer();
                enc.copy_buffer_to_buffer(&dst, 0, down, 0, n * size);
                if let Some((_, pout)) = &pay {
                    enc.copy_buffer_to_buffer(pout, 0, down, elem_bytes, n * 4);
                }
                enc.copy_buffer_to_buffer(&counts, 0, down, count_at, 4);
                Ok(count_at + 4)
            },
            |k, slot| {
                let mut c = [0u8; 4];
                slot.drain(count_at, &mut c);
                let count = u32::from_le_bytes(c) as usize;
                kept.fetch_add(count, std::sync::atomic::Ordering::Relaxed);
                drain(SplitDrain {
                    range: piece(k),
                    kept: count,
                    len: if rest { piece(k).len() } else { count },
                    drainer: slot,
                    payload_at: payload.map(|_| elem_bytes),
                    _elements: std::marker::PhantomData,
                })
            },
            |_, drained| sink(drained),
        )?;
        Ok(kept.into_inner())
    }
}
