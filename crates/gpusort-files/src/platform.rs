//! The few calls that differ between operating systems, each with a portable fallback, so that
//! the rest of the file handling is plain std: positioned reads and writes, reserving disk space,
//! writeback hints, file identity, process liveness and the host's name.
//!
//! Linux is what CI builds and tests; the `cfg(unix)` paths also serve macOS and the BSDs, the
//! `cfg(windows)` ones Windows (neither is built here: README says what is tested where).

use std::fs::{File, Metadata};
use std::io;

/// Write all of `buf` at byte `at` of `file`, without moving its cursor.
#[cfg(unix)]
pub fn pwrite_all(file: &File, buf: &[u8], at: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(buf, at)
}

#[cfg(windows)]
pub fn pwrite_all(file: &File, mut buf: &[u8], mut at: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        let n = file.seek_write(buf, at)?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n..];
        at += n as u64;
    }
    Ok(())
}

/// Fill `buf` from byte `at` of `file`.
#[cfg(unix)]
pub fn pread_exact(file: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, at)
}

#[cfg(windows)]
pub fn pread_exact(file: &File, mut buf: &mut [u8], mut at: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        let n = file.seek_read(buf, at)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        at += n as u64;
    }
    Ok(())
}

/// Ask the kernel to start writing a just-written range to disk now, so the flush before the
/// rename waits only for the tail (Linux; a hint whose errors are ignored: the flush decides).
#[allow(unused_variables)]
pub fn start_writeback(file: &File, at: u64, len: usize) {
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

/// Give `file` its final length with the disk space really allocated where the system can
/// (Linux), so writes through a memory map cannot hit a full disk later (a SIGBUS, not an error
/// to clean up after). Elsewhere the file is sized sparsely.
pub fn reserve(file: &File, len: u64) -> io::Result<()> {
    file.set_len(len)?;
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: a plain syscall on an open descriptor we own.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
        // filesystems without fallocate (EOPNOTSUPP/EINVAL) keep the sparse file
        if rc != 0 && rc != libc::EOPNOTSUPP && rc != libc::EINVAL {
            return Err(io::Error::from_raw_os_error(rc));
        }
    }
    Ok(())
}

/// What identifies a file whatever path names it (links, `./a` and `a`): device and inode.
/// None where the system gives no such pair (paths are then compared after canonicalising).
#[cfg(unix)]
pub fn file_id(meta: &Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
pub fn file_id(_meta: &Metadata) -> Option<(u64, u64)> {
    None
}

/// Take an exclusive advisory lock on `file` without waiting: Ok(false) where another process
/// holds one. Where the system has no flock, every lock is granted.
#[cfg(unix)]
pub fn try_lock(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this File owns; it changes no memory
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(not(unix))]
pub fn try_lock(_file: &File) -> io::Result<bool> {
    Ok(true)
}

/// The identity of whatever standard output is (a file the shell redirected it to, say).
#[cfg(unix)]
pub fn stdout_id() -> Option<(u64, u64)> {
    use std::os::fd::AsFd;
    let fd = io::stdout().as_fd().try_clone_to_owned().ok()?;
    let meta = File::from(fd).metadata().ok()?;
    if meta.is_file() {
        file_id(&meta)
    } else {
        None
    }
}

#[cfg(not(unix))]
pub fn stdout_id() -> Option<(u64, u64)> {
    None
}

/// Whether process `pid` still runs on this host. Where that cannot be known, yes: a leftover
/// is only ever removed when its owner is known to be gone.
#[cfg(unix)]
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(not(unix))]
pub fn process_alive(_pid: u32) -> bool {
    true
}

/// This host's name, cut to letters, digits and dots (it goes into temporary file names).
pub fn host_name() -> String {
    #[cfg(unix)]
    let raw = {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most buf.len() bytes into buf.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).into_owned()
        } else {
            String::new()
        }
    };
    #[cfg(not(unix))]
    let raw = std::env::var("COMPUTERNAME").unwrap_or_default();
    let name: String = raw
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
        .take(40)
        .collect();
    if name.is_empty() {
        "host".into()
    } else {
        name
    }
}
