//! gpusort-core: sorts, scans and stencils on the GPU through wgpu/WGSL, with CPU twins.
//!
//! - [`device`]: the device context ([`Gpu`]), made by gpusort or from your own wgpu device.
//! - [`sort`]: the [`Sorter`] (bitonic network or radix sort, chosen per job), sorts larger
//!   than memory ([`sort::external`]).
//! - [`scan`]: the [`Scanner`]: scans, compaction and stable partition, 64-bit scans and
//!   streamed scans of any length.
//! - [`stencil`]: 2-D/3-D stencils in core and out of core.
//! - [`schedule`]: many small sorts and scans merged into shared launches.
//! - [`multi`]: several GPUs as one ([`multi::DeviceGroup`]): sorts, scans, splits and stencils
//!   spread over every device.
//! - [`reference`](mod@reference): the CPU twins of the kernels, the reference semantics tests compare against
//!   (named apart from [`cpu_engine`], the fast CPU engine).
//! - [`cpu_engine`]: the same jobs on all CPU cores, for machines without a hardware GPU.
//!
//! docs/ARCHITECTURE.md maps the families to their kernels, twins, tests and benches.
//!
//! # Quick start
//!
//! A host slice sorted in place (one upload, the sort on the GPU, one download):
//!
//! ```
//! use gpusort_core::{Gpu, GpuOptions, SortOrder, Sorter};
//!
//! # fn main() -> gpusort_core::Result<()> {
//! let gpu = Gpu::new(&GpuOptions::default())?;
//! let sorter = Sorter::new(&gpu)?;
//! let mut keys = vec![3.5f32, -1.0, f32::NAN, 0.0, -0.0, 2.0];
//! sorter.sort(&gpu, &mut keys, SortOrder::default())?;
//! // NumPy's order: -0.0 before +0.0, NaN last
//! assert_eq!(format!("{keys:?}"), "[-1.0, -0.0, 0.0, 2.0, 3.5, NaN]");
//! # Ok(())
//! # }
//! ```
//!
//! Programs that own a wgpu device wrap it with [`Gpu::from_device`] and record every family
//! into their own encoders on their own buffers ([`Sorter::record`], [`Scanner::record_scan`],
//! [`Scanner::record_compact`], [`stencil::StencilKernel::record_steps`]); see the examples
//! `own_device`, `splat_sort` and `stencil_grid`.
//!
//! # Features
//!
//! - `vulkan`, `metal`, `dx12` (default): wgpu's native backends (each compiles only on its
//!   platform); `gles`: wgpu's OpenGL backend.
//! - `serde`: `Serialize` for reports and stats, `Serialize + Deserialize` for the tunings.
//!
//! The library reads no environment variable: devices come from [`GpuOptions`] or the caller,
//! tunings from [`sort::SortTuning`] and [`scan::ScanTuning`] values.

pub mod bench;
pub mod cancel;
pub mod cpu_engine;
pub mod device;
pub mod engine;
pub mod error;
pub mod keys;
pub mod multi;
pub mod reference;
pub mod scan;
pub mod schedule;
#[cfg(test)]
mod shader_checks;
pub mod sort;
pub mod stencil;
pub mod tune;
#[cfg(feature = "serde")]
pub mod tuning;
mod wgsl;

pub use device::{Gpu, GpuOptions, PinnedBuffer};
pub use error::{Error, Result};
pub use keys::{KeyType, SortKey, SortOrder};
pub use scan::Scanner;
pub use sort::{Algorithm, HostSort, KeyWord, SortJob, SortStats, Sorter};
/// The wgpu this crate is built against, so that callers' buffers and devices match its version.
pub use wgpu;
