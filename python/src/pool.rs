//! The memory of large result arrays, recycled.
//!
//! A fresh result array costs its size in page faults: the kernel zeroes each page on its first
//! touch, and that was about 40% of a `cumsum` of 2^26 float32 on the GPU machine (docs/
//! BENCHMARKS.md). So the memory of a large result is a [`Block`] that goes back to a pool when
//! NumPy frees the array, and the next result of about the same size takes it already faulted
//! in — what CuPy's and PyTorch's caching allocators do for device memory. A loop of calls
//! whose results are dropped (or overwritten) pays the faults once.
//!
//! Decisions: only results of [`POOLED_FROM`] bytes and up are pooled (below that the faults
//! are cheap and the blocks many; a 4 MiB split of 2^20 keys still paid its faults every call); a block serves a result of 80–100% of its size (a much larger
//! block would hold memory the array never uses); the pool keeps at most [`limit`] bytes (an
//! eighth of the machine's memory, at most 4 GiB), dropping the least recently returned blocks
//! beyond it; `gpusort.release_memory()` empties it. A recycled block holds an earlier result's
//! bytes until the new result overwrites them: every caller writes every element before the
//! array is handed to Python (each use below says how), so no stale value is ever seen.

use std::sync::{Mutex, OnceLock};

use numpy::{Element, IntoPyArray, PyArray1};
use pyo3::prelude::*;

/// Results of this many bytes and more take pooled memory.
pub(crate) const POOLED_FROM: usize = 1 << 20;

/// Idle blocks, oldest first, and their bytes.
static POOL: Mutex<(Vec<Vec<u64>>, usize)> = Mutex::new((Vec::new(), 0));

fn lock() -> std::sync::MutexGuard<'static, (Vec<Vec<u64>>, usize)> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The most bytes the pool keeps idle: an eighth of the machine's memory, at most 4 GiB (1 GiB
/// where the size is not known).
pub(crate) fn limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let mut system = sysinfo::System::new();
        system.refresh_memory();
        match system.total_memory() {
            0 => 1 << 30,
            total => (total / 8).min(4 << 30) as usize,
        }
    })
}

/// Bytes the pool holds idle now.
pub(crate) fn held() -> usize {
    lock().1
}

/// Free every idle block; returns the bytes freed.
pub(crate) fn release() -> usize {
    let (blocks, bytes) = std::mem::take(&mut *lock());
    drop(blocks);
    bytes
}

/// An idle block of `words` words or up to a quarter more, the smallest such.
fn take(words: usize) -> Option<Vec<u64>> {
    let mut pool = lock();
    let at = pool
        .0
        .iter()
        .enumerate()
        .filter(|(_, b)| b.len() >= words && b.len() - words <= b.len() / 5)
        .min_by_key(|(_, b)| b.len())
        .map(|(i, _)| i)?;
    let block = pool.0.remove(at);
    pool.1 -= block.len() * 8;
    Some(block)
}

/// Keep `block` for a later result, dropping the oldest blocks beyond [`limit`].
fn give_back(block: Vec<u64>) {
    let bytes = block.len() * 8;
    if bytes > limit() {
        return;
    }
    let dropped = {
        let mut pool = lock();
        pool.0.push(block);
        pool.1 += bytes;
        let mut dropped = Vec::new();
        while pool.1 > limit() {
            let old = pool.0.remove(0);
            pool.1 -= old.len() * 8;
            dropped.push(old);
        }
        dropped
    };
    drop(dropped); // freed outside the lock
}

/// The memory of a result array of `len` elements: a recycled or fresh block where the result is
/// large, else a plain vector. Its contents are unspecified (zeroes or an earlier result's): the
/// caller writes every element.
pub(crate) struct ResultBuf<T> {
    mem: Mem<T>,
}

enum Mem<T> {
    Plain(Vec<T>),
    Block { words: Vec<u64>, len: usize },
}

impl<T: Element + bytemuck::Pod> ResultBuf<T> {
    pub(crate) fn new(len: usize) -> ResultBuf<T> {
        const { assert!(std::mem::align_of::<T>() <= 8) };
        let bytes = len * std::mem::size_of::<T>();
        if bytes < POOLED_FROM {
            return ResultBuf {
                mem: Mem::Plain(gpusort_core::device::transfer::zeroed_vec(len)),
            };
        }
        let words = bytes.div_ceil(8);
        let block =
            take(words).unwrap_or_else(|| gpusort_core::device::transfer::zeroed_vec(words));
        ResultBuf {
            mem: Mem::Block { words: block, len },
        }
    }

    /// A result made elsewhere, as a plain vector (not pooled).
    pub(crate) fn from_vec(v: Vec<T>) -> ResultBuf<T> {
        ResultBuf { mem: Mem::Plain(v) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.mem {
            Mem::Plain(v) => v,
            Mem::Block { words, len } => &mut bytemuck::cast_slice_mut::<u64, T>(words)[..*len],
        }
    }

    /// The NumPy array of the result; a block goes back to the pool when NumPy frees it.
    pub(crate) fn into_pyarray(self, py: Python<'_>) -> PyResult<Bound<'_, PyArray1<T>>> {
        match self.mem {
            Mem::Plain(v) => Ok(v.into_pyarray(py)),
            Mem::Block { words, len } => {
                let ptr = words.as_ptr().cast::<T>();
                let owner = Bound::new(py, Recycled { words: Some(words) })?;
                // SAFETY: `len` elements of T lie at `ptr` (the block holds at least that many
                // bytes, aligned for T: checked in `new`), written by the caller; the block
                // lives in `owner`, which NumPy keeps for as long as the array (its base) and
                // which nothing else reaches, so the memory stays put and unaliased
                let view = unsafe { numpy::ndarray::ArrayView1::from_shape_ptr(len, ptr) };
                // SAFETY: as above: `owner` owns the memory the view points into
                Ok(unsafe { PyArray1::borrow_from_array(&view, owner.into_any()) })
            }
        }
    }
}

/// The owner (NumPy's `base`) of a result array's pooled block: returns it to the pool when the
/// array is freed.
#[pyclass(frozen, module = "gpusort._native")]
pub(crate) struct Recycled {
    words: Option<Vec<u64>>,
}

impl Drop for Recycled {
    fn drop(&mut self) {
        if let Some(words) = self.words.take() {
            give_back(words);
        }
    }
}
