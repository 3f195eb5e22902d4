//! Arrays in files for gpusort's front ends: formats (raw little-endian and NumPy .npy), inputs of
//! every kind (files, standard input, pipes), and crash-safe output committed once per job: nothing
//! is written over an input or an existing output until every output of the job is complete and
//! flushed (docs/RELIABILITY.md).
//!
//! - `npy`: the .npy header parser (fuzzed) and writer.
//! - `input`: opening inputs — maps for regular files, reads for streams; changes are watched.
//! - `output`: temporary files beside each destination, written in parallel, flushed, staged.
//! - `job`: the job's final step (every output put in place together), interrupts, leftovers
//!   of killed runs, and the check that no output is an input or another output.
//! - `platform`: the few system calls that differ between operating systems.
//! - [`exit`]: what a one-shot process keeps until its end, released behind the final step.
//! - [`Error`]: one line for the user, and whether the mistake was theirs (code 2) or not (1).

mod error;
pub mod exit;
mod input;
mod job;
mod npy;
mod output;
mod platform;

use std::path::Path;

pub use error::{Error, Result};
pub use input::{is_std, set_stream_memory, Input};
pub use job::watch_input;
pub use job::{
    abandon, check_distinct, create_out_dir, durable, finish, interrupted, remove_pending_now,
    set_durable, Finished, Named, Target, Written,
};
pub use npy::{parse_npy, NpyLayout};
pub use output::{
    check_output_path, default_name, finish_words, open_values, output_format, output_target,
    resolve_output, set_force, shown, write_words, Appender, Carver, Landed, MappedAppender,
    MappedWriter, Output, PositionedWriter, Prefault, RunDir, Scratch, Sink, StreamWriter,
    Writeback, PREFAULT_MAX,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Raw,
    Npy,
}

impl Format {
    /// What an output path asks for: `.npy` by extension, raw otherwise.
    pub fn for_output(path: &Path) -> Format {
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
        {
            Format::Npy
        } else {
            Format::Raw
        }
    }
}

/// Test hooks (docs/RELIABILITY.md): in a debug build, the build the tests run, the variable
/// `var` holds the job that many milliseconds (at most a minute) at a delicate moment, so that a
/// test can interrupt it or change a file under it. Release builds have no hooks.
fn test_stall(var: &str) {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var(var).ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(60_000)));
    }
    #[cfg(not(debug_assertions))]
    let _ = var;
}
