//! How a command ends the process. A one-shot command hands its device and its large state (GPU
//! buffers, compiled kernels, imported staging memory, the input's map) to [`keep`] instead of
//! dropping them; once every output is in place, `main` calls [`now`], which ends the process with
//! `_exit`. The operating system then releases that state wholesale, instead of the driver
//! freeing it object by object and waiting for the device to go idle first — work that can only
//! delay the caller (docs/BENCHMARKS.md, "A whole file through the CLI").
//!
//! The final step (`files::finish`) hands what was kept to [`release_behind`] first: the driver
//! and the kernel release it on another thread while the disk flushes the outputs and the
//! renames free the files they replace; whatever is left when the step ends goes with `_exit`.
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

/// Release everything kept so far on a thread of its own, in the order it was kept (maps and
/// buffers before the device that made them); the caller is done with all of it. Where no
/// thread can be started it is released here.
pub fn release_behind() {
    let kept = std::mem::take(&mut *KEPT.lock().unwrap_or_else(|p| p.into_inner()));
    if kept.is_empty() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("gpusort-release".into())
        .spawn(move || {
            let t = std::time::Instant::now();
            let n = kept.len();
            drop(kept);
            tracing::debug!(
                "released {n} kept objects in {:.3} s",
                t.elapsed().as_secs_f64()
            );
        });
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

#[cfg(test)]
mod tests {
    /// What was kept is dropped on another thread by release_behind.
    #[test]
    fn release_behind_drops_what_was_kept_on_another_thread() {
        struct Tell(std::sync::mpsc::Sender<std::thread::ThreadId>);
        impl Drop for Tell {
            fn drop(&mut self) {
                let _ = self.0.send(std::thread::current().id());
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        super::keep(Tell(tx.clone()));
        super::keep(Tell(tx));
        super::release_behind();
        for _ in 0..2 {
            let on = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("dropped");
            assert_ne!(on, std::thread::current().id());
        }
    }
}
