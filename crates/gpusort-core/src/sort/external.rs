//! External sort: inputs larger than the host memory gpusort may use.
//!
//! Runs of the input that fit the memory budget are sorted on the GPU (stably, by whichever
//! algorithm the sorter picks) and written to run files; the runs are then merged by a streaming
//! k-way merge that holds one block of each run. When one merge cannot give every run a useful
//! block, consecutive groups of runs merge first (merge levels). Ties take the earlier run, so the
//! result is the same stable order one in-memory sort gives. Segmented sorts need no merge: runs
//! are cut on segment boundaries and go straight to the output.
//!
//! Memory: the budget covers the arrays this module holds (a run's keys, payload and permutation
//! while it is sorted; the run blocks, merge keys and output batch while merging). Fixed costs
//! are not in it: the GPU's staging ring and the pages of a memory-mapped input, which the kernel
//! can evict.
//!
//! The merge works in batches rather than one heap pop per key (a binary-heap merge ran at about
//! 20 M keys/s on the GPU machine's CPU): the smallest last-buffered key among runs that still
//! have data on disk bounds what can be emitted now; everything below it (and equal to it from
//! runs up to the one holding it, for stability) is cut from every block, sorted stably by merge
//! key on all cores (the pieces are sorted runs, which the stable sort merges) and written.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;

use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::keys::order::{fingerprint, key_on_bits, sortable, Fingerprint};
use crate::keys::{SortKey, SortOrder};
use crate::sort::{HostSort, SortStats, Sorter};

/// The smallest memory budget an external sort accepts.
pub const MIN_MEMORY_BUDGET: u64 = 64 << 10;
/// Runs hold at least this many keys, whatever the budget.
const MIN_RUN: usize = 1024;
/// A merge gives each run a block of at least this many records...
const MIN_BLOCK: usize = 64;
/// ...and merges fewer runs at once (more levels) rather than give them blocks smaller than this.
const GOOD_BLOCK: usize = 4096;
/// Open run files per merge, at most.
const MAX_FAN_IN: usize = 256;

/// How an external sort runs.
#[derive(Clone, Debug)]
pub struct ExternalSort<'a> {
    pub order: SortOrder,
    /// Bytes of host memory the sort's own arrays may hold (at least [`MIN_MEMORY_BUDGET`]).
    pub memory_budget: u64,
    /// An existing directory for the run files (on a disk with room for the input's size, twice
    /// while a merge level rewrites runs). Files are removed as they are consumed.
    pub run_dir: &'a Path,
    /// Check the result while writing it: in order, and the same multiset of keys as the input.
    pub verify: bool,
}

/// Where the result goes, in sorted order, as raw little-endian elements.
pub struct Sink<'a> {
    pub keys: &'a mut dyn Write,
    /// The u32 payload reordered with the keys (needs `values` input).
    pub values: Option<&'a mut dyn Write>,
    /// The sorting permutation (u32 input positions).
    pub permutation: Option<&'a mut dyn Write>,
}

/// What an external sort is doing, for progress displays: keys done of the input's count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Sorting runs on the GPU and writing them out.
    Runs,
    /// Merging: level `level` of `levels` (the last writes the output).
    Merge { level: usize, levels: usize },
}

#[derive(Clone, Debug, Default)]
pub struct ExternalStats {
    /// Runs written (1: the input fit one run and was written directly).
    pub runs: usize,
    /// Keys a run holds (the last may hold fewer).
    pub run_keys: usize,
    /// Runs merged at once, and the merge levels that took.
    pub fan_in: usize,
    pub merge_levels: usize,
    /// The first run's GPU sort (None on the CPU engine).
    pub sort: Option<SortStats>,
    /// Wall-clock seconds sorting runs and merging.
    pub run_s: f64,
    pub merge_s: f64,
}

/// The record a run file holds per key: the key, then its value, then its input position.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    key: usize,
    values: bool,
    index: bool,
}

impl Record {
    fn size(self) -> usize {
        self.key + 4 * self.values as usize + 4 * self.index as usize
    }
}

