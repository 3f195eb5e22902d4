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
