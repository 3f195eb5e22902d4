//! Outputs: each is written to a temporary file — beside its destination (a symbolic link's
//! final target, so the link stays and its target gets the result), or in the system's
//! temporary folder for standard output, pipes and character devices — flushed, and handed to
//! the job's final step (job.rs), which puts every output of the job in place together.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use gpusort_core::KeyType;
use memmap2::MmapMut;

use super::input::{is_std, Input};
use super::job::{self, durable, Target};
use super::npy::npy_header;
use super::platform::{pread_exact, pwrite_all, reserve, start_writeback};
use super::Format;
use crate::error::Error;

/// Whether outputs that are read-only or have other hard links may be replaced (`--force`):
/// read-only ones are then replaced, hard-linked ones written through (every name sees the
/// result).
static FORCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_force(on: bool) {
    FORCE.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn force() -> bool {
    FORCE.load(std::sync::atomic::Ordering::Relaxed)
}

/// The finish of an output whose bytes were written already, in the time split's words (its
/// flush, unless `--no-sync`, is started there and waited for in the final step, which reports
/// its own time).
pub fn finish_words() -> &'static str {
    if durable() {
        "flush started"
    } else {
        "staged (--no-sync: not flushed)"
    }
}

/// The time split's name for writing outputs: whether their flush was started.
pub fn write_words() -> &'static str {
    if durable() {
        "write, flush started"
    } else {
        "write (--no-sync: not flushed)"
    }
}

/// Where `path` would be written, checked before any work: a regular file (new or replaced)
/// whose folder exists, standard output (`-`), or an existing pipe or character device.
/// Directories, block devices and sockets are refused.
pub fn output_target(path: &Path) -> Result<Target, Error> {
    if is_std(path) {
        return Ok(Target::Stdout);
    }
    let shown = path.display();
    if path.as_os_str().to_string_lossy().ends_with('/') || path.file_name().is_none() {
        return Err(Error::usage(format!(
            "cannot write {shown}: it names a folder; give a file name"
        )));
    }
    let real = job::resolve_links(path);
    if std::fs::symlink_metadata(&real).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Error::usage(format!(
            "cannot write {shown}: its symbolic links form a loop (or a chain over 40 long)"
        )));
    }
    match std::fs::metadata(&real) {
        Ok(meta) if meta.is_dir() => Err(Error::usage(format!(
            "cannot write {shown}: it is a directory"
        ))),
        Ok(meta) if meta.is_file() => existing_file(path, real, &meta),
        Ok(meta) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::FileTypeExt;
                let t = meta.file_type();
                if t.is_fifo() || t.is_char_device() {
                    return Ok(Target::Device(real));
                }
            }
            let _ = meta;
            Err(Error::usage(format!(
                "cannot write {shown}: it is neither a file, a pipe nor a character device"
            )))
        }
        Err(_) => {
            let dir = parent(&real);
            if !dir.is_dir() {
                return Err(Error::usage(format!(
                    "cannot write {shown}: folder {} does not exist",
                    dir.display()
                )));
            }
            Ok(Target::File(real))
        }
    }
}

/// An existing regular file as an output: replaced by a rename, unless it is read-only (refused
/// without `--force`) or has other hard links (refused without `--force`, which writes the result
/// through them, as GNU `sort -o` does, rather than splitting the names as a rename would).
fn existing_file(path: &Path, real: PathBuf, meta: &std::fs::Metadata) -> Result<Target, Error> {
    let shown = path.display();
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;
        let writable = std::ffi::CString::new(real.as_os_str().as_bytes())
            .map(|c| {
                // SAFETY: access only reads the NUL-terminated path it is given
                unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
            })
            .unwrap_or(true);
        if (!writable || meta.permissions().readonly()) && !force() {
            return Err(Error::usage(format!(
                "{shown} is read-only (mode {:o}); pass --force to replace it",
                meta.mode() & 0o7777
            )));
        }
        if meta.nlink() > 1 {
            if !force() {
                return Err(Error::usage(format!(
                    "{shown} has {} hard links, which replacing it would split; pass --force to write the result through every name",
                    meta.nlink()
                )));
            }
            return Ok(Target::Through(real));
        }
    }
    #[cfg(not(unix))]
    if meta.permissions().readonly() && !force() {
        return Err(Error::usage(format!(
            "{shown} is read-only; pass --force to replace it"
        )));
    }
    Ok(Target::File(real))
}

/// Check, before any work, that `path` can be written (see [`output_target`]): for a file, that
/// a temporary file can be created beside it (a read-only folder is refused up front, not after
/// the work).
pub fn check_output_path(path: &Path) -> Result<(), Error> {
    if let Target::File(real) | Target::Through(real) = output_target(path)? {
        let dir = parent(&real);
        tempfile::Builder::new()
            .prefix(&job::temp_prefix(""))
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(|e| {
                Error::usage(format!(
                    "cannot write {}: cannot create a file in {} ({})",
                    path.display(),
                    dir.display(),
                    std::io::Error::from(e.kind())
                ))
            })?;
    }
    Ok(())
}

