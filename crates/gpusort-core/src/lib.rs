//! gpusort-core: sorts, scans and stencils on the GPU through wgpu/WGSL, with CPU twins.
//!
//! - [`device`]: the device context ([`Gpu`]), made by gpusort or from your own wgpu device.
//! - [`sort`]: the [`Sorter`] (bitonic network or radix sort, chosen per job), sorts larger
//!   than memory ([`sort::external`]).
//! - [`scan`]: the [`Scanner`]: scans, compaction and stable partition, 64-bit scans and
//!   streamed scans of any length.
//! - [`stencil`]: 2-D/3-D stencils in core and out of core.
//! - [`schedule`]: many small sorts and scans merged into shared launches.
//! - [`cpu`]: the CPU twins of the kernels, the reference semantics tests compare against.
//! - [`cpu_engine`]: the same jobs on all CPU cores, for machines without a hardware GPU.
//!
//! docs/ARCHITECTURE.md maps the families to their kernels, twins, tests and benches.

pub mod cpu;
pub mod cpu_engine;
pub mod device;
pub mod error;
#[doc(hidden)]
pub mod internal;
pub mod keys;
pub mod scan;
pub mod schedule;
pub mod sort;
pub mod stencil;
mod wgsl;

pub use device::{Gpu, GpuOptions};
pub use error::{Error, Result};
pub use keys::{KeyType, SortKey, SortOrder};
pub use scan::Scanner;
pub use sort::{Algorithm, SortJob, SortStats, Sorter};
/// The wgpu this crate is built against, so that callers' buffers and devices match its version.
pub use wgpu;
