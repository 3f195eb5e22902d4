//! File formats (raw little-endian and NumPy .npy) and crash-safe output.
//!
//! Inputs are memory-mapped. Outputs are written to a temporary file in the destination's folder,
//! flushed to disk, and only then renamed over the destination, so an interrupted or failed run
//! leaves any existing file untouched and no half-written output behind.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use gpusort_core::KeyType;
use memmap2::{Mmap, MmapMut};

use crate::error::CliError;

const NPY_MAGIC: &[u8] = b"\x93NUMPY";
/// Deepest bracket nesting accepted in an .npy header (a dict holding a tuple is 2; a structured
/// dtype's list of tuples is 3).
const MAX_NPY_NESTING: i32 = 3;
/// A sane upper bound for an .npy header; real ones are under 4 KiB.
const MAX_NPY_HEADER: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Raw,
    Npy,
}

impl Format {
    /// What an output path asks for: `.npy` by extension, raw otherwise.
    pub fn for_output(path: &Path) -> Format {
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
        {
            Format::Npy
        } else {
            Format::Raw
        }
    }
}

/// One input array: a memory map plus where its elements start.
pub struct Input {
    pub path: PathBuf,
    pub format: Format,
    pub dtype: KeyType,
    pub len: usize,
    /// The .npy header's shape (`[len]` for raw files).
    pub shape: Vec<usize>,
    map: Option<Mmap>,
    offset: usize,
}

fn npy_dtype(descr: &str) -> Option<KeyType> {
    Some(match descr {
        "<u4" => KeyType::U32,
        "<i4" => KeyType::I32,
        "<f4" => KeyType::F32,
        "<u8" => KeyType::U64,
        "<i8" => KeyType::I64,
        "<f8" => KeyType::F64,
        _ => return None,
    })
}

fn npy_descr(t: KeyType) -> &'static str {
    match t {
        KeyType::U32 => "<u4",
        KeyType::I32 => "<i4",
        KeyType::F32 => "<f4",
        KeyType::U64 => "<u8",
        KeyType::I64 => "<i8",
        KeyType::F64 => "<f8",
    }
}

/// What an .npy header says, checked against the bytes that follow it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyLayout {
    pub dtype: KeyType,
    pub shape: Vec<usize>,
    /// Elements (the product of the shape).
    pub len: usize,
    /// Where the elements start.
    pub offset: usize,
}