/// The folder a path is in (`.` for a bare name).
pub(crate) fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// How messages name an output.
pub fn shown(path: &Path) -> String {
    if is_std(path) {
        "standard output".into()
    } else {
        path.display().to_string()
    }
}

/// Where a command's result goes: `--in-place` (the input), `-o` (`-` is standard output), or by
/// default INPUT's name with `.SUFFIX` before the extension; standard output when the input is
/// standard input or a pipe (there is no name to put a suffix on).
pub fn resolve_output(
    input: &Input,
    output: Option<&Path>,
    in_place: bool,
    suffix: &str,
) -> Result<PathBuf, Error> {
    let path = &input.path;
    let dest = match (output, in_place) {
        (_, true) => {
            if input.streamed {
                return Err(Error::usage(format!(
                    "--in-place needs a regular file, and {} is a stream; use -o",
                    input.shown()
                )));
            }
            path.to_path_buf()
        }
        (Some(o), false) => o.to_path_buf(),
        (None, false) if input.streamed => PathBuf::from("-"),
        (None, false) => default_name(path, suffix),
    };
    check_output_path(&dest)?;
    Ok(dest)
}

/// `path`'s name with `.SUFFIX` before its extension (`keys.bin` -> `keys.sorted.bin`).
pub fn default_name(path: &Path, suffix: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{suffix}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{suffix}"),
    };
    path.with_file_name(name)
}

/// The format of a command's main result: a name given with `-o` decides (`.npy` gets a NumPy
/// header, any other name raw bytes); in place, by default name, in `--out-dir` and on standard
/// output the result keeps the input's format.
pub fn output_format(input: &Input, explicit: Option<&Path>) -> Format {
    match explicit {
        Some(p) if !is_std(p) => Format::for_output(p),
        _ => input.format,
    }
}

/// A 4-byte payload file matching `len` elements of `input` (raw files are read as u32): 1-D, or
/// an array of the input's own N-D shape.
pub fn open_values(path: &Path, input: &Input) -> Result<Input, Error> {
    let mut v = Input::open_array_or(path, None, KeyType::U32)?;
    v.squeeze();
    if v.shape.len() > 1 && v.shape != input.shape {
        return Err(Error::usage(format!(
            "{} has shape {:?} but {} has shape {:?}; values are 1-D or of the keys' shape",
            v.shown(),
            v.shape,
            input.shown(),
            input.shape
        )));
    }
    if v.dtype.size() != 4 {
        return Err(Error::usage(format!(
            "{} holds {}; values must be 4-byte elements",
            v.shown(),
            v.dtype
        )));
    }
    if v.len != input.len {
        return Err(Error::usage(format!(
            "{} has {} values but {} has {} keys",
            v.shown(),
            v.len,
            input.shown(),
            input.len
        )));
    }
    Ok(v)
}

/// A private directory for an external sort's run files: in `dir` when given, else beside the
/// destination (the system temp directory is often a small in-memory filesystem, which would
/// defeat a sort larger than memory). Removed with everything in it on drop and on interrupt;
/// named after this process so that a later run can remove it if this one is killed.
pub struct RunDir {
    dir: tempfile::TempDir,
}

