//! Where the CLI's tunings come from: the tuning `gpusort tune` stored for this device (in the
//! user's cache directory; `GPUSORT_CACHE_DIR` moves it), else the measured defaults — or, for
//! experiments, `--tuning FILE`: the defaults with the fields that file names (JSON, the
//! `SortTuning`, `ScanTuning` and `StencilTuning` values' own field names: `{"sort": {"items": 10}, "scan": {"scan_rounds": 4}}`).
//! No environment variable sets a tuning. A file that names an unknown field or a value the
//! kernels cannot take is refused before any work; the measuring switches (fields whose doc
//! says "results wrong": `sort.probe`, `sort.stop`, `scan.compact_probe`, `scan.no_lookback`)
//! only by `--features measure` builds, so no file can make a normal build return a wrong
//! result.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gpusort_core::tuning::{StoredTuning, TuningFile};
use gpusort_core::{scan, sort, Gpu, Scanner, Sorter};

use crate::error::CliError;

/// What `--tuning FILE` gave (None: no file; the stored tuning or the defaults apply).
static FROM_FILE: OnceLock<Option<Tunings>> = OnceLock::new();

/// The three tunings a job may use.
#[derive(Clone, Copy, Debug)]
struct Tunings {
    sort: sort::SortTuning,
    scan: scan::ScanTuning,
    stencil: gpusort_core::stencil::StencilTuning,
}

/// Read `--tuning FILE` (None: none given) before any job, checking every field it names.
pub fn use_file(path: Option<&Path>) -> Result<(), CliError> {
    let tunings = path.map(read_file).transpose()?;
    // (set once a process; a second call keeps the first file)
    let _ = FROM_FILE.set(tunings);
    Ok(())
}

fn read_file(path: &Path) -> Result<Tunings, CliError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--tuning {shown}: cannot read it: {e}")))?;
    let bad = |what: String| CliError::usage(format!("--tuning {shown}: {what}"));
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let serde_json::Value::Object(families) = value else {
        return Err(bad(
            "an object of \"sort\", \"scan\" and \"stencil\" is expected".into(),
        ));
    };
    let mut t = Tunings {
        sort: sort::SortTuning::default(),
        scan: scan::ScanTuning::default(),
        stencil: gpusort_core::stencil::StencilTuning::default(),
    };
    for (family, fields) in families {
        match family.as_str() {
            "sort" => t.sort = overlay(t.sort, &family, fields).map_err(bad)?,
            "scan" => t.scan = overlay(t.scan, &family, fields).map_err(bad)?,
            "stencil" => t.stencil = overlay(t.stencil, &family, fields).map_err(bad)?,
            other => {
                return Err(bad(format!(
                    "no tuning is called {other:?} (sort, scan, stencil)"
                )))
            }
        }
    }
    let measuring = t.sort.measuring() || t.scan.compact_probe != 0 || t.scan.no_lookback;
    if measuring && !cfg!(feature = "measure") {
        return Err(bad(
            "it sets a measuring switch (sort.probe, sort.stop, scan.compact_probe or \
             scan.no_lookback), which only `--features measure` builds take"
                .into(),
        ));
    }
    t.sort.checked().map_err(|e| bad(e.to_string()))?;
    t.scan.checked().map_err(|e| bad(e.to_string()))?;
    t.stencil.checked().map_err(|e| bad(e.to_string()))?;
    Ok(t)
}

/// `base` with the fields `fields` names (an object of that tuning's field names) replaced.
fn overlay<T>(base: T, family: &str, fields: serde_json::Value) -> Result<T, String>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let serde_json::Value::Object(fields) = fields else {
        return Err(format!("\"{family}\" is not an object of field names"));
    };
    let mut merged = serde_json::to_value(&base).map_err(|e| e.to_string())?;
    let known = merged
        .as_object_mut()
        .expect("a tuning serializes as an object");
    for (name, value) in fields {
        if !known.contains_key(&name) {
            let names: Vec<&String> = known.keys().collect();
            return Err(format!(
                "the {family} tuning has no field {name:?} (its fields: {})",
                names
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        known.insert(name, value);
    }
    serde_json::from_value(merged).map_err(|e| format!("{family}: {e}"))
}

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

/// The steps a pass of stencils on `gpu`: `--tuning`'s, else stored by `gpusort tune`, else the
/// defaults.
pub fn stencil(gpu: &Gpu) -> gpusort_core::stencil::StencilTuning {
    if let Some(Some(t)) = FROM_FILE.get() {
        return t.stencil;
    }
    stored(gpu).map(|t| t.stencil).unwrap_or_default()
}

/// The sort and scan tunings a job on `gpu` uses: `--tuning`'s, else stored, else the defaults.
pub fn tunings(gpu: &Gpu) -> (sort::SortTuning, scan::ScanTuning) {
    if let Some(Some(t)) = FROM_FILE.get() {
        return (t.sort, t.scan);
    }
    // one device per process
    static TUNINGS: OnceLock<(sort::SortTuning, scan::ScanTuning)> = OnceLock::new();
    *TUNINGS.get_or_init(|| stored(gpu).map_or_else(Default::default, |t| (t.sort, t.scan)))
}