/// Parse and check a whole .npy file's bytes: magic, version, header length, the header itself
/// (through npyz), dtype (one gpusort handles, matching `dtype` if given), C order, at least one
/// dimension, and a data size that matches the shape. Errors read as the end of a sentence
/// about the file ("is not a valid .npy file: ..."). Never panics, whatever the bytes (fuzzed:
/// fuzz/fuzz_targets/npy_header.rs).
pub fn parse_npy(bytes: &[u8], dtype: Option<KeyType>) -> Result<NpyLayout, String> {
    let bad = |why: String| format!("is not a valid .npy file: {why}");
    if !bytes.starts_with(NPY_MAGIC) {
        return Err(bad("missing the \\x93NUMPY magic".into()));
    }
    if bytes.len() < 10 {
        return Err(bad("truncated header".into()));
    }
    let (len_bytes, header_len) = match bytes[6] {
        1 => (2, u16::from_le_bytes([bytes[8], bytes[9]]) as usize),
        2 | 3 if bytes.len() >= 12 => (
            4,
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
        ),
        v => return Err(bad(format!("unsupported format version {v}"))),
    };
    let offset = 8 + len_bytes + header_len;
    if header_len > MAX_NPY_HEADER || offset > bytes.len() {
        return Err(bad(format!(
            "header length {header_len} does not fit the file"
        )));
    }
    // npyz's header parser backtracks exponentially on deeply nested brackets (found by fuzzing:
    // a 100-byte file held it for hours). NumPy writes a flat dict holding one shape tuple
    // (structured dtypes, which gpusort refuses anyway, nest a little deeper), so refuse deeper
    // nesting before parsing.
    let depth = bytes[8 + len_bytes..offset]
        .iter()
        .scan(0i32, |d, &b| {
            match b {
                b'(' | b'[' | b'{' => *d += 1,
                b')' | b']' | b'}' => *d -= 1,
                _ => {}
            }
            Some(*d)
        })
        .max()
        .unwrap_or(0);
    if depth > MAX_NPY_NESTING {
        return Err(bad(format!(
            "its header nests brackets {depth} deep; NumPy headers are a flat dict"
        )));
    }
    let mut reader: &[u8] = &bytes[..offset];
    let header = npyz::NpyHeader::from_reader(&mut reader).map_err(|e| bad(e.to_string()))?;
    let npy = npyz::NpyFile::with_header(header, std::io::empty());
    let descr = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => {
            return Err(bad(format!(
                "structured dtype {} is not supported",
                other.descr()
            )))
        }
    };
    let file_dtype = npy_dtype(&descr).ok_or_else(|| {
        format!(
            "holds dtype '{descr}'; gpusort handles little-endian u32, i32, f32, u64, i64 and f64"
        )
    })?;
    if let Some(asked) = dtype {
        if asked != file_dtype {
            return Err(format!("holds {file_dtype} but --dtype {asked} was given"));
        }
    }
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&n| usize::try_from(n).map_err(|_| bad(format!("axis of {n} elements"))))
        .collect::<Result<_, _>>()?;
    if shape.is_empty() {
        return Err("is 0-D (a single value), not an array to work on".into());
    }
    if npy.order() == npyz::Order::Fortran {
        return Err("is in Fortran order; save it in C order".into());
    }
    let len = shape
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n))
        .ok_or_else(|| bad(format!("the shape {shape:?} is too large")))?;
    let data = bytes.len() - offset;
    if Some(data) != len.checked_mul(file_dtype.size()) {
        return Err(bad(format!(
            "the header says {len} elements ({} bytes) but {data} bytes follow",
            len.saturating_mul(file_dtype.size())
        )));
    }
    Ok(NpyLayout {
        dtype: file_dtype,
        shape,
        len,
        offset,
    })
}

impl Input {
    /// Open a 1-D array; `dtype` is required for raw files and, for .npy files, must match the
    /// header.
    pub fn open(path: &Path, dtype: Option<KeyType>) -> Result<Input, CliError> {
        let input = Input::open_array(path, dtype)?;
        if input.shape.len() != 1 {
            return Err(CliError::usage(format!(
                "{} is {}-D (shape {:?}); this command takes 1-D arrays",
                path.display(),
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
    ) -> Result<Input, CliError> {
        match dtype {
            Some(d) => Input::open_array(path, Some(d)),
            None => Input::open_array(path, None)
                .or_else(|_| Input::open_array(path, Some(raw_default))),
        }
    }

    /// Open an array of any number of dimensions (C order); raw files are 1-D until a caller
    /// gives them a shape.
    pub fn open_array(path: &Path, dtype: Option<KeyType>) -> Result<Input, CliError> {
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| CliError::usage(format!("cannot read {shown}: {e}")))?;
        if meta.is_dir() {
            return Err(CliError::usage(format!(
                "{shown} is a directory, not a file"
            )));
        }
        let file =
            File::open(path).map_err(|e| CliError::usage(format!("cannot read {shown}: {e}")))?;
        // SAFETY: the map is read-only; gpusort never writes to its inputs, and the docs warn that
        // another process truncating an input during a run is undefined, as with any mmap reader.
        let map = if meta.len() == 0 {
            None
        } else {
            Some(
                unsafe { Mmap::map(&file) }
                    .map_err(|e| CliError::usage(format!("cannot map {shown}: {e}")))?,
            )
        };
        let bytes: &[u8] = map.as_deref().unwrap_or(&[]);
        let is_npy = bytes.starts_with(NPY_MAGIC) || Format::for_output(path) == Format::Npy;
        if !is_npy {
            let dtype = dtype.ok_or_else(|| {
                CliError::usage(format!(
                    "{shown} is a raw file: say what it holds with --dtype"
                ))
            })?;
            if !bytes.len().is_multiple_of(dtype.size()) {
                return Err(CliError::usage(format!(
                    "{shown} has {} bytes, not a multiple of the {}-byte size of {dtype}",
                    bytes.len(),
                    dtype.size()
                )));
            }
            return Ok(Input {
                path: path.into(),
                format: Format::Raw,
                dtype,
                len: bytes.len() / dtype.size(),
                shape: vec![bytes.len() / dtype.size()],
                map,
                offset: 0,
            });
        }
        let npy = parse_npy(bytes, dtype).map_err(|e| CliError::usage(format!("{shown} {e}")))?;
        Ok(Input {
            path: path.into(),
            format: Format::Npy,
            dtype: npy.dtype,
            len: npy.len,
            shape: npy.shape,
            map,
            offset: npy.offset,
        })
    }

    /// The element bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map
            .as_deref()
            .map(|m| &m[self.offset..])
            .unwrap_or(&[])
    }

    /// The elements in place in the map where they are aligned for `T` (they are: maps start on
    /// a page and .npy data on a multiple of 64), else a copy.
    pub fn elements<T: bytemuck::Pod>(&self) -> std::borrow::Cow<'_, [T]> {
        match bytemuck::try_cast_slice(self.bytes()) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => std::borrow::Cow::Owned(self.to_vec()),
        }
    }

