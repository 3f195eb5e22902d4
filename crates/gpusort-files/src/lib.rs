//! Files in and out: formats (raw little-endian and NumPy .npy), inputs of every kind (files,
//! standard input, pipes), and crash-safe output committed once per job.
//!
//! - `npy`: the .npy header parser (fuzzed) and writer.
//! - `input`: opening inputs — maps for regular files, reads for streams; changes are watched.
//! - `output`: temporary files beside each destination, written in parallel, flushed, staged.
//! - `job`: the job's final step (every output put in place together), interrupts, leftovers
//!   of killed runs, and the check that no output is an input or another output.
//! - `platform`: the few system calls that differ between operating systems.

mod input;
mod job;
mod npy;
mod output;
mod platform;

use std::path::Path;

pub use input::{is_std, set_stream_memory, Input};
#[cfg(feature = "tables")]
pub(crate) use job::watch_input;
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