impl RunDir {
    pub fn new(dir: Option<&Path>, dest: &Path) -> Result<RunDir, Error> {
        let base = match (dir, output_target(dest)) {
            (Some(d), _) => d.to_path_buf(),
            (None, Ok(Target::File(real) | Target::Through(real))) => parent(&real),
            (None, _) => std::env::temp_dir(),
        };
        job::sweep_leftovers(&base);
        let dir = tempfile::Builder::new()
            .prefix(&job::temp_prefix("runs-"))
            .tempdir_in(&base)
            .map_err(|e| {
                Error::usage(format!(
                    "cannot create a run directory in {} (--tmp-dir): {e}",
                    base.display()
                ))
            })?;
        job::track(dir.path());
        Ok(RunDir { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        job::untrack(self.dir.path()); // TempDir removes the directory itself
    }
}

/// An output being written: a temporary file until [`Output::commit`] stages it.
pub struct Output {
    tmp: Option<tempfile::NamedTempFile>,
    target: Target,
    dest: PathBuf,
    /// A part kept aside (see [`Output::aside`]): never flushed nor committed.
    aside: bool,
    /// The N-D shape a .npy header gives a result of as many elements ([`Output::shaped`]).
    shape: Option<Vec<usize>>,
}

impl Output {
    pub fn create(dest: &Path) -> Result<Output, Error> {
        let target = output_target(dest)?;
        let folder = match &target {
            Target::File(real) | Target::Through(real) => parent(real),
            _ => std::env::temp_dir(),
        };
        // jobs writing the same output take turns: the second one fails before it writes
        if let Target::File(real) | Target::Through(real) = &target {
            job::lock_output(real, dest)?;
        }
        job::sweep_leftovers(&folder);
        let prefix = job::temp_prefix("");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // A result file gets the permissions a new file would get (0666 less the umask), not
        // the temporary file's private 0600; a file being replaced keeps its own.
        #[cfg(unix)]
        if let Target::File(_) | Target::Through(_) = target {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let tmp = builder.tempfile_in(&folder).map_err(|e| {
            Error::runtime(format!(
                "cannot create a temporary file in {} for {}: {e}",
                folder.display(),
                shown(dest)
            ))
        })?;
        // a replaced file keeps its owner (where this process may give it) and its mode: the
        // owner first, as a change of owner clears the set-id bits
        if let Target::File(real) = &target {
            if let Ok(meta) = std::fs::metadata(real) {
                #[cfg(unix)]
                {
                    use std::os::unix::fs::MetadataExt;
                    let _ = std::os::unix::fs::fchown(
                        tmp.as_file(),
                        Some(meta.uid()),
                        Some(meta.gid()),
                    );
                    // without the right to give the owner, the group alone where we may
                    let _ = std::os::unix::fs::fchown(tmp.as_file(), None, Some(meta.gid()));
                }
                let _ = tmp.as_file().set_permissions(meta.permissions());
            }
        }
        job::track(tmp.path());
        Ok(Output {
            tmp: Some(tmp),
            target,
            dest: dest.to_path_buf(),
            aside: false,
            shape: None,
        })
    }

    /// A result that keeps an N-D input's `shape` (a sort along the last axis): .npy headers of
    /// as many elements give it; 1-D shapes change nothing.
    pub fn shaped(mut self, shape: &[usize]) -> Output {
        self.shape = (shape.len() > 1).then(|| shape.to_vec());
        self
    }

    /// The shape a .npy header gives `len` elements: [`Output::shaped`]'s where it holds as
    /// many, else 1-D.
    fn shape_of(&self, len: u64) -> Vec<usize> {
        match &self.shape {
            Some(s) if s.iter().product::<usize>() as u64 == len => s.clone(),
            _ => vec![len as usize],
        }
    }

    /// A temporary file beside `dest` for a part of its result kept aside until its place is
    /// known (a partition's other elements): removed when dropped, and its writes start no
    /// writeback, as nothing will ever flush it.
    pub fn aside(dest: &Path) -> Result<Output, Error> {
        let mut out = Output::create(dest)?;
        out.aside = true;
        Ok(out)
    }

    /// Whether writes should start their writeback at once: the output will be flushed.
    fn writeback(&self) -> bool {
        durable() && !self.aside
    }

    /// Write `data` (elements of `dtype`) in `format`, flush it to disk and rename it into place.
    pub fn write_all(
        dest: &Path,
        format: Format,
        dtype: KeyType,
        data: &[u8],
    ) -> Result<(), Error> {
        Output::write_array(dest, format, dtype, &[], data)
    }

    /// [`Output::write_all`] of an array that keeps an N-D `shape` ([`Output::shaped`]).
    pub fn write_array(
        dest: &Path,
        format: Format,
        dtype: KeyType,
        shape: &[usize],
        data: &[u8],
    ) -> Result<(), Error> {
        let mut out = Output::create(dest)?.shaped(shape);
        out.write(format, dtype, data)?;
        out.commit()
    }

    /// Write plain bytes (reports such as bench exports) and put them in place at once, each
    /// file atomically on its own: a report written part by part keeps what it has if a later
    /// part fails.
    pub fn write_bytes_now(dest: &Path, data: &[u8]) -> Result<(), Error> {
        let mut out = Output::create(dest)?;
        let tmp = out.tmp.take().expect("just created");
        let err = |e: std::io::Error| Error::runtime(format!("cannot write {}: {e}", shown(dest)));
        let path = tmp.path().to_path_buf();
        let landed = (|| {
            tmp.as_file().write_all(data)?;
            match &out.target {
                Target::File(real) => {
                    if durable() {
                        tmp.as_file().sync_all()?;
                    }
                    tmp.persist(real).map(drop).map_err(|e| e.error)
                }
                stream => job::copy_to_stream(&tmp.into_temp_path(), stream),
            }
        })();
        job::untrack(&path);
        landed.map_err(err)
    }

    /// A handle on the temporary file, for writers that produce their own format (Parquet, Arrow
    /// IPC, CSV); [`Output::commit`] after they are done.
    pub fn file(&self) -> Result<File, Error> {
        let tmp = self.tmp.as_ref().expect("not yet committed");
        tmp.as_file()
            .try_clone()
            .map_err(|e| Error::runtime(format!("cannot write {}: {e}", shown(&self.dest))))
    }

    /// [`Output::file`] as a buffered stream that starts each 64 MiB's writeback as soon as it is
    /// written (unless `--no-sync`), so the flush at [`Output::commit`] waits for the tail only.
    pub fn sequential(&self) -> Result<StreamWriter, Error> {
        Ok(StreamWriter {
            file: BufWriter::with_capacity(8 << 20, self.file()?),
            written: 0,
            kicked: 0,
        })
    }

    pub fn write(&mut self, format: Format, dtype: KeyType, data: &[u8]) -> Result<(), Error> {
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
    ) -> Result<PositionedWriter<'_>, Error> {
        self.positioned_array(format, dtype, &self.shape_of(len))
    }

    /// [`Output::positioned`] for an array of `shape` (the .npy header says it).
    pub fn positioned_array(
        &mut self,
        format: Format,
        dtype: KeyType,
        shape: &[usize],
    ) -> Result<PositionedWriter<'_>, Error> {
        use std::io::Seek;
        let dest = self.dest.clone();
        let err = |e: std::io::Error| Error::runtime(format!("cannot write {}: {e}", shown(&dest)));
        let mut header = self.stream_array(format, dtype, shape)?;
        header.flush().map_err(err)?;
        drop(header);
        let file = self.tmp.as_mut().expect("not yet committed").as_file_mut();
        let start = file.stream_position().map_err(err)?;
        Ok(PositionedWriter {
            file: self.tmp.as_ref().expect("not yet committed").as_file(),
            start,
            dest: &self.dest,
            writeback: self.writeback(),
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
    ) -> Result<BufWriter<&mut File>, Error> {
        self.stream_array(format, dtype, &self.shape_of(len))
    }

    fn stream_array(
        &mut self,
        format: Format,
        dtype: KeyType,
        shape: &[usize],
    ) -> Result<BufWriter<&mut File>, Error> {
        let dest = self.dest.clone();
        let err = |e: std::io::Error| Error::runtime(format!("cannot write {}: {e}", shown(&dest)));
        let file = self.tmp.as_mut().expect("not yet committed").as_file_mut();
        let mut w = BufWriter::with_capacity(8 << 20, file);
        if format == Format::Npy {
            let shape: Vec<u64> = shape.iter().map(|&n| n as u64).collect();
            w.write_all(&npy_header(dtype, &shape, 0)).map_err(err)?;
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
    ) -> Result<Option<MmapMut>, Error> {
        let dest = self.dest.clone();
        let err = |e: std::io::Error| Error::runtime(format!("cannot write {}: {e}", shown(&dest)));
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

    /// [`Output::positioned`] through a memory map of the output, whose pages
    /// [`MappedWriter::prefault`] can put in place before the data exists (while the GPU starts
    /// and sorts), so that the writes later run at memory speed instead of through the
    /// filesystem's write path one page at a time. None where the output cannot be mapped (then
    /// write through [`Output::positioned`]); nothing is written either way.
    pub fn mapped(
        &mut self,
        format: Format,
        dtype: KeyType,
        len: u64,
    ) -> Result<Option<MappedWriter>, Error> {
        if len == 0 {
            return Ok(None);
        }
        let mapped = match self.map_array(format, dtype, &self.shape_of(len)) {
            Ok(Some(map)) => {
                let file = self.tmp.as_ref().expect("not yet committed").as_file();
                file.try_clone().ok().map(|file| (map, file))
            }
            _ => None,
        };
        let Some((map, file)) = mapped else {
            // unmappable (a filesystem without shared maps, say): the positioned writer writes
            // the file again from its start
            let file = self.tmp.as_mut().expect("not yet committed").as_file_mut();
            file.set_len(0)
                .map_err(|e| Error::runtime(format!("cannot write {}: {e}", shown(&self.dest))))?;
            std::io::Seek::rewind(file)
                .map_err(|e| Error::runtime(format!("cannot write {}: {e}", shown(&self.dest))))?;
            return Ok(None);
        };
        // (where the elements start: the header's length, which Sink::finish writes over)
        let start = file
            .metadata()
            .map(|m| m.len() - map.len() as u64)
            .map_err(|e| Error::runtime(format!("cannot write {}: {e}", shown(&self.dest))))?;
        let writeback = self.writeback();
        Ok(Some(MappedWriter {
            map,
            file,
            start,
            writeback,
        }))
    }

    /// Start writing a result whose length is known only at the end (a compaction): room for
    /// the .npy header of `max_len` elements comes first, elements are appended, and
    /// [`Appender::finish`] writes the header for the real count. [`Output::commit`] after.
    pub fn appender(
        &mut self,
        format: Format,
        dtype: KeyType,
        max_len: u64,
    ) -> Result<Appender<'_>, Error> {
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
            writeback: self.writeback(),
        })
    }

    /// [`Output::appender`] through a map of the output at its longest (`max_len` elements),
    /// whose pages [`Sink::prefault`] can put in place before the data arrives, as
    /// [`Output::mapped`]'s; [`Sink::finish`] cuts the file to what was appended. `exact`: the
    /// appends will come to `max_len` elements (a partition). Positioned appends where the
    /// output cannot be mapped, and for a flushed output of unknown length: its map would fault
    /// in and reserve room it may not use, which the flush then pays for (docs/BENCHMARKS.md).
    pub fn sink(
        &mut self,
        format: Format,
        dtype: KeyType,
        max_len: u64,
        exact: bool,
    ) -> Result<Sink<'_>, Error> {
        if self.writeback() && !exact {
            return Ok(Sink::Appended(self.appender(format, dtype, max_len)?));
        }
        // (the map starts after a header for max_len: as long as the one finish writes)
        match self.mapped(format, dtype, max_len)? {
            Some(w) => Ok(Sink::Mapped(MappedAppender {
                w,
                end: 0,
                format,
                dtype,
                dest: self.dest.clone(),
            })),
            None => Ok(Sink::Appended(self.appender(format, dtype, max_len)?)),
        }
    }

    /// Hand the finished file to the job's final step, which puts every output of the job in
    /// place together once the command has succeeded; its flush to disk (unless `--no-sync`)
    /// starts now on a thread of its own and is waited for in that step, before any rename.
    pub fn commit(mut self) -> Result<(), Error> {
        let tmp = self.tmp.take().expect("commit once");
        if matches!(self.target, Target::File(_)) && durable() {
            let file = tmp
                .as_file()
                .try_clone()
                .map_err(|e| Error::runtime(format!("cannot flush {}: {e}", shown(&self.dest))))?;
            job::flush_behind(file, shown(&self.dest))?;
        }
        job::stage(tmp.into_temp_path(), self.target.clone(), shown(&self.dest));
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let path = tmp.path().to_path_buf();
            drop(tmp); // NamedTempFile removes itself
            job::untrack(&path);
        }
    }
}