    /// The elements as a new vector of `T`, copied out of the map on all cores (one thread
    /// faulting in and copying a 1 GiB map took 0.58 s on the GPU machine, NumPy's read 0.32 s).
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

/// Temporary files currently being written, removed by the interrupt handler.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Remember a temporary file for the interrupt handler.
fn track(path: &Path) {
    pending().push(path.to_path_buf());
}

/// Forget a temporary file that was renamed into place or removed.
fn untrack(path: &Path) {
    pending().retain(|p| p != path);
}

/// Remove every pending temporary file or run directory (from the Ctrl-C / SIGTERM handler).
pub fn remove_pending() {
    for p in pending().drain(..) {
        if p.is_dir() {
            let _ = std::fs::remove_dir_all(p);
        } else {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A private directory for an external sort's run files: in `dir` when given, else beside the
/// destination (the system temp directory is often a small in-memory filesystem, which would
/// defeat a sort larger than memory). Removed with everything in it on drop and on interrupt.
pub struct RunDir {
    dir: tempfile::TempDir,
}

impl RunDir {
    pub fn new(dir: Option<&Path>, dest: &Path) -> Result<RunDir, CliError> {
        let base = dir.map(Path::to_path_buf).unwrap_or_else(|| parent(dest));
        let dir = tempfile::Builder::new()
            .prefix(".gpusort-runs-")
            .tempdir_in(&base)
            .map_err(|e| {
                CliError::usage(format!(
                    "cannot create a run directory in {} (--tmp-dir): {e}",
                    base.display()
                ))
            })?;
        track(dir.path());
        Ok(RunDir { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        untrack(self.dir.path()); // TempDir removes the directory itself
    }
}

/// Where a command's result goes: `--in-place` (the input), `-o` (never the input unless
/// in place), or by default INPUT's name with `.SUFFIX` before the extension.
pub fn resolve_output(
    input: &Path,
    output: Option<&Path>,
    in_place: bool,
    suffix: &str,
) -> Result<PathBuf, CliError> {
    let dest = match (output, in_place) {
        (_, true) => input.to_path_buf(),
        (Some(o), false) => {
            if same_file(o, input) {
                return Err(CliError::usage(format!(
                    "output {} is the input; pass --in-place to replace it",
                    o.display()
                )));
            }
            o.to_path_buf()
        }
        (None, false) => {
            let stem = input
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "out".into());
            let name = match input.extension() {
                Some(ext) => format!("{stem}.{suffix}.{}", ext.to_string_lossy()),
                None => format!("{stem}.{suffix}"),
            };
            input.with_file_name(name)
        }
    };
    check_output_path(&dest)?;
    Ok(dest)
}

/// Whether two paths name the same existing file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// A 4-byte payload file matching `len` elements of `input`.
pub fn open_values(path: &Path, input: &Input) -> Result<Input, CliError> {
    let v = Input::open(path, None).or_else(|_| Input::open(path, Some(KeyType::U32)))?;
    if v.dtype.size() != 4 {
        return Err(CliError::usage(format!(
            "{} holds {}; values must be 4-byte elements",
            path.display(),
            v.dtype
        )));
    }
    if v.len != input.len {
        return Err(CliError::usage(format!(
            "{} has {} values but {} has {} keys",
            path.display(),
            v.len,
            input.path.display(),
            input.len
        )));
    }
    Ok(v)
}

/// Check that extra outputs can be written and are not the input.
pub fn check_extra_output(path: &Path, input: &Path) -> Result<(), CliError> {
    check_output_path(path)?;
    if same_file(path, input) {
        return Err(CliError::usage(format!(
            "{} is the input; choose another file",
            path.display()
        )));
    }
    Ok(())
}

/// Check, before any work, that `path` can be written: its folder exists.
pub fn check_output_path(path: &Path) -> Result<(), CliError> {
    let dir = parent(path);
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "cannot write {}: folder {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    if path.is_dir() {
        return Err(CliError::usage(format!(
            "cannot write {}: it is a directory",
            path.display()
        )));
    }
    Ok(())
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// An output being written: a temporary file beside the destination until [`Output::commit`].
pub struct Output {
    tmp: Option<tempfile::NamedTempFile>,
    dest: PathBuf,
}

impl Output {
    pub fn create(dest: &Path) -> Result<Output, CliError> {
        check_output_path(dest)?;
        let mut builder = tempfile::Builder::new();
        builder.prefix(".gpusort-").suffix(".tmp");
        // A result file gets the permissions a new file would get (0666 less the umask), not
        // the temporary file's private 0600; a file being replaced keeps its own.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let tmp = builder.tempfile_in(parent(dest)).map_err(|e| {
            CliError::runtime(format!(
                "cannot create a temporary file beside {}: {e}",
                dest.display()
            ))
        })?;
        if let Ok(meta) = std::fs::metadata(dest) {
            let _ = tmp.as_file().set_permissions(meta.permissions());
        }
        track(tmp.path());
        Ok(Output {
            tmp: Some(tmp),
            dest: dest.to_path_buf(),
        })
    }

    /// Write `data` (elements of `dtype`) in `format`, flush it to disk and rename it into place.
    pub fn write_all(
        dest: &Path,
        format: Format,
        dtype: KeyType,
        data: &[u8],
    ) -> Result<(), CliError> {
        let mut out = Output::create(dest)?;
        out.write(format, dtype, data)?;
        out.commit()
    }

    /// Write plain bytes (reports) crash-safely.
    pub fn write_bytes(dest: &Path, data: &[u8]) -> Result<(), CliError> {
        let mut out = Output::create(dest)?;
        let tmp = out.tmp.as_mut().expect("not yet committed");
        tmp.write_all(data)
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", dest.display())))?;
        out.commit()
    }

    pub fn write(&mut self, format: Format, dtype: KeyType, data: &[u8]) -> Result<(), CliError> {
        let len = (data.len() / dtype.size()) as u64;
        self.positioned(format, dtype, len)?.write_at(0, data)
    }

    /// Write the header (for .npy) of `len` elements of `dtype` now and return a writer that
    /// puts element bytes at any position, from any thread (results written while later parts
    /// still download); [`Output::commit`] after it is dropped.
    pub fn positioned(
        &mut self,
        format: Format,
        dtype: KeyType,
        len: u64,
    ) -> Result<PositionedWriter<'_>, CliError> {
        use std::io::Seek;
        let dest = self.dest.clone();
        let err =
            |e: std::io::Error| CliError::runtime(format!("cannot write {}: {e}", dest.display()));
        let mut header = self.stream(format, dtype, len)?;
        header.flush().map_err(err)?;
        drop(header);
        let file = self.tmp.as_mut().expect("not yet committed").as_file_mut();
        let start = file.stream_position().map_err(err)?;
        Ok(PositionedWriter {
            file: self.tmp.as_ref().expect("not yet committed").as_file(),
            start,
            dest: &self.dest,
        })
    }

    /// Start writing `len` elements of `dtype` in `format` piece by piece: the header (for .npy)
    /// goes out now, the elements through the returned writer; [`Output::commit`] after it is
    /// flushed and dropped.
    pub fn stream(
        &mut self,
        format: Format,
        dtype: KeyType,
        len: u64,
    ) -> Result<BufWriter<&mut File>, CliError> {
        let dest = self.dest.clone();
        let err =
            |e: std::io::Error| CliError::runtime(format!("cannot write {}: {e}", dest.display()));
        let file = self.tmp.as_mut().expect("not yet committed").as_file_mut();
        let mut w = BufWriter::with_capacity(8 << 20, file);
        if format == Format::Npy {
            w.write_all(&npy_header(dtype, &[len], 0)).map_err(err)?;
        }
        Ok(w)
    }

    /// Size the output for an array of `shape` and map its element bytes for writing in place
    /// (results larger than RAM are written through the map; the header comes first for .npy).
    /// Call [`Output::commit`] after the map is flushed and dropped.
    pub fn map_array(
        &mut self,
        format: Format,
        dtype: KeyType,
        shape: &[usize],
    ) -> Result<Option<MmapMut>, CliError> {
        let dest = self.dest.clone();
        let err =
            |e: std::io::Error| CliError::runtime(format!("cannot write {}: {e}", dest.display()));
        let file = self.tmp.as_mut().expect("not yet committed").as_file_mut();
        let mut header = Vec::new();
        if format == Format::Npy {
            let shape: Vec<u64> = shape.iter().map(|&n| n as u64).collect();
            header = npy_header(dtype, &shape, 0);
        }
        let data = shape.iter().product::<usize>() as u64 * dtype.size() as u64;
        file.write_all(&header).map_err(err)?;
        reserve(file, header.len() as u64 + data).map_err(err)?;
        if data == 0 {
            return Ok(None);
        }
        // SAFETY: the temporary file is ours alone (created with O_EXCL, unlinked on failure).
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(header.len() as u64)
                .len(data as usize)
                .map_mut(&*file)
        }
        .map_err(err)?;
        Ok(Some(map))
    }

    /// Start writing a result whose length is known only at the end (a compaction): room for
    /// the .npy header of `max_len` elements comes first, elements are appended, and
    /// [`Appender::finish`] writes the header for the real count. [`Output::commit`] after.
    pub fn appender(
        &mut self,
        format: Format,
        dtype: KeyType,
        max_len: u64,
    ) -> Result<Appender<'_>, CliError> {
        let room = match format {
            Format::Npy => npy_header(dtype, &[max_len], 0).len() as u64,
            Format::Raw => 0,
        };
        Ok(Appender {
            file: self.tmp.as_ref().expect("not yet committed").as_file(),
            room,
            end: 0,
            format,
            dtype,
            dest: &self.dest,
        })
    }