/// What sorts the runs of an external sort: the GPU ([`GpuRuns`]) or the CPU engine
/// ([`crate::cpu_engine::CpuRuns`], which lives with the engine: the sort family does not use it).
pub trait RunSorter {
    /// The most keys one run may hold (one GPU sort; pieces merged in memory would hold far
    /// more than the run itself).
    fn max_run(&self, key: crate::KeyType, carried: bool, order: SortOrder) -> u64;
    /// The key-bit range the runs are sorted on, if not every bit.
    fn key_bits(&self) -> Option<std::ops::Range<u32>>;
    /// Sort one run in place as `job` says (its values carried; the permutation when asked).
    fn sort_run<T: SortKey>(
        &self,
        keys: &mut [T],
        job: HostSort<'_>,
    ) -> Result<(Option<Vec<u32>>, Option<SortStats>)>;
}

/// Runs sorted on the GPU.
pub struct GpuRuns<'a> {
    pub sorter: &'a Sorter,
    pub gpu: &'a Gpu,
}

impl RunSorter for GpuRuns<'_> {
    fn max_run(&self, key: crate::KeyType, carried: bool, order: SortOrder) -> u64 {
        Sorter::max_len(self.gpu, key, carried, order)
    }
    fn key_bits(&self) -> Option<std::ops::Range<u32>> {
        self.sorter.key_bits()
    }
    fn sort_run<T: SortKey>(
        &self,
        keys: &mut [T],
        job: HostSort<'_>,
    ) -> Result<(Option<Vec<u32>>, Option<SortStats>)> {
        let (perm, st) = self.sorter.sort_host(self.gpu, keys, job)?;
        Ok((perm, Some(st)))
    }
}