/// Bytes each thread writes at a time in [`write_at`].
const WRITE_PIECE: usize = 8 << 20;

/// Write `data` at byte `at` of `file` by positioned writes, in pieces on all cores, starting
/// each piece's writeback at once where the output is to be flushed. Safe to call from several
/// threads at once.
fn write_at(file: &File, at: u64, data: &[u8], writeback: bool) -> std::io::Result<()> {
    use rayon::prelude::*;
    data.par_chunks(WRITE_PIECE)
        .enumerate()
        .try_for_each(|(i, piece)| {
            let pos = at + (i * WRITE_PIECE) as u64;
            pwrite_all(file, piece, pos)?;
            // early writeback keeps the final flush short but slows the writes
            // (docs/BENCHMARKS.md): without a flush it is only a cost
            if writeback {
                start_writeback(file, pos, piece.len());
            }
            Ok(())
        })
}

/// Where an output's elements go, written at positions from any thread (see
/// [`Output::positioned`]).
pub struct PositionedWriter<'a> {
    file: &'a File,
    start: u64,
    dest: &'a Path,
    writeback: bool,
}

/// An output's element bytes in a memory map (see [`Output::mapped`]).
pub struct MappedWriter {
    map: MmapMut,
    /// The output's file (its own descriptor), for starting writeback.
    file: File,
    /// Where the elements start in the file (after a .npy header).
    start: u64,
    /// Whether writes start their writeback at once ([`Output::writeback`]).
    writeback: bool,
}

