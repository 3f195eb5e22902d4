//! Where the CLI's tunings come from: the tuning `gpusort tune` stored for this device (in the
//! user's cache directory; `GPUSORT_CACHE_DIR` moves it), else the measured defaults, then the
//! tuning variables the CLI honours (below, one a `Tuning` field). The library reads no
//! environment, so this is the one place a `GPUSORT_*` tuning variable becomes a `Tuning` value.
//! Every tuning gives the same results; a value the kernels cannot take is ignored with a
//! warning. The switches that change results (`GPUSORT_RADIX_STOP`, `GPUSORT_RADIX_PROBE`,
//! `GPUSORT_SCAN_NO_LOOKBACK`, `GPUSORT_COMPACT_PROBE`) are read only by `--features measure`
//! builds, so no environment can make a normal build return a wrong result.

use std::path::PathBuf;
use std::sync::OnceLock;

use gpusort_core::tuning::{StoredTuning, TuningFile};
use gpusort_core::{scan, sort, Gpu, Scanner, Sorter};

use crate::error::CliError;

/// A sorter with this device's tuning.
pub fn sorter(gpu: &Gpu) -> Result<Sorter, CliError> {
    Ok(Sorter::new(gpu)?.with_tuning(gpu, tunings(gpu).0)?)
}

/// A scanner with this device's tuning.
pub fn scanner(gpu: &Gpu) -> Result<Scanner, CliError> {
    Ok(Scanner::new(gpu)?.with_tuning(gpu, tunings(gpu).1)?)
}

/// The file `gpusort tune` writes: `tuning.json` in `$GPUSORT_CACHE_DIR`, else the library's
/// place in the user's cache directory (None where there is none).
pub fn file() -> Option<PathBuf> {
    let dir = std::env::var_os("GPUSORT_CACHE_DIR").filter(|d| !d.is_empty());
    TuningFile::path(dir.as_deref().map(std::path::Path::new))
}

/// The tuning stored for `gpu`, if any (a file that cannot be read is said once, then ignored).
pub fn stored(gpu: &Gpu) -> Option<StoredTuning> {
    let path = file()?;
    match TuningFile::load(&path) {
        Ok(f) => f.find(gpu).cloned(),
        Err(e) => {
            static SAID: OnceLock<()> = OnceLock::new();
            SAID.get_or_init(|| tracing::warn!("{e}; using the default tuning"));
            None
        }
    }
}

/// The steps a pass of stencils on `gpu`: stored by `gpusort tune`, or the defaults.
pub fn stencil(gpu: &Gpu) -> gpusort_core::stencil::Tuning {
    stored(gpu).map(|t| t.stencil).unwrap_or_default()
}

/// The sort and scan tunings a job on `gpu` uses: stored or default, then the environment's.
pub fn tunings(gpu: &Gpu) -> (sort::Tuning, scan::Tuning) {
    // one device per process
    static TUNINGS: OnceLock<(sort::Tuning, scan::Tuning)> = OnceLock::new();
    *TUNINGS.get_or_init(|| {
        let (s, c) = stored(gpu).map_or_else(Default::default, |t| (t.sort, t.scan));
        (sort_from_env(s), scan_from_env(c))
    })
}

/// `var` as a number, where it is set and parses.
fn number(var: &str) -> Option<u32> {
    let text = std::env::var(var).ok()?;
    let v = text.trim().parse::<u32>().ok();
    if v.is_none() {
        tracing::warn!("{var}={text} is not a number; ignored");
    }
    v
}

/// Set one field from `var`, keeping the change only where the whole tuning stays valid.
fn apply<T: Copy>(t: &mut T, var: &str, valid: impl Fn(T) -> bool, set: impl Fn(&mut T, u32)) {
    if let Some(v) = number(var) {
        let mut changed = *t;
        set(&mut changed, v);
        if valid(changed) {
            *t = changed;
        } else {
            tracing::warn!("{var}={v} is out of range for this setting; ignored");
        }
    }
}

