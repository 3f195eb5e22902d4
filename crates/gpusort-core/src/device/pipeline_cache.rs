//! Compiled pipelines kept between runs (wgpu's `PipelineCache`, Vulkan only): a second run of a
//! command does not compile its shaders again. The cache is one file per adapter class, driver
//! and gpusort version in a folder the front end chooses (the CLI and the Python package use the
//! user's cache folder); it is read when the device is created and written back when the `Gpu`
//! is dropped, atomically (a temporary file renamed over the old one), and only when pipelines
//! were added. A missing, unreadable or stale file is an empty cache: nothing here can fail a job.
//!
//! # Safety
//!
//! `Device::create_pipeline_cache` is unsafe because the bytes must come from `get_data` of a
//! compatible device. They do: the file is only ever written by [`PipelineCache::save`] from
//! `get_data`, and its name holds wgpu's key for the adapter class (vendor and device ids), the
//! driver's name and version, and gpusort's version. Beyond that, wgpu prefixes the data with its
//! own header (magic, version, adapter key, length) and checks it, the Vulkan driver checks its
//! own header (vendor, device, pipeline cache UUID), and `fallback: true` makes any data either
//! check rejects an empty cache — so a truncated or foreign file costs a recompile, no more.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::AdapterSummary;

pub(crate) struct PipelineCache {
    cache: wgpu::PipelineCache,
    file: PathBuf,
    /// The size of the data the file holds now (read at open, or written since).
    loaded: AtomicUsize,
}

impl PipelineCache {
    /// The cache for `adapter` in `folder`, or None where the backend keeps none (wgpu
    /// supports application caches on Vulkan only) or the device lacks `PIPELINE_CACHE`.
    pub(crate) fn open(
        device: &wgpu::Device,
        info: &wgpu::AdapterInfo,
        summary: &AdapterSummary,
        folder: &Path,
    ) -> Option<PipelineCache> {
        if !device.features().contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        let key = wgpu::util::pipeline_cache_key(info)?;
        let driver: String = format!("{} {}", summary.driver, summary.driver_info)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let file = folder.join(format!(
            "{key}_{driver}_gpusort{}.bin",
            env!("CARGO_PKG_VERSION")
        ));
        let data = std::fs::read(&file).ok();
        // SAFETY: see the module's documentation: the bytes are get_data's of this adapter
        // class, driver and gpusort version, and fallback turns any rejected data into an
        // empty cache.
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("gpusort pipelines"),
                data: data.as_deref(),
                fallback: true,
            })
        };
        Some(PipelineCache {
            cache,
            loaded: AtomicUsize::new(data.map_or(0, |d| d.len())),
            file,
        })
    }

    pub(crate) fn cache(&self) -> &wgpu::PipelineCache {
        &self.cache
    }

    /// Write the cache back if it grew: a temporary file beside it, renamed over it.
    pub(crate) fn save(&self) -> std::io::Result<()> {
        let Some(data) = self.cache.get_data() else {
            return Ok(());
        };
        if data.len() <= self.loaded.load(Ordering::Relaxed) {
            return Ok(());
        }
        let folder = self.file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(folder)?;
        let tmp = folder.join(format!(
            ".{}.{}.tmp",
            self.file
                .file_name()
                .map_or("pipelines".into(), |n| n.to_string_lossy()),
            std::process::id()
        ));
        std::fs::write(&tmp, &data)?;
        std::fs::rename(&tmp, &self.file).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })?;
        self.loaded.store(data.len(), Ordering::Relaxed);
        Ok(())
    }
}