impl MappedWriter {
    /// What puts every page of the map in place for writing ([`Prefault::run`]), on a thread of
    /// the caller's while this writer goes on being used.
    pub fn prefault(&self) -> Prefault {
        Prefault {
            at: self.map.as_ptr() as usize,
            len: self.map.len(),
        }
    }

    /// The map itself, written (to keep it mapped, or drop it).
    pub fn into_map(self) -> MmapMut {
        self.map
    }

    /// The elements' bytes, for results drained straight into them (a scan's chunks), and what
    /// starts the writeback of each piece once it is there ([`Writeback::started`]).
    pub fn elements_mut(&mut self) -> (&mut [u8], Writeback<'_>) {
        let MappedWriter {
            map,
            file,
            start,
            writeback,
        } = self;
        (
            &mut map[..],
            Writeback {
                file,
                start: *start,
                on: *writeback,
            },
        )
    }

    /// Copy `data` to byte `at` of the elements, on all cores; where the output is to be
    /// flushed, its writeback starts at once (as [`PositionedWriter::write_at`]'s).
    pub fn write_at(&mut self, at: u64, data: &[u8]) {
        use rayon::prelude::*;
        let (elements, writeback) = self.elements_mut();
        let from = at as usize;
        elements[from..from + data.len()]
            .par_chunks_mut(WRITE_PIECE / 8)
            .zip(data.par_chunks(WRITE_PIECE / 8))
            .for_each(|(d, s)| d.copy_from_slice(s));
        writeback.started(at, data.len());
    }
}

/// Starts the writeback of pieces written into a map directly ([`MappedWriter::elements_mut`],
/// [`Carver`]) where the output is to be flushed, as [`MappedWriter::write_at`] does.
pub struct Writeback<'a> {
    file: &'a File,
    start: u64,
    on: bool,
}

impl Writeback<'_> {
    /// Bytes `at..at + len` of the elements are written.
    pub fn started(&self, at: u64, len: usize) {
        if self.on {
            start_writeback(self.file, self.start + at, len);
        }
    }
}

/// How much of an output [`Prefault::run`] faults in: a faulted page is a dirty page of zeros,
/// and past the kernel's dirty threshold (a tenth of free memory by default) the kernel would
/// start writing those zeros to disk before the data arrives. The rest faults in as it is
/// written, on all cores.
pub const PREFAULT_MAX: usize = 1 << 30;

/// The pages of a [`MappedWriter`]'s map, to fault in ahead of the writes. It holds only the
/// range's address: faulting pages in changes no byte, so running it while the writer writes,
/// or after the map is gone (the advice then fails), is harmless.
#[derive(Clone, Copy, Debug)]
pub struct Prefault {
    at: usize,
    len: usize,
}