    /// Flush to disk and atomically rename over the destination.
    pub fn commit(mut self) -> Result<(), CliError> {
        let tmp = self.tmp.take().expect("commit once");
        let tmp_path = tmp.path().to_path_buf();
        tmp.as_file()
            .sync_all()
            .map_err(|e| CliError::runtime(format!("cannot flush {}: {e}", self.dest.display())))?;
        // Test hook (docs/RELIABILITY.md): hold the finished temporary file before the rename so
        // a test can interrupt gpusort at its most delicate moment.
        if let Some(ms) = std::env::var("GPUSORT_TEST_STALL_BEFORE_RENAME_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        tmp.persist(&self.dest).map_err(|e| {
            CliError::runtime(format!(
                "cannot rename into {}: {}",
                self.dest.display(),
                e.error
            ))
        })?;
        untrack(&tmp_path);
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let path = tmp.path().to_path_buf();
            drop(tmp); // NamedTempFile removes itself
            untrack(&path);
        }
    }
}

/// Bytes each thread writes at a time in [`write_at`].
const WRITE_PIECE: usize = 8 << 20;

/// Write `data` at byte `at` of `file` by positioned writes, in pieces on all cores, starting
/// each piece's writeback at once: copying 1 GiB into the page cache on one thread took longer
/// than the GPU sort of it (docs/BENCHMARKS.md). Safe to call from several threads at once.
fn write_at(file: &File, at: u64, data: &[u8]) -> std::io::Result<()> {
    use rayon::prelude::*;
    data.par_chunks(WRITE_PIECE)
        .enumerate()
        .try_for_each(|(i, piece)| {
            let pos = at + (i * WRITE_PIECE) as u64;
            pwrite_all(file, piece, pos)?;
            start_writeback(file, pos, piece.len());
            Ok(())
        })
}

