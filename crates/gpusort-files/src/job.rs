//! A job's outputs as one transaction, and what must hold before any of them lands.
//!
//! Every output of a job (keys, `--values-out`, `--argsort`, a partition's parts, every file of a
//! many-file job) is written to a temporary file, then *staged* here, its flush to disk started
//! on the flusher's thread (unless `--no-sync`) so that the command goes on meanwhile. Only when
//! the command has finished without error does [`finish`] make them real, in one short final
//! step: it waits for every flush (the device and maps the command kept are released meanwhile,
//! `crate::exit::release_behind`, as they are during the renames), checks that no input changed
//! while it was read, copies results meant for standard output,
//! pipes and character devices, then renames every staged file into place while holding the
//! lock that the interrupt handler also takes, so an interrupt sees either none or all of the
//! renames. A failure or an interrupt before that step leaves every input and existing output as
//! it was, and the message says what was and was not written.
//!
//! Temporary files and run folders are named after their host and process
//! (`.gpusort-HOST-PID-XXXXXX.tmp`, `.gpusort-runs-HOST-PID-XXXXXX`), so that the next gpusort
//! run that writes to the same folder can remove those a killed run left behind.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use tempfile::TempPath;

use super::platform;
use crate::error::Error;

/// Whether outputs are flushed to disk before they are renamed into place (`--no-sync` turns it
/// off for the process: one choice per command line).
static DURABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

pub fn set_durable(on: bool) {
    DURABLE.store(on, std::sync::atomic::Ordering::Relaxed);
}