/// Sort the `keys` bytes (elements of `T`; `values` u32 bytes carried along) into `sink`,
/// holding at most about `job.memory_budget` bytes, with run files in `job.run_dir`.
pub fn sort_external<T: SortKey>(
    runs_by: &impl RunSorter,
    keys: &[u8],
    values: Option<&[u8]>,
    job: &ExternalSort<'_>,
    sink: Sink<'_>,
    progress: &mut dyn FnMut(Phase, u64),
) -> Result<ExternalStats> {
    let s = std::mem::size_of::<T>();
    if !keys.len().is_multiple_of(s) {
        return Err(Error::InvalidInput(format!(
            "{} key bytes are not a whole number of {s}-byte keys",
            keys.len()
        )));
    }
    let n = keys.len() / s;
    if let Some(v) = values {
        if v.len() != n * 4 {
            return Err(Error::InvalidInput(format!(
                "{n} keys but {} bytes of u32 values",
                v.len()
            )));
        }
    }
    if job.memory_budget < MIN_MEMORY_BUDGET {
        return Err(Error::InvalidInput(format!(
            "a memory budget of {} bytes is below the {MIN_MEMORY_BUDGET} an external sort needs",
            job.memory_budget
        )));
    }
    let want_index = sink.permutation.is_some();
    if want_index && n as u64 > u32::MAX as u64 + 1 {
        return Err(Error::InvalidInput(format!(
            "{n} keys: a permutation of u32 positions holds at most 2^32"
        )));
    }
    let record = Record {
        key: s,
        values: values.is_some(),
        index: want_index,
    };
    // while a run sorts it is held as keys + payload, and the permutation comes back beside it
    let mut run_len = ((job.memory_budget / (2 * record.size() as u64)) as usize).max(MIN_RUN);
    // one GPU sort a run: pieces merged in memory would hold far more than the run itself
    let one_sort = runs_by.max_run(T::TYPE, want_index || values.is_some(), job.order);
    run_len = run_len.min(one_sort as usize);
    if let Some(seg) = job.order.segment_size {
        let seg = seg.max(1) as usize;
        run_len = (run_len / seg).max(1) * seg;
    }
    let merge_key = merge_key_fn::<T>(runs_by.key_bits(), job.order);
    let mut out = Emitter::new(sink, job.verify, job.order);
    let mut stats = ExternalStats {
        run_keys: run_len,
        ..Default::default()
    };
    let mut input_print = Fingerprint::default();
    let direct = job.order.segment_size.is_some() || n <= run_len;
    let mut runs: Vec<RunFile> = Vec::new();
    let t = Instant::now();
    for (r, start) in (0..n).step_by(run_len.max(1)).enumerate() {
        let end = (start + run_len).min(n);
        let mut k: Vec<T> = bytemuck::pod_collect_to_vec(&keys[start * s..end * s]);
        let mut v: Option<Vec<u32>> =
            values.map(|v| bytemuck::pod_collect_to_vec(&v[start * 4..end * 4]));
        if job.verify {
            input_print = input_print.combine(fingerprint(&k));
        }
        let run = HostSort {
            values: v.as_deref_mut(),
            permutation: want_index,
            order: job.order,
        };
        let (perm, st) = runs_by.sort_run(&mut k, run)?;
        if let Some(st) = st {
            stats.sort.get_or_insert(st);
        }
        let index: Option<Vec<u32>> =
            perm.map(|p| p.into_iter().map(|i| i + start as u32).collect());
        if direct {
            out.emit_sorted(&k, v.as_deref(), index.as_deref(), &merge_key)?;
        } else {
            let path = job.run_dir.join(format!("run-0-{r:06}.bin"));
            let mut w = create(&path)?;
            runs.push(RunFile {
                path: path.clone(),
                len: k.len() as u64,
            });
            let mut buf = Vec::with_capacity(record.size() << 16);
            for c in (0..k.len()).step_by(1 << 16) {
                let e = (c + (1 << 16)).min(k.len());
                buf.clear();
                for i in c..e {
                    buf.extend_from_slice(bytemuck::bytes_of(&k[i]));
                    if let Some(v) = &v {
                        buf.extend_from_slice(&v[i].to_le_bytes());
                    }
                    if let Some(p) = &index {
                        buf.extend_from_slice(&p[i].to_le_bytes());
                    }
                }
                w.write_all(&buf).map_err(|e| io_error(&path, e))?;
            }
            w.flush().map_err(|e| io_error(&path, e))?;
        }
        progress(Phase::Runs, end as u64);
    }
    stats.runs = if direct { 1 } else { runs.len() };
    stats.run_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    if !direct {
        // the memory a merge of k runs holds per block record: the block, its merge key, the
        // batch entry (key, run, position) and the gathered output
        let per = (2 * record.size() + 24) as u64;
        let fan_in =
            ((job.memory_budget / (GOOD_BLOCK as u64 * per)) as usize).clamp(2, MAX_FAN_IN);
        let mut levels = 1;
        let mut count = runs.len();
        while count > fan_in {
            count = count.div_ceil(fan_in);
            levels += 1;
        }
        stats.fan_in = fan_in;
        stats.merge_levels = levels;
        let mut level = 1;
        while runs.len() > fan_in {
            let mut next = Vec::new();
            let mut done = 0u64;
            for (g, group) in runs.chunks(fan_in).enumerate() {
                let path = job.run_dir.join(format!("run-{level}-{g:06}.bin"));
                let mut w = create(&path)?;
                let len = group.iter().map(|r| r.len).sum();
                next.push(RunFile {
                    path: path.clone(),
                    len,
                });
                let readers = group.iter().map(RunReader::file).collect::<Result<_>>()?;
                let block = block_records(job.memory_budget, group.len(), record);
                merge_runs(readers, record, block, &merge_key, &mut |batch| {
                    w.write_all(batch.records).map_err(|e| io_error(&path, e))?;
                    done += batch.count as u64;
                    progress(Phase::Merge { level, levels }, done);
                    Ok(())
                })?;
                w.flush().map_err(|e| io_error(&path, e))?;
            }
            runs = next; // the merged runs' files go here
            level += 1;
        }
        let mut done = 0u64;
        let readers = runs.iter().map(RunReader::file).collect::<Result<_>>()?;
        let block = block_records(job.memory_budget, runs.len(), record);
        merge_runs(readers, record, block, &merge_key, &mut |batch| {
            out.emit_records::<T>(batch.records, record, &merge_key)?;
            done += batch.count as u64;
            progress(Phase::Merge { level, levels }, done);
            Ok(())
        })?;
    }
    drop(runs);
    stats.merge_s = t.elapsed().as_secs_f64();
    out.finish(job.verify.then_some(input_print), n)?;
    Ok(stats)
}

