//! What sorts the packed keys: a GPU through gpusort-core, or gpusort's CPU engine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use gpusort_core::{cpu_engine, Gpu, GpuOptions, HostSort, KeyWord, SortKey, SortOrder, Sorter};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::keys::Word;

/// The device packed keys are sorted on. One is shared by every sort of a process
/// ([`SortEngine::shared`]); tests and programs with their own device build their own.
pub struct SortEngine {
    device: Device,
    sorted_rows: AtomicU64,
}

enum Device {
    /// One GPU job at a time: partitions sorting at once take turns on the one device.
    Gpu(Box<Mutex<(Gpu, Sorter)>>),
    Cpu,
}

impl std::fmt::Debug for SortEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SortEngine({})", self.describe())
    }
}

impl SortEngine {
    /// The process's engine, made on first use: the first hardware GPU wgpu finds, or — where
    /// there is none (only software adapters such as lavapipe) or it cannot be opened — gpusort's
    /// CPU engine on all cores, as the gpusort CLI does. Never a wrong answer either way.
    pub fn shared() -> Arc<SortEngine> {
        static SHARED: OnceLock<Arc<SortEngine>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                let options = GpuOptions::default();
                let auto = gpusort_core::engine::Backend::Auto;
                let engine = match gpusort_core::engine::choose(auto, false, &options) {
                    Ok(gpusort_core::engine::Choice::Gpu) => SortEngine::gpu(&options)
                        .unwrap_or_else(|e| {
                            tracing::warn!("gpusort: no GPU ({e}); sorting on the CPU engine");
                            SortEngine::cpu()
                        }),
                    _ => SortEngine::cpu(),
                };
                Arc::new(engine)
            })
            .clone()
    }

    /// An engine on the device these options pick (software adapters included).
    pub fn gpu(options: &GpuOptions) -> Result<SortEngine> {
        Self::from_gpu(Gpu::new(options)?)
    }

    /// An engine on a device the caller made.
    pub fn from_gpu(gpu: Gpu) -> Result<SortEngine> {
        let sorter = Sorter::new(&gpu)?;
        Ok(SortEngine {
            device: Device::Gpu(Box::new(Mutex::new((gpu, sorter)))),
            sorted_rows: AtomicU64::new(0),
        })
    }

    /// gpusort's CPU engine (a parallel radix sort on all cores).
    pub fn cpu() -> SortEngine {
        SortEngine {
            device: Device::Cpu,
            sorted_rows: AtomicU64::new(0),
        }
    }

    /// The device, in words (for EXPLAIN).
    pub fn describe(&self) -> String {
        match &self.device {
            Device::Gpu(g) => match g.lock() {
                Ok(g) => format!("gpu: {}", g.0.adapter.name),
                Err(_) => "gpu".into(),
            },
            Device::Cpu => "cpu".into(),
        }
    }

    /// How many rows this engine has sorted, over every operator that used it.
    pub fn sorted_rows(&self) -> u64 {
        self.sorted_rows.load(Ordering::Relaxed)
    }

    /// The stable permutation that orders the rows by the words, most significant first.
    pub fn argsort(&self, words: Vec<Word>) -> Result<Vec<u32>> {
        let Some(rows) = words.last().map(Word::len) else {
            return Err(Error::Invalid("no sort keys".into()));
        };
        if rows > u32::MAX as usize {
            return Err(Error::TooManyRows(rows));
        }
        if let Device::Gpu(g) = &self.device {
            // one GPU job where the words fit it: each word up once, the permutation back once
            let refs: Vec<KeyWord<'_>> = words
                .iter()
                .map(|w| match w {
                    Word::U32(w) => KeyWord::U32(w),
                    Word::U64(w) => KeyWord::U64(w),
                })
                .collect();
            let g = g
                .lock()
                .map_err(|_| Error::Invalid("GPU lock poisoned".into()))?;
            let (gpu, sorter) = &*g;
            if let Some(perm) = sorter.argsort_words(gpu, &refs)? {
                self.sorted_rows.fetch_add(rows as u64, Ordering::Relaxed);
                return Ok(perm);
            }
        }
        // word by word through the host, least significant first; each later pass is stable,
        // so earlier orders stay within ties
        let mut perm: Option<Vec<u32>> = None;
        for word in words.into_iter().rev() {
            perm = Some(match word {
                Word::U32(w) => self.pass(w, perm)?,
                Word::U64(w) => self.pass(w, perm)?,
            });
        }
        self.sorted_rows.fetch_add(rows as u64, Ordering::Relaxed);
        Ok(perm.expect("at least one word"))
    }

    /// One stable pass: the rows (in the order `perm`) sorted by `word`, as a permutation of
    /// the original rows. The gathers run on all cores.
    fn pass<T: SortKey + Send + Sync>(
        &self,
        word: Vec<T>,
        perm: Option<Vec<u32>>,
    ) -> Result<Vec<u32>> {
        let mut keys = match &perm {
            None => word,
            Some(p) => p.par_iter().map(|&i| word[i as usize]).collect(),
        };
        let order = SortOrder::default();
        let by_word = match &self.device {
            Device::Gpu(g) => {
                let g = g
                    .lock()
                    .map_err(|_| Error::Invalid("GPU lock poisoned".into()))?;
                let (gpu, sorter) = &*g;
                sorter
                    .sort_host(
                        gpu,
                        &mut keys,
                        HostSort {
                            permutation: true,
                            order,
                            ..HostSort::default()
                        },
                    )?
                    .0
            }
            Device::Cpu => cpu_engine::sort(&mut keys, None, true, order, None)?,
        }
        .ok_or_else(|| Error::Invalid("the sort returned no permutation".into()))?;
        Ok(match perm {
            None => by_word,
            Some(p) => by_word.par_iter().map(|&j| p[j as usize]).collect(),
        })
    }
}
