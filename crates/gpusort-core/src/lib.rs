//! gpusort-core: the GPU context and the kernels of gpusort, on wgpu/WGSL.
//!
//! - [`gpu`]: instance, adapter, device and queue in one place ([`Gpu`]).
//! - [`transfer`]: host <-> GPU copies through mapped staging buffers.
//! - [`kernel`]: pipelines and bind groups from declared binding lists.
//! - [`bitonic`]: the vectorised bitonic sort (METHODS.md method 1) and its plan.
//! - [`external`]: sorts larger than host memory (GPU-sorted runs on disk, streaming merge).
//! - [`radix`]: the one-sweep LSD radix sort (METHODS.md method 3, digits ranked at once).
//! - [`scan`]: scans, compaction and partition (METHODS.md method 3).
//! - [`scan64`]: scans of u64, i64 and f64 elements.
//! - [`streamed`]: scans and compactions of any length, chunks overlapped with transfers.
//! - [`schedule`]: many small sorts and scans in merged launches (METHODS.md method 5).
//! - [`stencil`]: in-core and out-of-core stencils on 2-D/3-D grids (METHODS.md method 4).
//! - [`cpu`]: CPU twins of the kernels, the references tests compare against.
//! - [`cpu_engine`]: the same jobs on all cores, fast, for machines without a hardware GPU.
//! - [`shaders`]: the embedded WGSL sources.

pub mod bench;
pub mod bitonic;
mod bitonic_wgsl;
pub mod cpu;
pub mod cpu_engine;
pub mod error;
pub mod external;
pub mod gpu;
pub mod kernel;
pub mod keys;
mod merge;
pub mod radix;
pub mod scan;
pub mod scan64;
pub mod schedule;
pub mod shaders;
pub mod stencil;
pub mod streamed;
pub mod transfer;

pub use bitonic::{Algorithm, BitonicPlan, BitonicSorter, GpuSortJob, SortStats};
pub use error::{Error, Result};
pub use gpu::{Gpu, GpuOptions};
pub use keys::{KeyType, SortKey, SortOrder};
