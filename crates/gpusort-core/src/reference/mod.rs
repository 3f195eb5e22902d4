//! CPU twins of the GPU kernels: the same inputs and the same steps, in plain Rust, so tests can
//! compare the two and planning code can be checked without a GPU.

pub mod bitonic;
pub mod check;
pub mod keys;
pub mod radix;
pub mod scan;
pub mod stencil;