impl Prefault {
    /// Fault the pages in for writing (Linux: `MADV_POPULATE_WRITE` on a few threads, 64 MiB
    /// at a time; a no-op elsewhere and on kernels before 5.14), the first [`PREFAULT_MAX`]
    /// bytes at most. The pages read as zeros, as the file's reserved blocks do.
    pub fn run(self) {
        #[cfg(target_os = "linux")]
        {
            const PIECE: usize = 64 << 20;
            let Prefault { at, len } = self;
            let len = len.min(PREFAULT_MAX);
            let threads = std::thread::available_parallelism()
                .map_or(1, |n| n.get() / 4)
                .clamp(1, 8);
            let next = std::sync::atomic::AtomicUsize::new(0);
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let from = i * PIECE;
                        if from >= len {
                            break;
                        }
                        // pieces start on a page (the map's first page holds a .npy header's
                        // bytes too: faulting it in is as harmless)
                        let begin = (at + from) & !4095;
                        let end = at + (from + PIECE).min(len);
                        // SAFETY: madvise reads and writes no memory of ours; POPULATE_WRITE only
                        // faults pages in, as a write of their current bytes would
                        let rc = unsafe {
                            libc::madvise(
                                begin as *mut libc::c_void,
                                end - begin,
                                libc::MADV_POPULATE_WRITE,
                            )
                        };
                        if rc != 0 {
                            break; // an older kernel: the writes fault the pages in instead
                        }
                    });
                }
            });
        }
    }
}

/// Appends elements after room for a header written last (see [`Output::appender`]).
pub struct Appender<'a> {
    file: &'a File,
    room: u64,
    end: u64,
    format: Format,
    dtype: KeyType,
    dest: &'a Path,
    writeback: bool,
}

impl Appender<'_> {
    fn err(&self, e: std::io::Error) -> Error {
        Error::runtime(format!("cannot write {}: {e}", shown(self.dest)))
    }

    /// Add `data` (whole elements) after what was appended before.
    pub fn append(&mut self, data: &[u8]) -> Result<(), Error> {
        // (write_at starts each piece's writeback where the output will be flushed)
        write_at(self.file, self.room + self.end, data, self.writeback).map_err(|e| self.err(e))?;
        self.end += data.len() as u64;
        Ok(())
    }

    /// Write the header for the elements appended (.npy; padded to the room left for it).
    pub fn finish(self) -> Result<(), Error> {
        if self.format == Format::Npy {
            let len = self.end / self.dtype.size() as u64;
            let header = npy_header(self.dtype, &[len], self.room as usize);
            pwrite_all(self.file, &header, 0).map_err(|e| self.err(e))?;
        }
        Ok(())
    }
}

/// A mapped [`Appender`] (see [`Output::sink`]).
pub struct MappedAppender {
    /// Its elements start at `w.start`, after room for the .npy header.
    w: MappedWriter,
    end: u64,
    format: Format,
    dtype: KeyType,
    dest: PathBuf,
}

/// Where a result whose length is known only at the end is appended (see [`Output::sink`]).
pub enum Sink<'a> {
    Mapped(MappedAppender),
    Appended(Appender<'a>),
}

impl<'a> Sink<'a> {
    /// What faults the output's pages in ahead of the appends (mapped outputs only).
    pub fn prefault(&self) -> Option<Prefault> {
        match self {
            Sink::Mapped(m) => Some(m.w.prefault()),
            Sink::Appended(_) => None,
        }
    }

    /// Add `data` (whole elements) after what was appended before.
    pub fn append(&mut self, data: &[u8]) -> Result<(), Error> {
        match self {
            Sink::Mapped(m) => {
                if m.end + data.len() as u64 > m.w.map.len() as u64 {
                    return Err(Error::runtime(format!(
                        "more elements than the input holds for {} (an internal error)",
                        shown(&m.dest)
                    )));
                }
                m.w.write_at(m.end, data);
                m.end += data.len() as u64;
                Ok(())
            }
            Sink::Appended(a) => a.append(data),
        }
    }

    /// How streamed results reach this sink: a mapped sink's room is handed out piece by piece
    /// (the [`Carver`]) so that whoever drains a chunk copies it straight into place; any other
    /// sink comes back itself, to be appended to with the drained copy on the writer thread.
    pub fn ends(&mut self) -> (Option<Carver<'_>>, Option<&mut Sink<'a>>) {
        // whole elements of up to 8 bytes are taken one after another from the end
        let aligned = matches!(self, Sink::Mapped(m)
            if (m.w.map.as_ptr() as usize + m.end as usize).is_multiple_of(8));
        if !aligned {
            return (None, Some(self));
        }
        match self {
            Sink::Mapped(m) => {
                let MappedAppender { w, end, dest, .. } = m;
                let from = *end as usize;
                let carver = Carver {
                    free: &mut w.map[from..],
                    end,
                    dest,
                    writeback: Writeback {
                        file: &w.file,
                        start: w.start,
                        on: w.writeback,
                    },
                };
                (Some(carver), None)
            }
            s => (None, Some(s)),
        }
    }

    /// Bytes appended so far.
    #[cfg(test)]
    fn len(&self) -> u64 {
        match self {
            Sink::Mapped(m) => m.end,
            Sink::Appended(a) => a.end,
        }
    }

