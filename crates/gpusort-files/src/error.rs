//! The one error of file handling: a line for the user and whose mistake it was.

/// A file job's failure: `message` is one line for the user; `code` 2 where the input or the
/// request was wrong (a missing file, an output that is an input), 1 where valid work failed (a
/// full disk, a rename refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub message: String,
    pub code: i32,
}

impl Error {
    /// The user's mistake: a bad path, a bad file. Exit code 2.
    pub fn usage(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            code: 2,
        }
    }

    /// Something failed while doing valid work. Exit code 1.
    pub fn runtime(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            code: 1,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<gpusort_core::Error> for Error {
    fn from(e: gpusort_core::Error) -> Self {
        let code = match e {
            gpusort_core::Error::InvalidInput(_) => 2,
            _ => 1,
        };
        Error {
            message: e.to_string(),
            code,
        }
    }
}

pub type Result<T = ()> = std::result::Result<T, Error>;