/// Records a merge of `runs` runs gives each run: the memory it holds per block record is the
/// block, its merge key, the batch entry and its merged copy, and the gathered output.
fn block_records(budget: u64, runs: usize, record: Record) -> usize {
    let per = (2 * record.size() + 40) as u64;
    (budget / (runs.max(1) as u64 * per)) as usize
}

/// What the merge compares: the sort order as one u64 (the key-bit range only, when the sorter
/// has one), as the in-memory piece merge does.
pub(crate) fn merge_key_fn<T: SortKey>(
    bits: Option<std::ops::Range<u32>>,
    order: SortOrder,
) -> impl Fn(&T) -> u64 + Sync {
    move |k: &T| match &bits {
        Some(r) => key_on_bits(k, order.descending, r),
        None => sortable(k, order.descending),
    }
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Io(format!("cannot write run file {}: {e}", path.display()))
}

fn create(path: &Path) -> Result<BufWriter<File>> {
    let f = File::create(path).map_err(|e| io_error(path, e))?;
    Ok(BufWriter::with_capacity(1 << 20, f))
}

/// A run on disk; the file goes when the run does (consumed, or the sort failed).
struct RunFile {
    path: PathBuf,
    len: u64,
}

impl Drop for RunFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One merge batch: records in sorted order.
struct Batch<'a> {
    records: &'a [u8],
    count: usize,
}

/// Where a run's records come from: a run file, or sorted pieces in memory (merge.rs).
pub(crate) enum Source<'a> {
    File(File, PathBuf),
    Memory(&'a [u8]),
}

/// A run being merged: a block of its records (from `pos` on) with their merge keys.
pub(crate) struct RunReader<'a> {
    source: Source<'a>,
    /// Records not yet in the block.
    remaining: u64,
    block: Vec<u8>,
    keys: Vec<u64>,
    pos: usize,
}