pub fn durable() -> bool {
    DURABLE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Where an output goes in the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A regular file (a symbolic link's final target): renamed into place.
    File(PathBuf),
    /// Standard output (`-o -`): copied there, no rename.
    Stdout,
    /// A pipe (FIFO) or character device that exists: opened and written to.
    Device(PathBuf),
    /// A regular file with other hard links, replaced with `--force`: the result is copied into
    /// it (truncated, written, flushed), so that every name sees it.
    Through(PathBuf),
}

impl Target {
    /// Whether the result is copied to its target in the final step rather than renamed there.
    pub fn is_stream(&self) -> bool {
        !matches!(self, Target::File(_))
    }
}

/// A finished temporary file waiting for the final step.
struct Staged {
    tmp: TempPath,
    target: Target,
    shown: String,
}

/// An input as it was when opened, to see whether another process changed it during the run.
struct Watched {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

#[derive(Default)]
struct State {
    /// Temporary files and run folders to remove on an interrupt (staged ones included).
    pending: Vec<PathBuf>,
    staged: Vec<Staged>,
    /// Outputs already in place.
    written: Vec<String>,
    /// The stream being copied in the final step, if any.
    streaming: Option<String>,
    inputs: Vec<Watched>,
    /// Folders already swept for leftovers in this run.
    swept: Vec<PathBuf>,
    /// Folders this job created (`--out-dir`), removed again if it fails while they are empty.
    created: Vec<PathBuf>,
    /// The locks this job holds on its outputs ([`lock_output`]), released when it ends.
    locks: Vec<OutputLock>,
}

static STATE: Mutex<State> = Mutex::new(State {
    pending: Vec::new(),
    staged: Vec::new(),
    written: Vec::new(),
    streaming: None,
    inputs: Vec::new(),
    swept: Vec::new(),
    created: Vec::new(),
    locks: Vec::new(),
});

/// An advisory lock (flock) on a file beside an output, `.NAME.gpusort-lock`, held from the
/// output's first write to the end of the job: two jobs writing the same output cannot both get
/// to the final step, so their outputs never mix. Released by removing the file while holding the
/// lock; a taker checks that the file it locked is still the one under that name.
struct OutputLock {
    /// The output (links resolved).
    dest: PathBuf,
    path: PathBuf,
    _file: std::fs::File,
}

fn lock_path(real: &Path) -> PathBuf {
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    real.with_file_name(format!(".{name}.gpusort-lock"))
}

/// Take the lock on output `real` (`dest` as the user named it, for the message), unless this
/// job holds it already. Another job holding it is a failure (exit 1) before anything is written.
pub(crate) fn lock_output(real: &Path, dest: &Path) -> Result<(), Error> {
    let mut s = state();
    if s.locks.iter().any(|l| l.dest == real) {
        return Ok(());
    }
    let path = lock_path(real);
    let fail = |why: String| {
        Error::runtime(format!(
            "cannot write {}: {why}; nothing was written",
            dest.display()
        ))
    };
    for _ in 0..100 {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| fail(format!("cannot create its lock {}: {e}", path.display())))?;
        match platform::try_lock(&file) {
            Ok(true) => {}
            Ok(false) => {
                return Err(fail(
                    "another gpusort job is writing it (wait for that job, or write elsewhere)"
                        .into(),
                ))
            }
            Err(e) => return Err(fail(format!("cannot lock {}: {e}", path.display()))),
        }
        // the file may have been released (removed) between our open and our lock: then the
        // lock is on a file no other job will look at, so take the one now under that name
        let same = match (file.metadata(), std::fs::metadata(&path)) {
            (Ok(a), Ok(b)) => platform::file_id(&a) == platform::file_id(&b),
            _ => false,
        };
        if same {
            s.pending.push(path.clone());
            s.locks.push(OutputLock {
                dest: real.to_path_buf(),
                path,
                _file: file,
            });
            return Ok(());
        }
    }
    Err(fail("its lock kept changing hands".into()))
}

/// Release every output lock of this job (removing each lock file while it is held).
fn release_locks(s: &mut State) {
    for l in std::mem::take(&mut s.locks) {
        let _ = std::fs::remove_file(&l.path);
        s.pending.retain(|p| p != &l.path);
    }
}

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Remember a temporary file or folder for the interrupt handler.
pub(crate) fn track(path: &Path) {
    state().pending.push(path.to_path_buf());
}

/// Forget a temporary file that was renamed into place or removed.
pub(crate) fn untrack(path: &Path) {
    state().pending.retain(|p| p != path);
}

/// Hand a finished temporary file over to the final step.
pub(crate) fn stage(tmp: TempPath, target: Target, shown: String) {
    state().staged.push(Staged { tmp, target, shown });
}

/// The thread that flushes staged files, in the order they were staged, while the command goes
/// on; [`finish`] closes its queue and waits for it before any rename.
struct Flusher {
    queue: mpsc::Sender<(std::fs::File, String)>,
    /// The first failure's message, once the queue is closed and drained.
    done: std::thread::JoinHandle<Option<String>>,
}

static FLUSHER: Mutex<Option<Flusher>> = Mutex::new(None);

impl Flusher {
    fn start() -> Option<Flusher> {
        let (queue, jobs) = mpsc::channel::<(std::fs::File, String)>();
        let done = std::thread::Builder::new()
            .name("gpusort-flush".into())
            .spawn(move || {
                let mut failed = None;
                for (file, shown) in jobs {
                    if failed.is_none() {
                        failed = flush_now(&file, &shown).err().map(|e| e.message);
                    }
                }
                failed
            })
            .ok()?;
        Some(Flusher { queue, done })
    }

    /// Close the queue and wait for every flush in it: the first failure's message, if any.
    fn wait(self) -> Option<String> {
        drop(self.queue);
        self.done
            .join()
            .unwrap_or_else(|_| Some("the thread flushing the outputs failed".to_string()))
    }
}

/// Flush `file` (the temporary file of the output shown as `shown`) to disk before the final
/// step: on the flusher's thread, or here where no thread can be started.
pub(crate) fn flush_behind(file: std::fs::File, shown: String) -> Result<(), Error> {
    let mut f = FLUSHER.lock().unwrap_or_else(|p| p.into_inner());
    if f.is_none() {
        *f = Flusher::start();
    }
    match f.as_ref() {
        Some(flusher) => match flusher.queue.send((file, shown)) {
            Ok(()) => Ok(()),
            Err(mpsc::SendError((file, shown))) => flush_now(&file, &shown),
        },
        None => flush_now(&file, &shown),
    }
}

fn flush_now(file: &std::fs::File, shown: &str) -> Result<(), Error> {
    file.sync_all()
        .map_err(|e| Error::runtime(format!("cannot flush {shown}: {e}")))
}

/// Wait for every flush started by [`flush_behind`]: the first failure's message, if any, and
/// the seconds waited (None where nothing was flushed behind).
fn wait_flushed() -> (Option<String>, Option<f64>) {
    let flusher = FLUSHER.lock().unwrap_or_else(|p| p.into_inner()).take();
    let Some(flusher) = flusher else {
        return (None, None);
    };
    let t = Instant::now();
    let failed = flusher.wait();
    (failed, Some(t.elapsed().as_secs_f64()))
}

/// What the final step did.
#[derive(Debug, Default)]
pub struct Finished {
    /// The outputs put in place.
    pub written: Vec<String>,
    /// Seconds spent waiting for the outputs' flushes to end (None with `--no-sync`, or where
    /// nothing was flushed).
    pub flush_wait_s: Option<f64>,
}

/// Watch an input that is a regular file: [`finish`] refuses to write anything if its size or
/// modification time changed meanwhile.
pub fn watch_input(path: &Path, meta: &std::fs::Metadata) {
    state().inputs.push(Watched {
        path: path.to_path_buf(),
        len: meta.len(),
        modified: meta.modified().ok(),
    });
}

fn list(names: &[String]) -> String {
    names.join(", ")
}

/// The final step of a job that succeeded: wait for the flushes, check the inputs, then put
/// every staged output in place.
pub fn finish() -> Result<Finished, Error> {
    // the command is done with everything it kept: the driver and the kernel release it while
    // the disk flushes and while a rename frees the output it replaces
    crate::exit::release_behind();
    let (failed, flush_wait_s) = wait_flushed();
    if let Some(message) = failed {
        abandon();
        return Err(Error::runtime(format!("{message}; no output was written")));
    }
    let changed = {
        let s = state();
        s.inputs
            .iter()
            .find(|w| {
                let now = std::fs::metadata(&w.path).ok();
                now.is_none_or(|m| m.len() != w.len || m.modified().ok() != w.modified)
            })
            .map(|w| w.path.display().to_string())
    };
    if let Some(path) = changed {
        abandon();
        return Err(Error::runtime(format!(
            "{path} changed while gpusort was reading it (another process wrote to it); no output was written"
        )));
    }
    // test hook: the finished temporary files held before the final step, where a test
    // interrupts gpusort at its most delicate moment
    crate::test_stall("GPUSORT_TEST_STALL_BEFORE_RENAME_MS");
    // Streams first: they cannot be undone, but nothing has been replaced yet if one fails.
    let streams: Vec<Staged> = {
        let mut s = state();
        let (streams, files) = std::mem::take(&mut s.staged)
            .into_iter()
            .partition(|o| o.target.is_stream());
        s.staged = files;
        streams
    };
    for o in streams {
        state().streaming = Some(o.shown.clone());
        let copied = copy_to_stream(&o.tmp, &o.target);
        let mut s = state();
        s.streaming = None;
        s.pending.retain(|p| p != &*o.tmp);
        if let Err(e) = copied {
            drop(s);
            abandon();
            return Err(Error::runtime(format!(
                "cannot write {}: {e}; no file was changed",
                o.shown
            )));
        }
        s.written.push(o.shown);
    }
    // The renames, under the lock the interrupt handler takes: all of them or, should a rename
    // fail, a message naming what landed and what was left as it was.
    let mut s = state();
    let files = std::mem::take(&mut s.staged);
    let mut rest = files.into_iter();
    while let Some(o) = rest.next() {
        let Target::File(dest) = &o.target else {
            unreachable!("streams went first")
        };
        let tmp_path = o.tmp.to_path_buf();
        match o.tmp.persist(dest) {
            Ok(()) => {
                s.pending.retain(|p| p != &tmp_path);
                s.written.push(o.shown);
            }
            Err(e) => {
                let left: Vec<String> = std::iter::once(o.shown.clone())
                    .chain(rest.map(|r| r.shown.clone()))
                    .collect();
                s.pending.retain(|p| p != &tmp_path);
                let written = if s.written.is_empty() {
                    "nothing was written".to_string()
                } else {
                    format!("written: {}", list(&s.written))
                };
                release_locks(&mut s);
                return Err(Error::runtime(format!(
                    "cannot rename into {}: {}; {written}; left as they were: {}",
                    o.shown,
                    e.error,
                    list(&left)
                )));
            }
        }
    }
    release_locks(&mut s);
    Ok(Finished {
        written: std::mem::take(&mut s.written),
        flush_wait_s,
    })
}

pub(crate) fn copy_to_stream(tmp: &Path, target: &Target) -> std::io::Result<()> {
    use std::io::Write;
    let mut from = std::fs::File::open(tmp)?;
    match target {
        Target::Stdout => {
            let mut out = std::io::stdout().lock();
            std::io::copy(&mut from, &mut out)?;
            out.flush()
        }
        Target::Device(path) => {
            let mut out = std::fs::OpenOptions::new().write(true).open(path)?;
            std::io::copy(&mut from, &mut out)?;
            out.flush()
        }
        Target::Through(path) => {
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)?;
            std::io::copy(&mut from, &mut out)?;
            if durable() {
                out.sync_all()?;
            }
            Ok(())
        }
        Target::File(_) => unreachable!("files are renamed"),
    }
}