    /// Append everything appended to `other` (a part kept aside until its place was known).
    pub fn append_sink(&mut self, other: &Sink) -> Result<(), Error> {
        match other {
            Sink::Mapped(o) => self.append(&o.w.map[..o.end as usize]),
            Sink::Appended(o) => {
                let len = o.end;
                let mut buf = vec![0u8; WRITE_PIECE.min(len as usize)];
                let mut at = 0u64;
                while at < len {
                    let piece = &mut buf[..(len - at).min(WRITE_PIECE as u64) as usize];
                    pread_exact(o.file, piece, o.room + at).map_err(|e| {
                        Error::runtime(format!("cannot read back a part of {}: {e}", shown(o.dest)))
                    })?;
                    self.append(piece)?;
                    at += piece.len() as u64;
                }
                Ok(())
            }
        }
    }

    /// Write the .npy header for the elements appended and end the file after them. A mapped
    /// sink hands back its map (to be unmapped at the process's end: crate::exit).
    pub fn finish(self) -> Result<Option<MmapMut>, Error> {
        match self {
            Sink::Mapped(m) => {
                let err = |e: std::io::Error| {
                    Error::runtime(format!("cannot write {}: {e}", shown(&m.dest)))
                };
                if m.format == Format::Npy {
                    let len = m.end / m.dtype.size() as u64;
                    let header = npy_header(m.dtype, &[len], m.w.start as usize);
                    pwrite_all(&m.w.file, &header, 0).map_err(err)?;
                }
                // (the map may go on past the end: nothing reads or writes it there again)
                m.w.file.set_len(m.w.start + m.end).map_err(err)?;
                Ok(Some(m.w.into_map()))
            }
            Sink::Appended(a) => a.finish().map(|()| None),
        }
    }
}

/// A mapped sink's room not yet appended to, handed out in order ([`Sink::ends`]).
pub struct Carver<'s> {
    free: &'s mut [u8],
    /// The sink's length, advanced by each piece taken.
    end: &'s mut u64,
    dest: &'s Path,
    writeback: Writeback<'s>,
}

impl<'s> Carver<'s> {
    /// Take room for the next `n` elements, let `fill` write all of it, start its writeback
    /// (flushed outputs), and hand the piece back for reading.
    pub fn fill<E: bytemuck::Pod>(
        &mut self,
        n: usize,
        fill: impl FnOnce(&mut [E]),
    ) -> Result<&'s [E], Error> {
        let bytes = n * std::mem::size_of::<E>();
        if bytes > self.free.len() {
            return Err(Error::runtime(format!(
                "more elements than the input holds for {} (an internal error)",
                shown(self.dest)
            )));
        }
        let (now, later) = std::mem::take(&mut self.free).split_at_mut(bytes);
        self.free = later;
        let at = *self.end;
        *self.end += bytes as u64;
        // (Sink::ends hands out only maps aligned for 8 bytes, taken in whole elements)
        let room: &mut [E] = bytemuck::cast_slice_mut(now);
        fill(room);
        self.writeback.started(at, bytes);
        Ok(room)
    }
}

/// Results drained for an output: in their place in its map already, or held for the writer
/// thread to append ([`Sink::ends`]).
pub enum Landed<'s, E> {
    InPlace(&'s [E]),
    Held(Vec<E>),
}

impl<'s, E: bytemuck::Pod> Landed<'s, E> {
    /// `n` elements from `fill` for an output: straight into its map through its carver, else
    /// held for [`Landed::append_to`].
    pub fn drain(
        carver: Option<&mut Carver<'s>>,
        n: usize,
        fill: impl FnOnce(&mut [E]),
    ) -> Result<Landed<'s, E>, Error> {
        Ok(match carver {
            Some(c) => Landed::InPlace(c.fill(n, fill)?),
            None => {
                let mut held = vec![E::zeroed(); n];
                fill(&mut held);
                Landed::Held(held)
            }
        })
    }

    pub fn as_slice(&self) -> &[E] {
        match self {
            Landed::InPlace(s) => s,
            Landed::Held(v) => v,
        }
    }

    /// On the writer thread: append what was held to the sink it was drained for.
    pub fn append_to(&self, sink: Option<&mut Sink<'_>>) -> Result<(), Error> {
        match (self, sink) {
            (Landed::Held(v), Some(sink)) => sink.append(bytemuck::cast_slice(v)),
            _ => Ok(()),
        }
    }
}

impl PositionedWriter<'_> {
    /// Write `data` at byte `at` of the elements.
    pub fn write_at(&self, at: u64, data: &[u8]) -> Result<(), Error> {
        write_at(self.file, self.start + at, data, self.writeback)
            .map_err(|e| Error::runtime(format!("cannot write {}: {e}", shown(self.dest))))
    }
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
    pub fn new(bytes: u64, beside: &Path) -> Result<Scratch, Error> {
        let err = |e: std::io::Error| {
            Error::runtime(format!(
                "cannot create a scratch grid of {bytes} bytes: {e}"
            ))
        };
        if bytes <= SCRATCH_IN_MEMORY {
            let map = MmapMut::map_anon(bytes.max(1) as usize).map_err(err)?;
            return Ok(Scratch { map, file: None });
        }
        let dir = match output_target(beside) {
            Ok(Target::File(real) | Target::Through(real)) => parent(&real),
            _ => std::env::temp_dir(),
        };
        job::sweep_leftovers(&dir);
        let file = tempfile::Builder::new()
            .prefix(&job::temp_prefix("scratch-"))
            .tempfile_in(&dir)
            .map_err(err)?;
        job::track(file.path());
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
            job::untrack(&path);
        }
    }
}

