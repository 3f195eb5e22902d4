//! Inputs: regular files are memory-mapped; standard input (`-`), pipes, FIFOs and files whose
//! size the system does not know up front (`/proc`) are read to their end, into memory within
//! the memory budget and into an unnamed temporary file beyond it. Anything else (a directory,
//! a character or block device such as `/dev/zero`, a socket) is refused.
//!
//! A mapped input is watched: if another process changes it during the run, the job writes
//! nothing (job.rs), and if it shrinks under the map, the SIGBUS handler (main.rs) ends the run
//! with one line after removing the temporary files.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use gpusort_core::KeyType;
use memmap2::Mmap;

use super::npy::{npy_file_len, npy_header_end, parse_npy, MAX_NPY_HEADER, NPY_MAGIC};
use super::{job, Format};
use crate::error::Error;

/// One input array: its bytes plus where its elements start.
pub struct Input {
    pub path: PathBuf,
    pub format: Format,
    pub dtype: KeyType,
    pub len: usize,
    /// The .npy header's shape (`[len]` for raw files).
    pub shape: Vec<usize>,
    /// Whether the bytes came from a stream (stdin, a pipe, a FIFO) rather than a file.
    pub streamed: bool,
    bytes: Bytes,
    offset: usize,
}

enum Bytes {
    Empty,
    Map(Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Empty => &[],
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// Bytes of a streamed input held in memory before the rest goes to a temporary file
/// (`--memory-budget` where the command has one, else 3/4 of the memory available).
static STREAM_MEMORY: AtomicU64 = AtomicU64::new(0);

/// Set how much of a streamed input is held in memory (0: the default).
pub fn set_stream_memory(bytes: u64) {
    STREAM_MEMORY.store(bytes, Ordering::Relaxed);
}

fn stream_memory() -> u64 {
    match STREAM_MEMORY.load(Ordering::Relaxed) {
        0 => gpusort_core::sort::external::default_memory_budget().unwrap_or(u64::MAX),
        b => b,
    }
}

/// Whether `path` names standard input or output.
pub fn is_std(path: &Path) -> bool {
    path == Path::new("-")
}

/// How an input path is read.
enum Source {
    /// A regular file of known size: mapped.
    Mapped(File, std::fs::Metadata),
    /// Standard input, a pipe, a FIFO (true: there is no file to name outputs after or to
    /// replace), or a regular file of unknown size (false): read to the end.
    Stream(Box<dyn Read>, bool),
}

fn open_source(path: &Path) -> Result<Source, Error> {
    let shown = path.display();
    if is_std(path) {
        return Ok(Source::Stream(Box::new(std::io::stdin()), true));
    }
    let meta =
        std::fs::metadata(path).map_err(|e| Error::usage(format!("cannot read {shown}: {e}")))?;
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err(Error::usage(format!("{shown} is a directory, not a file")));
    }
    let open = || File::open(path).map_err(|e| Error::usage(format!("cannot read {shown}: {e}")));
    if kind.is_file() {
        if meta.len() == 0 {
            // /proc and /sys report 0 for files that do hold bytes; reading an empty file costs
            // nothing
            return Ok(Source::Stream(Box::new(open()?), false));
        }
        return Ok(Source::Mapped(open()?, meta));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return Ok(Source::Stream(Box::new(open()?), true));
        }
        let what = if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        Err(Error::usage(format!(
            "{shown} is {what}; gpusort reads files, pipes and standard input (-)"
        )))
    }
    #[cfg(not(unix))]
    Ok(Source::Stream(Box::new(open()?), true))
}

