//! Stopping a job its caller gave up on. Work run inside [`watching`] checks the caller's flag
//! between the parts it submits and ends with [`Error::Cancelled`](crate::Error::Cancelled)
//! once it is set, leaving at most the parts already submitted to finish on the GPU: streamed
//! scans, compactions and partitions (every 32- and 64-bit host-array job of `scan::streamed`
//! and `Scanner64`) between chunks, and the CPU engine's sorts, scans and splits between the
//! parts its threads take. A GPU sort or an in-core scan is one submission and runs to its end;
//! stencils take their stop explicitly (`stencil::apply_into_until`). The flag is the calling
//! thread's, set for the length of the call only: nothing else can stop a job.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

thread_local! {
    static FLAG: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Run `job` on this thread with `flag` as its stop: once the flag is set, the job's next check
/// ends it with `Error::Cancelled`. The flag before (a nested call's) is restored after.
pub fn watching<R>(flag: &Arc<AtomicBool>, job: impl FnOnce() -> R) -> R {
    let before = FLAG.with(|f| f.replace(Some(flag.clone())));
    // restored on the way out, a panic included
    struct Restore(Option<Arc<AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FLAG.with(|f| *f.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(before);
    job()
}

/// Whether the job this thread runs inside [`watching`] was given up by its caller.
pub fn requested() -> bool {
    Stop::current().requested()
}

/// The stop of the job this thread runs, as a handle its worker threads can check too (the
/// flag itself is this thread's alone).
#[derive(Clone, Debug, Default)]
pub struct Stop(Option<Arc<AtomicBool>>);

impl Stop {
    /// This thread's job's stop (one that is never requested outside [`watching`]).
    pub fn current() -> Stop {
        Stop(FLAG.with(|f| f.borrow().clone()))
    }

    /// Whether the caller gave the job up.
    pub fn requested(&self) -> bool {
        self.0.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// `Err(Cancelled)` once the caller gave the job up: a job's result is checked with it
    /// before it is returned (parts skipped after the request leave it incomplete).
    pub fn check(&self) -> crate::Result<()> {
        match self.requested() {
            true => Err(crate::Error::Cancelled),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_counts_inside_its_call_only() {
        let flag = Arc::new(AtomicBool::new(true));
        assert!(!requested());
        assert!(watching(&flag, requested));
        let clear = Arc::new(AtomicBool::new(false));
        // a nested call's flag, then the outer one again
        watching(&flag, || {
            assert!(!watching(&clear, requested));
            assert!(requested());
        });
        assert!(!requested());
    }

    #[test]
    fn a_stop_handle_reaches_other_threads() {
        let flag = Arc::new(AtomicBool::new(false));
        let stop = watching(&flag, Stop::current);
        let seen = std::thread::spawn({
            let stop = stop.clone();
            move || stop.requested()
        });
        assert!(!seen.join().unwrap());
        flag.store(true, Ordering::Relaxed);
        assert!(std::thread::spawn(move || stop.requested()).join().unwrap());
        assert!(Stop::current().check().is_ok());
    }
}