/// A sequential writer on an output's temporary file (see [`Output::sequential`]).
pub struct StreamWriter {
    file: BufWriter<File>,
    written: u64,
    kicked: u64,
}

impl StreamWriter {
    const WRITEBACK_BYTES: u64 = 64 << 20;
}

impl Write for StreamWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        // (--no-sync: nothing waits for the disk, so nothing is sent to it early either)
        if self.written - self.kicked >= Self::WRITEBACK_BYTES && durable() {
            self.file.flush()?;
            let f = self.file.get_ref();
            start_writeback(f, self.kicked, (self.written - self.kicked) as usize);
            self.kicked = self.written;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_npy;

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
        assert!(!dest.exists(), "staged until the job's final step");
        crate::finish().unwrap();
        let back = std::fs::read(&dest).unwrap();
        let npy = parse_npy(&back, Some(KeyType::U32)).unwrap();
        assert_eq!(npy.len, data.len() / 4);
        assert!(back[npy.offset..] == data[..]);
    }

    /// A result whose length is known only at the end (a partition: the matching elements, then
    /// the others from a part kept aside) comes out the same through a map of the output at its
    /// longest and through positioned appends, aside parts of either kind, .npy and raw: the
    /// header for the count appended, the file cut where the elements end.
    #[test]
    fn sinks_mapped_and_appended_write_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let max = 3 * WRITE_PIECE as u64 / 4 + 5; // elements: past one write piece of bytes
        let words = |from: u32, n: usize| -> Vec<u8> {
            (0..n as u32)
                .flat_map(|i| (from.wrapping_mul(7919) ^ i).to_le_bytes())
                .collect()
        };
        let mut files = Vec::new();
        for (i, (format, mapped, aside_mapped)) in [
            (Format::Npy, true, true),
            (Format::Npy, false, false),
            (Format::Npy, true, false),
            (Format::Raw, true, true),
            (Format::Raw, false, true),
        ]
        .into_iter()
        .enumerate()
        {
            let dest = dir.path().join(format!("out{i}"));
            let mut out = Output::create(&dest).unwrap();
            let mut aside = Output::aside(&dest).unwrap();
            let mut w = match mapped {
                true => out.sink(format, KeyType::U32, max, true).unwrap(),
                false => Sink::Appended(out.appender(format, KeyType::U32, max).unwrap()),
            };
            let mut r = match aside_mapped {
                true => aside.sink(Format::Raw, KeyType::U32, max, false).unwrap(),
                false => Sink::Appended(aside.appender(Format::Raw, KeyType::U32, max).unwrap()),
            };
            assert_eq!(matches!(w, Sink::Mapped(_)), mapped);
            assert_eq!(matches!(r, Sink::Mapped(_)), aside_mapped);
            // a flushed output of unknown length is appended to, not mapped
            let mut other = Output::create(&dest).unwrap();
            let s = other.sink(format, KeyType::U32, max, false).unwrap();
            assert_eq!(matches!(s, Sink::Mapped(_)), !durable());
            // three chunks, each split in two; the last chunk's matching part is empty
            for (c, (kept, other)) in [(1000, 3), (WRITE_PIECE / 4 + 1, 77_000), (0, 9)]
                .into_iter()
                .enumerate()
            {
                w.append(&words(c as u32, kept)).unwrap();
                r.append(&words(100 + c as u32, other)).unwrap();
            }
            assert_eq!(r.len(), 4 * (3 + 77_000 + 9));
            w.append_sink(&r).unwrap();
            // more elements than the output holds: an error, not a write past its end
            if mapped {
                let room = max as usize * 4 - w.len() as usize;
                assert!(w.append(&vec![0u8; room + 4]).is_err());
            }
            w.finish().unwrap();
            drop(r);
            drop(aside);
            out.commit().unwrap();
            files.push((format, dest));
        }
        crate::finish().unwrap();
        let mut want = Vec::new();
        for (c, kept) in [1000, WRITE_PIECE / 4 + 1, 0].into_iter().enumerate() {
            want.extend(words(c as u32, kept));
        }
        for (c, other) in [3, 77_000, 9].into_iter().enumerate() {
            want.extend(words(100 + c as u32, other));
        }
        for (format, dest) in files {
            let back = std::fs::read(&dest).unwrap();
            let body = match format {
                Format::Npy => {
                    let npy = parse_npy(&back, Some(KeyType::U32)).unwrap();
                    assert_eq!(npy.len, want.len() / 4, "{}", dest.display());
                    &back[npy.offset..]
                }
                Format::Raw => &back[..],
            };
            assert!(body == want, "{}", dest.display());
        }
        // the parts kept aside are gone
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