impl<'a> RunReader<'a> {
    fn file(run: &RunFile) -> Result<RunReader<'static>> {
        let file = File::open(&run.path)
            .map_err(|e| Error::Io(format!("cannot read run file {}: {e}", run.path.display())))?;
        Ok(RunReader::new(
            Source::File(file, run.path.clone()),
            run.len,
        ))
    }

    /// A sorted run of `records` held in memory.
    pub(crate) fn memory(records: &'a [u8], record: Record) -> RunReader<'a> {
        RunReader::new(
            Source::Memory(records),
            (records.len() / record.size()) as u64,
        )
    }

    fn new(source: Source<'a>, len: u64) -> RunReader<'a> {
        RunReader {
            source,
            remaining: len,
            block: Vec::new(),
            keys: Vec::new(),
            pos: 0,
        }
    }

    fn buffered(&self) -> usize {
        self.keys.len() - self.pos
    }

    /// Move the unconsumed records to the front and read up to `cap` records in all.
    fn top_up<T: SortKey>(
        &mut self,
        record: Record,
        cap: usize,
        merge_key: &(impl Fn(&T) -> u64 + Sync),
    ) -> Result<()> {
        let rs = record.size();
        let keep = self.buffered();
        self.block.copy_within(self.pos * rs.., 0);
        self.block.truncate(keep * rs);
        self.keys.drain(..self.pos);
        self.pos = 0;
        let want = (cap.saturating_sub(keep) as u64).min(self.remaining) as usize;
        if want == 0 {
            return Ok(());
        }
        self.block.resize((keep + want) * rs, 0);
        let dst = &mut self.block[keep * rs..];
        match &mut self.source {
            Source::File(f, path) => f
                .read_exact(dst)
                .map_err(|e| Error::Io(format!("cannot read run file {}: {e}", path.display())))?,
            Source::Memory(data) => {
                dst.copy_from_slice(&data[..dst.len()]);
                *data = &data[dst.len()..];
            }
        }
        self.remaining -= want as u64;
        let fresh = &self.block[keep * rs..];
        self.keys.par_extend(
            fresh
                .par_chunks_exact(rs)
                .map(|c| merge_key(&bytemuck::pod_read_unaligned::<T>(&c[..record.key]))),
        );
        Ok(())
    }
}

/// Merge `runs` (consecutive pieces of the input, each sorted) into batches handed to `emit`,
/// giving each run blocks of `block` records.
fn merge_runs<T: SortKey>(
    mut readers: Vec<RunReader<'_>>,
    record: Record,
    block: usize,
    merge_key: &(impl Fn(&T) -> u64 + Sync),
    emit: &mut dyn FnMut(Batch<'_>) -> Result<()>,
) -> Result<()> {
    let rs = record.size();
    let block = block.max(MIN_BLOCK);
    for rd in readers.iter_mut() {
        rd.top_up::<T>(record, block, merge_key)?;
    }
    let mut entries: Vec<Entry> = Vec::new();
    let mut spare: Vec<Entry> = Vec::new();
    let mut gathered: Vec<u8> = Vec::new();
    let mut takes: Vec<usize> = Vec::new();
    loop {
        // The bound: the smallest last-buffered key of a run with more still to read (the
        // earliest such run on ties). Records below it can all go now, and records equal to it
        // from runs up to that one (later runs' equal keys come after its unread ones).
        let mut bound: Option<(u64, usize)> = None;
        for (r, rd) in readers.iter().enumerate() {
            if rd.remaining > 0 {
                let last = *rd.keys.last().expect("a run with more to read has a block");
                if bound.is_none_or(|(b, _)| last < b) {
                    bound = Some((last, r));
                }
            }
        }
        entries.clear();
        takes.clear();
        for (r, rd) in readers.iter().enumerate() {
            let ks = &rd.keys[rd.pos..];
            let take = match bound {
                None => ks.len(),
                Some((b, br)) if r <= br => ks.partition_point(|&k| k <= b),
                Some((b, _)) => ks.partition_point(|&k| k < b),
            };
            takes.push(take);
            entries.extend(
                ks[..take]
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| (k, r as u32, (rd.pos + i) as u32)),
            );
        }
        if entries.is_empty() {
            debug_assert!(bound.is_none());
            return Ok(());
        }
        let sorted = merge_pieces(&mut entries, &mut spare, &takes);
        gathered.resize(sorted.len() * rs, 0);
        gathered
            .par_chunks_mut(rs)
            .zip(sorted.par_iter())
            .for_each(|(dst, &(_, r, i))| {
                let i = i as usize;
                dst.copy_from_slice(&readers[r as usize].block[i * rs..(i + 1) * rs]);
            });
        for (rd, &took) in readers.iter_mut().zip(&takes) {
            rd.pos += took;
        }
        emit(Batch {
            records: &gathered,
            count: sorted.len(),
        })?;
        for rd in readers.iter_mut() {
            if rd.remaining > 0 && rd.buffered() < block / 2 {
                rd.top_up::<T>(record, block, merge_key)?;
            }
        }
    }
}

/// A batch entry: merge key, run, position in the run's block.
type Entry = (u64, u32, u32);

/// Stably merge the consecutive sorted pieces of `a` (lengths `lens`, in run order) by pairwise
/// rounds, each merge split across threads; returns the buffer holding the result.
fn merge_pieces<'a>(a: &'a mut Vec<Entry>, b: &'a mut Vec<Entry>, lens: &[usize]) -> &'a [Entry] {
    let mut bounds: Vec<usize> = std::iter::once(0)
        .chain(lens.iter().scan(0, |at, &l| {
            *at += l;
            Some(*at)
        }))
        .collect();
    bounds.dedup();
    b.resize(a.len(), (0, 0, 0));
    let (mut src, mut dst) = (a, b);
    while bounds.len() > 2 {
        let pairs: Vec<(usize, usize, usize)> = bounds
            .windows(2)
            .step_by(2)
            .enumerate()
            .map(|(p, w)| {
                let end = bounds.get(2 * p + 2).copied().unwrap_or(w[1]);
                (w[0], w[1], end)
            })
            .collect();
        // split dst into the pairs' output ranges and merge them in parallel
        let mut outs: Vec<&mut [Entry]> = Vec::with_capacity(pairs.len());
        let mut rest: &mut [Entry] = &mut dst[..];
        for &(lo, _, hi) in &pairs {
            let (head, tail) = rest.split_at_mut(hi - lo);
            outs.push(head);
            rest = tail;
        }
        let src_ref: &[Entry] = src;
        outs.into_par_iter()
            .zip(pairs.par_iter())
            .for_each(|(out, &(lo, mid, hi))| par_merge(&src_ref[lo..mid], &src_ref[mid..hi], out));
        bounds = pairs
            .iter()
            .map(|p| p.0)
            .chain(std::iter::once(*bounds.last().expect("bounds")))
            .collect();
        std::mem::swap(&mut src, &mut dst);
    }
    src
}

/// Stable merge of sorted `a` and `b` into `out` (equal keys: `a`'s first), split recursively at
/// the middle of the longer side so every thread merges a part.
fn par_merge(a: &[Entry], b: &[Entry], out: &mut [Entry]) {
    if a.len() + b.len() <= 1 << 16 {
        let (mut i, mut j) = (0, 0);
        for o in out.iter_mut() {
            if j >= b.len() || (i < a.len() && a[i].0 <= b[j].0) {
                *o = a[i];
                i += 1;
            } else {
                *o = b[j];
                j += 1;
            }
        }
        return;
    }
    // cut at a pivot of the longer side; elements of the other side go left when they must come
    // before it in the stable order
    let (ma, mb) = if a.len() >= b.len() {
        let ma = a.len() / 2;
        (ma, b.partition_point(|e| e.0 < a[ma].0))
    } else {
        let mb = b.len() / 2;
        (a.partition_point(|e| e.0 <= b[mb].0), mb)
    };
    let (lo, hi) = out.split_at_mut(ma + mb);
    rayon::join(
        || par_merge(&a[..ma], &b[..mb], lo),
        || par_merge(&a[ma..], &b[mb..], hi),
    );
}

/// Split `records` into their key, value and index streams (on all cores; `values` and `index`
/// are empty when the record has none).
fn split_records(
    records: &[u8],
    record: Record,
    keys: &mut [u8],
    values: &mut [u8],
    index: &mut [u8],
) {
    const CHUNK: usize = 1 << 14;
    let rs = record.size();
    let vw = 4 * record.values as usize;
    let iw = 4 * record.index as usize;
    records
        .par_chunks(CHUNK * rs)
        .zip(keys.par_chunks_mut(CHUNK * record.key))
        .for_each(|(recs, ks)| {
            for (i, r) in recs.chunks_exact(rs).enumerate() {
                ks[i * record.key..(i + 1) * record.key].copy_from_slice(&r[..record.key]);
            }
        });
    if vw > 0 {
        values
            .par_chunks_mut(CHUNK * 4)
            .zip(records.par_chunks(CHUNK * rs))
            .for_each(|(vs, recs)| {
                for (i, r) in recs.chunks_exact(rs).enumerate() {
                    vs[i * 4..i * 4 + 4].copy_from_slice(&r[record.key..record.key + 4]);
                }
            });
    }
    if iw > 0 {
        let at = record.key + vw;
        index
            .par_chunks_mut(CHUNK * 4)
            .zip(records.par_chunks(CHUNK * rs))
            .for_each(|(xs, recs)| {
                for (i, r) in recs.chunks_exact(rs).enumerate() {
                    xs[i * 4..i * 4 + 4].copy_from_slice(&r[at..at + 4]);
                }
            });
    }
}

/// Merge the consecutive sorted pieces of `keys` (each `piece` keys; `positions`, when given,
/// their input positions in the same order, merged along) into one stable order, in place: the batch
/// merge of the external sort over pieces held in memory (merge.rs's inputs beyond one binding).
pub(crate) fn merge_in_memory<T: SortKey>(
    keys: &mut [T],
    mut positions: Option<&mut [u32]>,
    piece: usize,
    merge_key: &(impl Fn(&T) -> u64 + Sync),
) -> Result<()> {
    let record = Record {
        key: std::mem::size_of::<T>(),
        values: false,
        index: positions.is_some(),
    };
    let rs = record.size();
    let mut records = vec![0u8; keys.len() * rs];
    records
        .par_chunks_mut(rs)
        .zip(keys.par_iter())
        .enumerate()
        .for_each(|(i, (r, k))| {
            r[..record.key].copy_from_slice(bytemuck::bytes_of(k));
            if let Some(p) = positions.as_deref() {
                r[record.key..].copy_from_slice(&p[i].to_le_bytes());
            }
        });
    let readers: Vec<RunReader<'_>> = records
        .chunks(piece * rs)
        .map(|c| RunReader::memory(c, record))
        .collect();
    let mut written = 0;
    let key_bytes: &mut [u8] = bytemuck::cast_slice_mut(keys);
    merge_runs(readers, record, 1 << 20, merge_key, &mut |batch| {
        let (from, to) = (written, written + batch.count);
        let k = &mut key_bytes[from * record.key..to * record.key];
        let p = match positions.as_deref_mut() {
            Some(p) => bytemuck::cast_slice_mut(&mut p[from..to]),
            None => &mut [][..],
        };
        split_records(batch.records, record, k, &mut [], p);
        written = to;
        Ok(())
    })
}

/// Writes sorted keys (and payloads) to the sink, checking order and counting what went out.
struct Emitter<'a> {
    sink: Sink<'a>,
    verify: bool,
    order: SortOrder,
    last: Option<u64>,
    written: usize,
    print: Fingerprint,
    keys: Vec<u8>,
    values: Vec<u8>,
    index: Vec<u8>,
}