#[cfg(unix)]
fn pwrite_all(file: &File, buf: &[u8], at: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(buf, at)
}

#[cfg(windows)]
fn pwrite_all(file: &File, mut buf: &[u8], mut at: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        let n = file.seek_write(buf, at)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n..];
        at += n as u64;
    }
    Ok(())
}

/// Where an output's elements go, written at positions from any thread (see
/// [`Output::positioned`]).
pub struct PositionedWriter<'a> {
    file: &'a File,
    start: u64,
    dest: &'a Path,
}

/// Appends elements after room for a header written last (see [`Output::appender`]).
pub struct Appender<'a> {
    file: &'a File,
    room: u64,
    end: u64,
    format: Format,
    dtype: KeyType,
    dest: &'a Path,
}

impl Appender<'_> {
    fn err(&self, e: std::io::Error) -> CliError {
        CliError::runtime(format!("cannot write {}: {e}", self.dest.display()))
    }

    /// Add `data` (whole elements) after what was appended before.
    pub fn append(&mut self, data: &[u8]) -> Result<(), CliError> {
        write_at(self.file, self.room + self.end, data).map_err(|e| self.err(e))?;
        start_writeback(self.file, self.room + self.end, data.len());
        self.end += data.len() as u64;
        Ok(())
    }

    /// Add the first `len` bytes of `other`'s temporary file (a part written aside until its
    /// place was known), in pieces.
    pub fn append_output(&mut self, other: &Output, len: u64) -> Result<(), CliError> {
        use std::os::unix::fs::FileExt;
        let from = other.tmp.as_ref().expect("not yet committed").as_file();
        let mut buf = vec![0u8; WRITE_PIECE.min(len as usize)];
        let mut at = 0u64;
        while at < len {
            let piece = &mut buf[..(len - at).min(WRITE_PIECE as u64) as usize];
            from.read_exact_at(piece, at).map_err(|e| {
                CliError::runtime(format!(
                    "cannot read back a part of {}: {e}",
                    other.dest.display()
                ))
            })?;
            self.append(piece)?;
            at += piece.len() as u64;
        }
        Ok(())
    }

    /// Write the header for the elements appended (.npy; padded to the room left for it).
    pub fn finish(self) -> Result<(), CliError> {
        if self.format == Format::Npy {
            let len = self.end / self.dtype.size() as u64;
            let header = npy_header(self.dtype, &[len], self.room as usize);
            pwrite_all(self.file, &header, 0).map_err(|e| self.err(e))?;
        }
        Ok(())
    }
}