/// Read a stream to its end: into memory up to the budget, the rest through an unnamed
/// temporary file (gone when closed, even after `kill -9`), which is then mapped.
/// A .npy stream is read no further than its header says, plus one byte: a stream longer than
/// that (an endless one too) is refused as soon as it overruns, before it fills memory or disk.
fn read_stream(mut r: impl Read, shown: &str) -> Result<Bytes, Error> {
    let err = |e: std::io::Error| Error::runtime(format!("cannot read {shown}: {e}"));
    let limit = stream_memory();
    let mut buf = Vec::new();
    // the .npy header, where the stream starts with one
    (&mut r).take(12).read_to_end(&mut buf).map_err(err)?;
    let mut whole = None;
    if let Some(end) = npy_header_end(&buf).filter(|&e| e <= MAX_NPY_HEADER + 12) {
        (&mut r)
            .take((end - buf.len()) as u64)
            .read_to_end(&mut buf)
            .map_err(err)?;
        whole = npy_file_len(&buf);
    }
    // at most one byte past the end a .npy header gives
    let mut r = (&mut r).take(whole.map_or(u64::MAX, |w| w + 1 - buf.len() as u64));
    let overrun = |got: u64| -> Error {
        Error::usage(format!(
            "{shown} holds more bytes than its .npy header says ({} in all); stopped reading at byte {got}",
            whole.unwrap_or(0)
        ))
    };
    (&mut r)
        .take((limit + 1).saturating_sub(buf.len() as u64))
        .read_to_end(&mut buf)
        .map_err(err)?;
    if whole.is_some_and(|w| buf.len() as u64 > w) {
        return Err(overrun(buf.len() as u64));
    }
    if (buf.len() as u64) <= limit {
        return Ok(if buf.is_empty() {
            Bytes::Empty
        } else {
            Bytes::Owned(buf)
        });
    }
    let spill_err = |e: std::io::Error| {
        Error::runtime(format!(
            "cannot keep {shown} in a temporary file in {} (set TMPDIR to a larger disk): {e}",
            std::env::temp_dir().display()
        ))
    };
    let mut file = tempfile::tempfile().map_err(spill_err)?;
    file.write_all(&buf).map_err(spill_err)?;
    let held = buf.len() as u64;
    drop(buf);
    let copied = std::io::copy(&mut r, &mut file).map_err(err)?;
    if let Some(w) = whole {
        let got = held + copied;
        if got > w {
            return Err(overrun(got));
        }
    }
    // SAFETY: an unnamed temporary file that no other process can open or truncate.
    let map = unsafe { Mmap::map(&file) }.map_err(spill_err)?;
    Ok(Bytes::Map(map))
}

impl Input {
    /// Open a 1-D array; `dtype` is required for raw files and, for .npy files, must match the
    /// header.
    pub fn open(path: &Path, dtype: Option<KeyType>) -> Result<Input, Error> {
        Input::open_1d(path, dtype, None)
    }

    /// [`Input::open`], reading a raw file without `dtype` as `raw_default`.
    pub fn open_or(
        path: &Path,
        dtype: Option<KeyType>,
        raw_default: KeyType,
    ) -> Result<Input, Error> {
        Input::open_1d(path, dtype, Some(raw_default))
    }

    /// Open an array to sort along its last axis, as `np.sort` does: 1-D, or N-D in C order
    /// (each row on its own, [`Input::rows`]); a column (n, 1) or a row (1, n) is 1-D, as to
    /// every command.
    pub fn open_rows(path: &Path, dtype: Option<KeyType>) -> Result<Input, Error> {
        let mut input = Input::open_any(path, dtype, None)?;
        input.squeeze();
        if input.shape.is_empty() {
            return Err(Error::usage(format!(
                "{} is 0-D (a single value); there is no axis to sort along",
                input.shown()
            )));
        }
        Ok(input)
    }

    /// The length of the rows an N-D array sorts in (its last axis); None for a 1-D array.
    pub fn rows(&self) -> Option<usize> {
        (self.shape.len() > 1).then(|| self.shape[self.shape.len() - 1])
    }

    /// A column (n, 1) or a row (1, n) is a 1-D array to every command that takes one; its
    /// result is 1-D.
    pub(super) fn squeeze(&mut self) {
        if self.shape.len() == 2 && self.shape.contains(&1) {
            self.shape = vec![self.len];
        }
    }

    fn open_1d(
        path: &Path,
        dtype: Option<KeyType>,
        raw_default: Option<KeyType>,
    ) -> Result<Input, Error> {
        let mut input = Input::open_any(path, dtype, raw_default)?;
        input.squeeze();
        if input.shape.len() != 1 {
            return Err(Error::usage(format!(
                "{} is {}-D (shape {:?}); this command takes 1-D arrays",
                input.shown(),
                input.shape.len(),
                input.shape
            )));
        }
        Ok(input)
    }