fn sort_from_env(mut t: sort::Tuning) -> sort::Tuning {
    let ok = |t: sort::Tuning| t.checked().is_ok();
    let on = |v: u32| v != 0;
    apply(&mut t, "GPUSORT_RADIX_FROM", ok, |t, v| t.radix_from = v);
    apply(&mut t, "GPUSORT_RADIX_FROM_WIDE", ok, |t, v| {
        t.radix_from_wide = v
    });
    apply(&mut t, "GPUSORT_RADIX_ITEMS", ok, |t, v| {
        t.items = v;
        t.payload_items = v;
    });
    apply(&mut t, "GPUSORT_RADIX_WIDE_ITEMS", ok, |t, v| {
        t.wide_items = v
    });
    apply(&mut t, "GPUSORT_RADIX_PAYLOAD_ITEMS", ok, |t, v| {
        t.payload_items = v
    });
    apply(&mut t, "GPUSORT_RADIX_WINDOW", ok, |t, v| t.window = v);
    apply(&mut t, "GPUSORT_RADIX_SPIN", ok, |t, v| t.spin_limit = v);
    apply(&mut t, "GPUSORT_RADIX_WIDE", ok, |t, v| {
        t.wide_ballot = on(v)
    });
    apply(&mut t, "GPUSORT_RADIX_WG", ok, |t, v| t.wg = Some(v));
    apply(&mut t, "GPUSORT_RADIX_WORKGROUPS", ok, |t, v| {
        t.workgroups = v;
        t.payload_workgroups = v;
        t.unstable_workgroups = v;
    });
    apply(&mut t, "GPUSORT_RADIX_PAYLOAD_WORKGROUPS", ok, |t, v| {
        t.payload_workgroups = v
    });
    apply(&mut t, "GPUSORT_RADIX_UNSTABLE_WORKGROUPS", ok, |t, v| {
        t.unstable_workgroups = v
    });
    apply(&mut t, "GPUSORT_RADIX_HIST_CHUNKS", ok, |t, v| {
        t.hist_chunks = v
    });
    apply(&mut t, "GPUSORT_RADIX_EARLY", ok, |t, v| {
        t.early_counts = on(v)
    });
    apply(&mut t, "GPUSORT_RADIX_COUNT_FIRST", ok, |t, v| {
        t.count_first = on(v)
    });
    apply(&mut t, "GPUSORT_RADIX_PACK", ok, |t, v| t.pack = Some(v));
    apply(&mut t, "GPUSORT_RADIX_SPARE", ok, |t, v| {
        t.spare_lanes = Some(on(v))
    });
    apply(&mut t, "GPUSORT_RADIX_UNSTABLE_FIRST", ok, |t, v| {
        t.unstable_first = on(v)
    });
    apply(&mut t, "GPUSORT_RADIX_UNSTABLE_ITEMS", ok, |t, v| {
        t.unstable_items = v
    });
    apply(&mut t, "GPUSORT_RADIX_MSD_FROM", ok, |t, v| t.msd_from = v);
    apply(&mut t, "GPUSORT_RADIX_MSD_F32", ok, |t, v| {
        t.msd_f32 = on(v)
    });
    apply(&mut t, "GPUSORT_RADIX_MSD_LOCAL_GROUPS", ok, |t, v| {
        t.msd_local_groups = v
    });
    apply(&mut t, "GPUSORT_RADIX_MSD_PREFETCH", ok, |t, v| {
        t.msd_prefetch = on(v)
    });
    if cfg!(feature = "measure") {
        apply(&mut t, "GPUSORT_RADIX_PROBE", ok, |t, v| t.probe = v);
    }
    if cfg!(feature = "measure") {
        apply(&mut t, "GPUSORT_RADIX_STOP", ok, |t, v| t.stop = v);
    }
    t
}

fn scan_from_env(mut t: scan::Tuning) -> scan::Tuning {
    let ok = |t: scan::Tuning| t.checked().is_ok();
    let on = |v: u32| v != 0;
    apply(&mut t, "GPUSORT_SCAN_WG", ok, |t, v| t.scan_wg = v);
    apply(&mut t, "GPUSORT_SCAN_ROUNDS", ok, |t, v| t.scan_rounds = v);
    apply(&mut t, "GPUSORT_SCAN_WORKGROUPS", ok, |t, v| {
        t.scan_workgroups = v
    });
    apply(&mut t, "GPUSORT_COMPACT_WG", ok, |t, v| t.compact_wg = v);
    apply(&mut t, "GPUSORT_COMPACT_ROUNDS", ok, |t, v| {
        t.compact_rounds = v
    });
    apply(&mut t, "GPUSORT_COMPACT_STAGE", ok, |t, v| {
        t.compact_stage = v
    });
    apply(&mut t, "GPUSORT_COMPACT_WORKGROUPS", ok, |t, v| {
        t.compact_workgroups = v
    });
    apply(&mut t, "GPUSORT_COMPACT_ONE_WORD", ok, |t, v| {
        t.compact_one_word = on(v)
    });
    apply(&mut t, "GPUSORT_COMPACT_LATE_LOADS", ok, |t, v| {
        t.compact_late_loads = on(v)
    });
    apply(&mut t, "GPUSORT_LOOKBACK_WINDOW", ok, |t, v| t.window = v);
    apply(&mut t, "GPUSORT_SCAN_SPIN", ok, |t, v| t.spin_limit = v);
    apply(&mut t, "GPUSORT_SCAN_WAIT_NEAREST", ok, |t, v| {
        t.scan_wait_nearest = on(v)
    });
    apply(&mut t, "GPUSORT_COMPACT_WAIT_NEAREST", ok, |t, v| {
        t.compact_wait_nearest = on(v)
    });
    apply(&mut t, "GPUSORT_COUNT_LADDER", ok, |t, v| {
        t.count_ladder = on(v)
    });
    apply(&mut t, "GPUSORT_SCAN_COUNTERS", ok, |t, v| {
        t.counters = on(v)
    });
    apply(&mut t, "GPUSORT_LOOKBACK_STRIDE", ok, |t, v| {
        t.state_stride = v
    });
    apply(&mut t, "GPUSORT_COMPACT_STRIDE", ok, |t, v| {
        t.compact_state_stride = v
    });
    if cfg!(feature = "measure") {
        apply(&mut t, "GPUSORT_COMPACT_PROBE", ok, |t, v| {
            t.compact_probe = v
        });
    }
    if cfg!(feature = "measure") {
        apply(&mut t, "GPUSORT_SCAN_NO_LOOKBACK", ok, |t, v| {
            t.no_lookback = on(v)
        });
    }
    t
}