/// Drop every staged output (their temporary files go with them): the job failed. Folders it
/// created and left empty go too.
pub fn abandon() {
    // flushes still queued are not waited for: their files go now, and the process ends
    drop(FLUSHER.lock().unwrap_or_else(|p| p.into_inner()).take());
    let (staged, created) = {
        let mut s = state();
        release_locks(&mut s);
        (
            std::mem::take(&mut s.staged),
            std::mem::take(&mut s.created),
        )
    };
    for o in staged {
        untrack(&o.tmp);
        drop(o); // TempPath removes the file
    }
    for dir in created.iter().rev() {
        let _ = std::fs::remove_dir(dir); // only when empty
    }
}

/// Create the output folder `dir` (with its parents) where it does not exist yet.
pub fn create_out_dir(dir: &Path) -> Result<(), Error> {
    let mut missing = Vec::new();
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        missing.push(p.to_path_buf());
        d = p.parent();
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::usage(format!("cannot create --out-dir {}: {e}", dir.display())))?;
    state().created.extend(missing.into_iter().rev());
    Ok(())
}

/// Ctrl-C / SIGTERM: remove every temporary file and say what, if anything, was already
/// written. Waits for the renames of a final step under way, so the answer is exact.
pub fn interrupted() -> String {
    let mut s = state();
    remove_all(&mut s.pending);
    match (&s.streaming, s.written.is_empty()) {
        (Some(stream), true) => {
            format!("interrupted while writing {stream}, which got part of its result; no file was changed")
        }
        (None, true) => "interrupted; no output was written".into(),
        (_, false) => {
            let left: Vec<String> = s.staged.iter().map(|o| o.shown.clone()).collect();
            if left.is_empty() {
                format!(
                    "interrupted after every output was written ({})",
                    list(&s.written)
                )
            } else {
                format!(
                    "interrupted; written: {}; left as they were: {}",
                    list(&s.written),
                    list(&left)
                )
            }
        }
    }
}