/// The .npy (version 1) header of an array of `shape` and `dtype`, padded with spaces before its
/// closing newline to `min_len` bytes where shorter (the format only asks that the data start
/// at a multiple of 64, so a header may be longer than it needs; NumPy reads it).
fn npy_header(dtype: KeyType, shape: &[u64], min_len: usize) -> Vec<u8> {
    use npyz::WriterBuilder;
    let dt = npyz::DType::Plain(npy_descr(dtype).parse().expect("valid type string"));
    let mut h = Vec::new();
    npyz::WriteOptions::new_header_only()
        .dtype(dt)
        .shape(shape)
        .writer(&mut h)
        .write_header_only()
        .expect("writing to memory");
    if h.len() < min_len && h.len() >= 10 && h[6] == 1 {
        let extra = min_len - h.len();
        let newline = h.len() - 1;
        h.splice(newline..newline, std::iter::repeat_n(b' ', extra));
        let dict_len = u16::from_le_bytes([h[8], h[9]]) as usize + extra;
        h[8..10].copy_from_slice(&(dict_len as u16).to_le_bytes());
    }
    h
}

impl PositionedWriter<'_> {
    /// Write `data` at byte `at` of the elements.
    pub fn write_at(&self, at: u64, data: &[u8]) -> Result<(), CliError> {
        write_at(self.file, self.start + at, data)
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", self.dest.display())))
    }
}

