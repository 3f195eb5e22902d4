//! Tunings measured on a device ([`crate::tune`]), stored in a JSON file so that later runs on the
//! same adapter, driver and gpusort version start from them. The file lives in the user's cache
//! directory ([`TuningFile::path`]); front ends may name another directory (the CLI and the
//! Python package read `GPUSORT_CACHE_DIR`: the library reads no environment).

use std::path::{Path, PathBuf};

use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::{scan, sort, stencil};

/// One device's measured tuning and what it was measured on.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredTuning {
    pub adapter: String,
    pub backend: String,
    /// The driver and its version, as wgpu reports them.
    pub driver: String,
    pub gpusort_version: String,
    /// When it was measured (RFC 3339, UTC).
    pub date: String,
    pub sort: sort::SortTuning,
    pub scan: scan::ScanTuning,
    /// Steps a pass of stencils (absent in files of older versions: the defaults).
    #[serde(default)]
    pub stencil: stencil::StencilTuning,
}

impl StoredTuning {
    /// What [`crate::tune::measure`] found on `gpu`, dated now.
    pub fn measured(gpu: &Gpu, tuned: &crate::tune::Tuned) -> StoredTuning {
        StoredTuning {
            adapter: gpu.adapter.name.clone(),
            backend: gpu.adapter.backend.clone(),
            driver: driver(gpu),
            gpusort_version: env!("CARGO_PKG_VERSION").into(),
            date: utc_now(),
            sort: tuned.sort,
            scan: tuned.scan,
            stencil: tuned.stencil,
        }
    }

    /// Whether this tuning was measured on `gpu` by this version of gpusort.
    pub fn matches(&self, gpu: &Gpu) -> bool {
        let a = &gpu.adapter;
        self.adapter == a.name
            && self.backend == a.backend
            && self.driver == driver(gpu)
            && self.gpusort_version == env!("CARGO_PKG_VERSION")
    }
}

/// The driver string a stored tuning is keyed by.
pub fn driver(gpu: &Gpu) -> String {
    format!("{} {}", gpu.adapter.driver, gpu.adapter.driver_info)
        .trim()
        .to_string()
}

/// Every stored tuning of a machine (one per adapter, driver and version).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TuningFile {
    pub tunings: Vec<StoredTuning>,
}

impl TuningFile {
    /// Where the tunings live: `tuning.json` in `dir` where the caller names one, else
    /// `gpusort/tuning.json` in the user's cache directory (None where the system has none).
    pub fn path(dir: Option<&Path>) -> Option<PathBuf> {
        match dir {
            Some(dir) => Some(dir.join("tuning.json")),
            None => dirs::cache_dir().map(|d| d.join("gpusort").join("tuning.json")),
        }
    }

    /// The tuning stored for `gpu` in the file at `path`, if any.
    pub fn stored(path: &Path, gpu: &Gpu) -> Result<Option<StoredTuning>> {
        Ok(TuningFile::load(path)?.find(gpu).cloned())
    }

    /// The file at `path`; an empty one where there is none.
    pub fn load(path: &Path) -> Result<TuningFile> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                Error::InvalidInput(format!(
                    "{}: not a gpusort tuning file ({e})",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TuningFile::default()),
            Err(e) => Err(io(path, e)),
        }
    }

    /// The tuning stored for `gpu`, checked against the ranges the kernels take.
    pub fn find(&self, gpu: &Gpu) -> Option<&StoredTuning> {
        self.tunings.iter().rev().find(|t| {
            t.matches(gpu)
                && t.sort.checked().is_ok()
                && t.scan.checked().is_ok()
                && t.stencil.checked().is_ok()
        })
    }

    /// Keep `tuning`, replacing any stored for the same adapter, backend, driver and version.
    pub fn insert(&mut self, tuning: StoredTuning) {
        self.tunings.retain(|t| {
            (&t.adapter, &t.backend, &t.driver, &t.gpusort_version)
                != (
                    &tuning.adapter,
                    &tuning.backend,
                    &tuning.driver,
                    &tuning.gpusort_version,
                )
        });
        self.tunings.push(tuning);
    }

    /// Write the file: a temporary file beside it, flushed, then renamed over it.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.write(path).map_err(|e| io(path, e))
    }

    fn write(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let text = serde_json::to_vec_pretty(self).expect("a tuning serialises");
        let tmp = dir.join(format!(".tuning-{}.tmp", std::process::id()));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

/// Now as RFC 3339 in UTC, to the second (a stored tuning's date; the bench's exports).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // civil date from days since 1970-01-01 (Howard Hinnant's algorithm)
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}