    /// Open an array as [`Input::open_array`] does, reading a raw file without `dtype` as
    /// `raw_default` (a .npy file's own dtype always wins over the default).
    pub fn open_array_or(
        path: &Path,
        dtype: Option<KeyType>,
        raw_default: KeyType,
    ) -> Result<Input, Error> {
        Input::open_any(path, dtype, Some(raw_default))
    }

    /// Open an array of any number of dimensions (C order); raw files are 1-D until a caller
    /// gives them a shape.
    pub fn open_array(path: &Path, dtype: Option<KeyType>) -> Result<Input, Error> {
        Input::open_any(path, dtype, None)
    }

    /// Every input is opened (and a stream read) exactly once, here.
    fn open_any(
        path: &Path,
        dtype: Option<KeyType>,
        raw_default: Option<KeyType>,
    ) -> Result<Input, Error> {
        let shown = if is_std(path) {
            "standard input".to_string()
        } else {
            path.display().to_string()
        };
        let (bytes, streamed) = match open_source(path)? {
            Source::Mapped(file, meta) => {
                job::watch_input(path, &meta);
                // SAFETY: the map is read-only and gpusort never writes to its inputs. Another
                // process may still change the file: finish() then refuses to write anything,
                // and a file that shrinks under the map raises SIGBUS, which main.rs turns into
                // one line and exit 1 after removing the temporary files.
                let map = unsafe { Mmap::map(&file) }
                    .map_err(|e| Error::usage(format!("cannot map {shown}: {e}")))?;
                (Bytes::Map(map), false)
            }
            Source::Stream(r, stream) => (read_stream(r, &shown)?, stream),
        };
        test_stall_after_open();
        let data = bytes.as_slice();
        let is_npy = data.starts_with(NPY_MAGIC) || Format::for_output(path) == Format::Npy;
        if !is_npy {
            if data.starts_with(b"PK\x03\x04") {
                return Err(Error::usage(format!(
                    "{shown} is a zip archive (.npz?); save one array with numpy.save and pass that .npy file"
                )));
            }
            let dtype = dtype.or(raw_default).ok_or_else(|| {
                Error::usage(format!(
                    "{shown} is a raw file: say what it holds with --dtype"
                ))
            })?;
            if !data.len().is_multiple_of(dtype.size()) {
                return Err(Error::usage(format!(
                    "{shown} has {} bytes, not a multiple of the {}-byte size of {dtype}",
                    data.len(),
                    dtype.size()
                )));
            }
            let len = data.len() / dtype.size();
            return Ok(Input {
                path: path.into(),
                format: Format::Raw,
                dtype,
                len,
                shape: vec![len],
                streamed,
                bytes,
                offset: 0,
            });
        }
        let npy = parse_npy(data, dtype).map_err(|e| Error::usage(format!("{shown} {e}")))?;
        Ok(Input {
            path: path.into(),
            format: Format::Npy,
            dtype: npy.dtype,
            len: npy.len,
            shape: npy.shape,
            streamed,
            bytes,
            offset: npy.offset,
        })
    }

    /// How messages name this input.
    pub fn shown(&self) -> String {
        if is_std(&self.path) {
            "standard input".into()
        } else {
            self.path.display().to_string()
        }
    }

    /// The element bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes.as_slice()[self.offset..]
    }

    /// The elements in place where they are aligned for `T` (maps start on a page and .npy data
    /// on a multiple of 64), else a copy.
    pub fn elements<T: bytemuck::Pod>(&self) -> std::borrow::Cow<'_, [T]> {
        match bytemuck::try_cast_slice(self.bytes()) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => std::borrow::Cow::Owned(self.to_vec()),
        }
    }

    /// The elements as a new vector of `T`, copied on all cores (one thread faulting in and
    /// copying a 1 GiB map was slower than NumPy's read on the GPU machine).
    pub fn to_vec<T: bytemuck::Pod>(&self) -> Vec<T> {
        use rayon::prelude::*;
        let bytes = self.bytes();
        let mut out = vec![T::zeroed(); bytes.len() / std::mem::size_of::<T>()];
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        dst.par_chunks_mut(4 << 20)
            .zip(bytes.par_chunks(4 << 20))
            .for_each(|(d, s)| d.copy_from_slice(s));
        out
    }
}

/// Test hook: a pause after an input is opened, where a test changes the file under a job.
fn test_stall_after_open() {
    crate::test_stall("GPUSORT_TEST_STALL_AFTER_OPEN_MS");
}