/// Ask the kernel to start writing a just-written range to disk now, so the fsync before the
/// rename waits only for the tail instead of the whole file (Linux; a hint, errors ignored: the
/// fsync still decides). On the GPU machine the fsync of 1 GiB alone took 0.40-0.53 s after the
/// writes.
#[allow(unused_variables)]
fn start_writeback(file: &File, at: u64, len: usize) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: a plain syscall on an open descriptor we own.
        unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                at as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
    }
}

/// Give `file` its final length with the disk space really allocated, so writes through a memory
/// map cannot hit a full disk later (that would be SIGBUS, not an error we can clean up after).
fn reserve(file: &File, len: u64) -> std::io::Result<()> {
    file.set_len(len)?;
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: a plain syscall on an open descriptor we own.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
        // filesystems without fallocate (EOPNOTSUPP/EINVAL) keep the sparse file
        if rc != 0 && rc != libc::EOPNOTSUPP && rc != libc::EINVAL {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
    }
    Ok(())
}

/// A grid-sized work area: anonymous memory for grids that fit comfortably in RAM, otherwise a
/// temporary file beside the output (removed on drop and by the interrupt handler).
pub struct Scratch {
    map: MmapMut,
    file: Option<tempfile::NamedTempFile>,
}

/// Grids up to this size get anonymous memory as scratch.
const SCRATCH_IN_MEMORY: u64 = 4 << 30;

impl Scratch {
    pub fn new(bytes: u64, beside: &Path) -> Result<Scratch, CliError> {
        let err = |e: std::io::Error| {
            CliError::runtime(format!(
                "cannot create a scratch grid of {bytes} bytes: {e}"
            ))
        };
        if bytes <= SCRATCH_IN_MEMORY {
            let map = MmapMut::map_anon(bytes.max(1) as usize).map_err(err)?;
            return Ok(Scratch { map, file: None });
        }
        let file = tempfile::Builder::new()
            .prefix(".gpusort-scratch-")
            .tempfile_in(parent(beside))
            .map_err(err)?;
        track(file.path());
        reserve(file.as_file(), bytes).map_err(err)?;
        // SAFETY: a private temporary file no one else opens.
        let map = unsafe { MmapMut::map_mut(file.as_file()) }.map_err(err)?;
        Ok(Scratch {
            map,
            file: Some(file),
        })
    }

    pub fn bytes(&mut self) -> &mut [u8] {
        &mut self.map[..]
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(f) = &self.file {
            let path = f.path().to_path_buf();
            untrack(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large outputs are written by positioned writes on all cores: every byte lands in place,
    /// after a header, and the file ends where the data ends.
    #[test]
    fn parallel_writes_land_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("big.npy");
        let data: Vec<u8> = (0..5 * WRITE_PIECE + 12)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        Output::write_all(&dest, Format::Npy, KeyType::U32, &data).unwrap();
        let back = std::fs::read(&dest).unwrap();
        let npy = parse_npy(&back, Some(KeyType::U32)).unwrap();
        assert_eq!(npy.len, data.len() / 4);
        assert!(back[npy.offset..] == data[..]);
    }
}