impl<'a> Emitter<'a> {
    fn new(sink: Sink<'a>, verify: bool, order: SortOrder) -> Self {
        Emitter {
            sink,
            verify,
            order,
            last: None,
            written: 0,
            print: Fingerprint::default(),
            keys: Vec::new(),
            values: Vec::new(),
            index: Vec::new(),
        }
    }

    fn check<T: SortKey>(&mut self, keys: &[T], merge_key: &impl Fn(&T) -> u64) -> Result<()> {
        if !self.verify {
            return Ok(());
        }
        let seg = self.order.segment_size.map(|s| s.max(1) as usize);
        for (i, k) in keys.iter().enumerate() {
            let at = self.written + i;
            let m = merge_key(k);
            let fresh_segment = seg.is_some_and(|s| at.is_multiple_of(s));
            if let Some(prev) = self.last {
                if !fresh_segment && m < prev {
                    return Err(Error::VerificationFailed(format!(
                        "out of order at position {at}"
                    )));
                }
            }
            self.last = Some(m);
        }
        self.print = self.print.combine(fingerprint(keys));
        Ok(())
    }

    fn write_all(&mut self, keys: &[u8], values: &[u8], index: &[u8]) -> Result<()> {
        let err =
            |what: &str, e: std::io::Error| Error::Io(format!("cannot write the {what}: {e}"));
        self.sink.keys.write_all(keys).map_err(|e| err("keys", e))?;
        if let Some(w) = self.sink.values.as_deref_mut() {
            w.write_all(values).map_err(|e| err("values", e))?;
        }
        if let Some(w) = self.sink.permutation.as_deref_mut() {
            w.write_all(index).map_err(|e| err("permutation", e))?;
        }
        Ok(())
    }

