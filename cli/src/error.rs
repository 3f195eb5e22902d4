//! CLI errors: one line on stderr, exit code 2 for bad usage or input, 1 for runtime failures.

use gpusort_core::Error as CoreError;

#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub code: i32,
}

impl CliError {
    /// The user's mistake: bad flags, bad input. Exit code 2.
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            code: 2,
        }
    }

    /// Something failed while doing valid work. Exit code 1.
    pub fn runtime(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            code: 1,
        }
    }
}

impl From<CoreError> for CliError {
    fn from(e: CoreError) -> Self {
        let code = match e {
            CoreError::InvalidInput(_) => 2,
            _ => 1,
        };
        // the library names settings in words; the CLI adds the flags that set them
        let flags = match e {
            CoreError::OutOfMemory(_) => " (--gpu-memory, --adapter)",
            CoreError::DeviceLost(_) => " (--adapter, --backend)",
            _ => "",
        };
        CliError {
            message: format!("{e}{flags}"),
            code,
        }
    }
}

impl From<gpusort_files::Error> for CliError {
    fn from(e: gpusort_files::Error) -> Self {
        CliError {
            message: e.message,
            code: e.code,
        }
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;
