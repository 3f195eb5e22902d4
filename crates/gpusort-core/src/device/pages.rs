//! Host pages: the huge-page advice that the transfers' large vectors and the imported host
//! memory (`host_memory`) both take, here so that neither imports the other for it.

/// Ask Linux to back `[ptr, ptr + len)` (inside one live allocation) with transparent huge pages
/// where it is worth it (a few MiB and up); the advice changes no contents, and a refusal (THP
/// off) changes nothing. Elsewhere it does nothing.
#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_huge_range(_ptr: *const u8, _len: usize) {}

/// Ask Linux to back `[ptr, ptr + len)` (inside one live allocation) with transparent huge pages
/// where it is worth it (a few MiB and up); the advice changes no contents, and a refusal (THP
/// off) changes nothing.
#[cfg(target_os = "linux")]
pub(crate) fn advise_huge_range(ptr: *const u8, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < 4 * HUGE {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + len) / HUGE * HUGE;
    if end > start {
        // SAFETY: the range lies inside one live allocation this process owns; MADV_HUGEPAGE
        // only changes how later faults are served, never the memory's contents or mapping
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}
