//! How a command ends the process. A one-shot command hands its device and its large state (GPU
//! buffers, compiled kernels, imported staging memory, the input's map) to [`keep`] instead of
//! dropping them; once every output is in place, `main` calls [`now`], which ends the process with
//! `_exit`. The operating system then releases that state wholesale, instead of the driver
//! freeing it object by object and waiting for the device to go idle first — work that can only
//! delay the caller (docs/BENCHMARKS.md, "A whole file through the CLI").
//!
//! Nothing that matters to the user waits on a destructor: outputs are complete, flushed (unless
//! `--no-sync`) and renamed before `run` returns, temporary files are removed by `files`, the
//! pipeline cache of a kept device is saved when it is kept, and [`now`] flushes stdout.

use std::any::Any;
use std::sync::Mutex;

static KEPT: Mutex<Vec<Box<dyn Any + Send>>> = Mutex::new(Vec::new());

/// Keep `x` alive until the process ends, never dropping it.
pub fn keep<T: Send + 'static>(x: T) {
    KEPT.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Box::new(x));
}

/// Keep a device: its compiled pipelines are written to the pipeline cache first, as dropping
/// it would.
pub fn keep_gpu(gpu: gpusort_core::Gpu) {
    gpu.save_pipeline_cache();
    keep(gpu);
}

/// End the process with `code`: stdout flushed, then `_exit` (no destructors, no `atexit`
/// handlers — the GPU driver's teardown among them).
pub fn now(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().lock().flush();
    let _ = std::io::stderr().lock().flush();
    #[cfg(unix)]
    // SAFETY: _exit only ends the process; every output was completed before this call.
    unsafe {
        libc::_exit(code as libc::c_int)
    };
    #[cfg(not(unix))]
    std::process::exit(code as i32);
}