    /// A sorted run (or segments) straight from the GPU.
    fn emit_sorted<T: SortKey>(
        &mut self,
        keys: &[T],
        values: Option<&[u32]>,
        index: Option<&[u32]>,
        merge_key: &impl Fn(&T) -> u64,
    ) -> Result<()> {
        self.check(keys, merge_key)?;
        self.write_all(
            bytemuck::cast_slice(keys),
            values.map(bytemuck::cast_slice).unwrap_or(&[]),
            index.map(bytemuck::cast_slice).unwrap_or(&[]),
        )?;
        self.written += keys.len();
        Ok(())
    }

    /// A merge batch: split records into the sink's streams.
    fn emit_records<T: SortKey>(
        &mut self,
        records: &[u8],
        record: Record,
        merge_key: &impl Fn(&T) -> u64,
    ) -> Result<()> {
        let count = records.len() / record.size();
        if !record.values && !record.index {
            // keys alone: the records are the keys
            if self.verify {
                self.check(&bytemuck::pod_collect_to_vec::<u8, T>(records), merge_key)?;
            }
            self.write_all(records, &[], &[])?;
            self.written += count;
            return Ok(());
        }
        let mut keys = std::mem::take(&mut self.keys);
        let mut values = std::mem::take(&mut self.values);
        let mut index = std::mem::take(&mut self.index);
        keys.resize(count * record.key, 0);
        values.resize(count * 4 * record.values as usize, 0);
        index.resize(count * 4 * record.index as usize, 0);
        split_records(records, record, &mut keys, &mut values, &mut index);
        if self.verify {
            self.check(&bytemuck::pod_collect_to_vec::<u8, T>(&keys), merge_key)?;
        }
        self.write_all(&keys, &values, &index)?;
        self.written += count;
        (self.keys, self.values, self.index) = (keys, values, index);
        Ok(())
    }