/// Remove what can be removed from a signal handler that must not wait (SIGBUS): only if no
/// other thread holds the state.
pub fn remove_pending_now() {
    if let Ok(mut s) = STATE.try_lock() {
        remove_all(&mut s.pending);
    }
}

fn remove_all(paths: &mut Vec<PathBuf>) {
    for p in paths.drain(..) {
        if p.is_dir() {
            let _ = std::fs::remove_dir_all(p);
        } else {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The start of this process's temporary names of `kind` ("" for outputs, "runs-", "scratch-").
pub(crate) fn temp_prefix(kind: &str) -> String {
    format!(
        ".gpusort-{kind}{}-{}-",
        platform::host_name(),
        std::process::id()
    )
}

/// Remove, once per folder and run, the temporary files and run folders in `dir` that a gpusort
/// process on this host left when it was killed (its process is gone). Names without a host and
/// process, or of another host, are left alone.
pub(crate) fn sweep_leftovers(dir: &Path) {
    let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    {
        let mut s = state();
        if s.swept.contains(&key) {
            return;
        }
        s.swept.push(key);
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let host = platform::host_name();
    let mine = std::process::id();
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.ends_with(".gpusort-lock") {
            // a killed job's output lock: removed where no job holds it
            if let Ok(f) = std::fs::OpenOptions::new().write(true).open(e.path()) {
                if platform::try_lock(&f).unwrap_or(false) && std::fs::remove_file(e.path()).is_ok()
                {
                    removed += 1;
                }
            }
            continue;
        }
        let Some(owner) = leftover_owner(&name, &host) else {
            continue;
        };
        if owner == mine || platform::process_alive(owner) {
            continue;
        }
        let path = e.path();
        let gone = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if gone.is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(
            "removed {removed} temporary file(s) left in {} by killed gpusort runs",
            dir.display()
        );
    }
}

/// The process that owns a temporary name of this host (`.gpusort-[runs-|scratch-]HOST-PID-X`).
pub(crate) fn leftover_owner(name: &str, host: &str) -> Option<u32> {
    let rest = name.strip_prefix(".gpusort-")?;
    let rest = rest
        .strip_prefix("runs-")
        .or_else(|| rest.strip_prefix("scratch-"))
        .unwrap_or(rest);
    let rest = rest.strip_suffix(".tmp").unwrap_or(rest);
    let mut parts = rest.split('-');
    let (h, pid, random) = (parts.next()?, parts.next()?, parts.next()?);
    if h != host || random.is_empty() || parts.next().is_some() {
        return None;
    }
    pid.parse().ok()
}

/// A file named in different ways (links, `./a` and `a`) has one key.
#[derive(Debug, PartialEq, Eq)]
enum FileKey {
    Id(u64, u64),
    Path(PathBuf),
}

/// Follow a chain of symbolic links to the path they end at (which may not exist yet).
pub(crate) fn resolve_links(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&p) {
                Ok(to) => {
                    p = match p.parent() {
                        Some(dir) if to.is_relative() => dir.join(to),
                        _ => to,
                    }
                }
                Err(_) => break,
            },
            _ => break,
        }
    }
    p
}

