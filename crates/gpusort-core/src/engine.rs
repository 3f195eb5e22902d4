//! Which engine runs a job: a GPU through wgpu, or the CPU engine (`cpu_engine`) on all cores.
//! Decided here, once, for every front end: the CLI, the Python package and the DataFusion
//! operator ask [`choose`] and say what it answered.

use crate::device::{list_adapters, GpuOptions};
use crate::error::Result;

/// What the caller asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// A hardware GPU where there is one, else the CPU engine.
    #[default]
    Auto,
    /// The GPU kernels, on a software adapter (lavapipe, WARP) too.
    Gpu,
    /// The CPU engine, whatever adapters there are.
    Cpu,
}

/// The engine a job runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Gpu,
    /// The CPU engine, and why (for the front end's outcome line).
    Cpu {
        why: CpuReason,
    },
}

/// Why a job runs on the CPU engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuReason {
    AskedFor,
    /// wgpu sees no adapter at all.
    NoGpu,
    /// Only software adapters, which run the kernels far slower than the CPU engine does.
    SoftwareOnly,
}

impl CpuReason {
    /// In a few words.
    pub fn words(self) -> &'static str {
        match self {
            CpuReason::AskedFor => "asked for",
            CpuReason::NoGpu => "no GPU found",
            CpuReason::SoftwareOnly => "no hardware GPU",
        }
    }
}

/// The engine for `backend`. `Auto` lists the adapters once (the listing is handed on to the
/// `Gpu::new` that follows): a hardware GPU runs the job, a software adapter alone or none sends
/// it to the CPU engine. An adapter the caller named (`named_device`: an adapter or a device
/// list) is a GPU by request.
pub fn choose(backend: Backend, named_device: bool, options: &GpuOptions) -> Result<Choice> {
    Ok(match backend {
        Backend::Cpu => Choice::Cpu {
            why: CpuReason::AskedFor,
        },
        Backend::Gpu => Choice::Gpu,
        Backend::Auto if named_device => Choice::Gpu,
        Backend::Auto => {
            let adapters = list_adapters(options)?;
            if adapters.iter().any(|a| a.is_hardware()) {
                Choice::Gpu
            } else if adapters.is_empty() {
                Choice::Cpu {
                    why: CpuReason::NoGpu,
                }
            } else {
                Choice::Cpu {
                    why: CpuReason::SoftwareOnly,
                }
            }
        }
    })
}