    fn finish(mut self, input: Option<Fingerprint>, n: usize) -> Result<()> {
        if self.written != n {
            return Err(Error::VerificationFailed(format!(
                "{n} keys in, {} out",
                self.written
            )));
        }
        if let Some(input) = input {
            if input != self.print {
                return Err(Error::VerificationFailed(
                    "the output is not a permutation of the input".into(),
                ));
            }
        }
        let err = |e: std::io::Error| Error::Io(format!("cannot write the result: {e}"));
        self.sink.keys.flush().map_err(err)?;
        if let Some(w) = self.sink.values.as_deref_mut() {
            w.flush().map_err(err)?;
        }
        if let Some(w) = self.sink.permutation.as_deref_mut() {
            w.flush().map_err(err)?;
        }
        Ok(())
    }
}

/// The default memory budget: three quarters of the memory available now (on Linux
/// MemAvailable: free memory plus page cache the kernel can drop; the system's own figure on
/// macOS and Windows). None where it is not known: callers then sort in memory unless given a
/// budget.
pub fn default_memory_budget() -> Option<u64> {
    // sysinfo reads the system's own figure on each platform (MemAvailable on Linux)
    let mut system = sysinfo::System::new();
    system.refresh_memory();
    let available = system.available_memory();
    (available > 0).then_some(available / 4 * 3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The parallel pairwise merge is the stable order of the concatenated pieces: pieces past
    /// the sequential cut-off (2^16), empty pieces, few distinct keys (ties across pieces).
    #[test]
    fn merge_pieces_is_a_stable_sort_of_sorted_pieces() {
        let mut r = rand::rngs::StdRng::seed_from_u64(3);
        for lens in [
            vec![0, 5, 0],
            vec![100_000, 3],
            vec![70_000, 90_000, 0, 150_000, 1, 40_000],
            vec![1; 9],
        ] {
            let mut entries: Vec<Entry> = Vec::new();
            for (p, &len) in lens.iter().enumerate() {
                let mut keys: Vec<u64> = (0..len).map(|_| r.random_range(0..50)).collect();
                keys.sort();
                entries.extend(
                    keys.iter()
                        .enumerate()
                        .map(|(i, &k)| (k, p as u32, i as u32)),
                );
            }
            let mut want = entries.clone();
            want.sort_by_key(|e| e.0);
            let mut spare = Vec::new();
            let got = merge_pieces(&mut entries, &mut spare, &lens).to_vec();
            assert_eq!(got, want, "pieces {lens:?}");
        }
    }
}
