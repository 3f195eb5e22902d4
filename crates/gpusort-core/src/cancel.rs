//! Stopping a job its caller gave up on. Work run inside [`watching`] checks the caller's flag
//! between the parts it submits and ends with [`Error::Cancelled`](crate::Error::Cancelled)
//! once it is set, leaving at most the parts already submitted to finish on the GPU: streamed
//! scans, compactions and partitions (every 32- and 64-bit host-array job of `scan::streamed`
//! and `Scanner64`) between chunks. A GPU sort or an in-core scan is one submission and runs to
//! its end; stencils take their stop explicitly (`stencil::apply_into_until`). The flag is the
//! calling thread's, set for the length of the call only: nothing else can stop a job.

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
    FLAG.with(|f| {
        f.borrow()
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    })
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
}
