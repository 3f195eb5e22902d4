//! Measuring knobs of `gpusort bench`: what a case measures (a key mask, a bit range, which sorts
//! run, a compaction's pivots, a chain's length), never a result. Only `--features measure`
//! builds read them (bench/*.sh), like the measuring fields of `--tuning` (tuning.rs); a normal
//! build ignores them.

/// The knob `GPUSORT_BENCH_{name}` where this is a measuring build.
pub(crate) fn bench_knob(name: &str) -> Option<String> {
    if cfg!(feature = "measure") {
        std::env::var(format!("GPUSORT_BENCH_{name}")).ok()
    } else {
        None
    }
}

/// Test hooks (docs/RELIABILITY.md): in a debug build, the build the tests run, the variable
/// `var` holds gpusort that many milliseconds (at most a minute) at a delicate moment, so that a
/// test can interrupt it or change a file under it. Release builds have no hooks.
pub(crate) fn test_stall(var: &str) {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var(var).ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(60_000)));
    }
    #[cfg(not(debug_assertions))]
    let _ = var;
}