fn file_key(path: &Path) -> Option<FileKey> {
    if path == Path::new("-") {
        return None;
    }
    if let Ok(meta) = std::fs::metadata(path) {
        if let Some((dev, ino)) = platform::file_id(&meta) {
            return Some(FileKey::Id(dev, ino));
        }
        if let Ok(c) = std::fs::canonicalize(path) {
            return Some(FileKey::Path(c));
        }
    }
    let p = resolve_links(path);
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    Some(FileKey::Path(match p.file_name() {
        Some(name) => dir.join(name),
        None => p,
    }))
}

/// A path a job reads, with the flag that named it (for messages).
pub struct Named<'a> {
    pub flag: &'a str,
    pub path: &'a Path,
}

/// A path a job writes; `replaces` is the index of the input it is meant to replace
/// (`--in-place`), if any.
pub struct Written<'a> {
    pub flag: &'a str,
    pub path: &'a Path,
    pub replaces: Option<usize>,
}

/// Before any work: every output is a file of its own, no input (keys, values, weights) unless
/// it is the one it replaces in place, and no other output; standard output is used once and is
/// not an input either. Compared by file identity, so links and other spellings count.
pub fn check_distinct(inputs: &[Named], outputs: &[Written]) -> Result<(), Error> {
    let shown = |flag: &str, p: &Path| {
        if flag.is_empty() {
            p.display().to_string()
        } else {
            format!("{flag} {}", p.display())
        }
    };
    let in_keys: Vec<Option<FileKey>> = inputs.iter().map(|i| file_key(i.path)).collect();
    let stdout = platform::stdout_id().map(|(d, i)| FileKey::Id(d, i));
    let mut out_keys: Vec<(Option<FileKey>, &Written)> = Vec::new();
    let mut to_stdout: Option<&Written> = None;
    for o in outputs {
        if o.path == Path::new("-") {
            if let Some(first) = to_stdout {
                return Err(Error::usage(format!(
                    "{} and {} both write to standard output; name a file for one of them",
                    first.flag, o.flag
                )));
            }
            to_stdout = Some(o);
            if let Some(i) = in_keys
                .iter()
                .position(|k| k.is_some() && k.as_ref() == stdout.as_ref())
            {
                return Err(Error::usage(format!(
                    "standard output is redirected to {}, an input; write to another file",
                    shown(inputs[i].flag, inputs[i].path)
                )));
            }
            continue;
        }
        let key = file_key(o.path);
        for (i, (input, k)) in inputs.iter().zip(&in_keys).enumerate() {
            if k.is_some() && *k == key && o.replaces != Some(i) {
                let hint = if i == 0 && o.flag == "-o" {
                    "; pass --in-place to replace the input"
                } else {
                    ""
                };
                return Err(Error::usage(format!(
                    "{} is the same file as the input {}{hint}; nothing was written",
                    shown(o.flag, o.path),
                    shown(input.flag, input.path)
                )));
            }
        }
        if let Some((_, other)) = out_keys.iter().find(|(k, _)| k.is_some() && *k == key) {
            return Err(Error::usage(format!(
                "{} and {} name the same file; nothing was written",
                shown(other.flag, other.path),
                shown(o.flag, o.path)
            )));
        }
        out_keys.push((key, o));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftover_names_name_their_owner() {
        assert_eq!(
            leftover_owner(".gpusort-box1-42-Ab3xYz.tmp", "box1"),
            Some(42)
        );
        assert_eq!(
            leftover_owner(".gpusort-runs-box1-42-Ab3xYz", "box1"),
            Some(42)
        );
        assert_eq!(
            leftover_owner(".gpusort-scratch-box1-7-Ab3xYz.tmp", "box1"),
            Some(7)
        );
        // another host, an old-style name, a name of the user's
        assert_eq!(leftover_owner(".gpusort-box2-42-Ab3xYz.tmp", "box1"), None);
        assert_eq!(leftover_owner(".gpusort-Ab3xYz.tmp", "box1"), None);
        assert_eq!(leftover_owner("keys.bin", "box1"), None);
        assert!(temp_prefix("runs-").starts_with(".gpusort-runs-"));
        let prefix = temp_prefix("");
        let name = format!("{prefix}Q1w2E3.tmp");
        assert_eq!(
            leftover_owner(&name, &platform::host_name()),
            Some(std::process::id())
        );
    }

    /// The flusher flushes every file queued to it before its wait ends, and reports the first
    /// that fails (fsync of /dev/null is refused) by the output's name; the files after a
    /// failure are not flushed, as the job will not land.
    #[test]
    fn the_flusher_waits_for_every_file_and_names_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, b"some bytes").unwrap();
            std::fs::File::open(p).unwrap()
        };
        let f = Flusher::start().expect("a thread");
        f.queue.send((file("a"), "a".into())).unwrap();
        f.queue.send((file("b"), "b".into())).unwrap();
        assert_eq!(f.wait(), None);
        let f = Flusher::start().expect("a thread");
        f.queue.send((file("a"), "a".into())).unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        f.queue.send((null, "the output".into())).unwrap();
        f.queue.send((file("c"), "c".into())).unwrap();
        let failed = f.wait().expect("fsync of /dev/null fails");
        assert!(failed.starts_with("cannot flush the output: "), "{failed}");
    }
}
