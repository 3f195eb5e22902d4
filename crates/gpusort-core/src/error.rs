//! One error type for everything the library can report.

use thiserror::Error;

/// What went wrong in gpusort-core. User mistakes (`InvalidInput`) are kept apart from
/// device trouble so the CLI can map them to exit codes 2 and 1. Messages name settings in
/// words ("adapter 'x'", "a GPU memory budget"), never one front end's flags: the CLI, Python and
/// DataFusion each say how their users set them.
#[derive(Debug, Error)]
pub enum Error {
    #[error("no GPU adapter found{0}; install a GPU driver, or Mesa's software Vulkan driver (Debian/Ubuntu: apt-get install mesa-vulkan-drivers)")]
    NoAdapter(String),
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error("the input is too large for this device: {0}")]
    TooLarge(String),
    #[error("could not create the GPU device: {0}")]
    RequestDevice(String),
    #[error("GPU out of memory: {0}; try a smaller GPU memory budget (stencils), a smaller input, or another adapter")]
    OutOfMemory(String),
    #[error("GPU validation error (a gpusort bug, please report it): {0}")]
    Validation(String),
    #[error("the GPU device was lost: {0}; try another adapter or backend")]
    DeviceLost(String),
    #[error("timed out after {0:?} waiting for the GPU")]
    Timeout(std::time::Duration),
    #[error("could not map a GPU buffer: {0}")]
    Map(String),
    #[error("{0}")]
    Io(String),
    #[error("verification failed: {0}; nothing was written")]
    VerificationFailed(String),
    /// The caller's stop condition held (the Python package's Ctrl-C): the work ended early and
    /// its result is incomplete.
    #[error("stopped by the caller before its end")]
    Cancelled,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<wgpu::Error> for Error {
    fn from(e: wgpu::Error) -> Self {
        match e {
            wgpu::Error::OutOfMemory { .. } => Error::OutOfMemory(e.to_string()),
            wgpu::Error::Validation { description, .. } => Error::Validation(description),
            wgpu::Error::Internal { description, .. } => Error::DeviceLost(description),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    /// Driver failures name what the user can try; validation errors read as gpusort bugs.
    #[test]
    fn gpu_faults_say_what_to_try() {
        let oom: Error = wgpu::Error::OutOfMemory {
            source: Box::new(std::io::Error::other("allocation failed")),
        }
        .into();
        let text = oom.to_string();
        assert!(
            text.contains("memory budget") && text.contains("another adapter"),
            "{text}"
        );
        assert!(!text.contains("--"), "no front end's flags: {text}");
        let lost = Error::DeviceLost("Lost".into()).to_string();
        assert!(
            lost.contains("adapter") && lost.contains("backend") && !lost.contains("--"),
            "{lost}"
        );
        let bug: Error = wgpu::Error::Validation {
            source: Box::new(std::io::Error::other("bad binding")),
            description: "bad binding".into(),
        }
        .into();
        assert!(bug.to_string().contains("a gpusort bug"), "{bug}");
        let timeout = Error::Timeout(crate::device::GPU_WAIT_TIMEOUT).to_string();
        assert!(timeout.contains("timed out"), "{timeout}");
    }
}
