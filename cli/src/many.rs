//! Many input files as one job: `gpusort sort a.bin b.bin … --out-dir DIR` and `gpusort scan`,
//! `partition`, `compact` likewise. Small files (where per-dispatch overhead dominates) go to
//! the scheduler's shared launches together (gpusort-core `schedule`), packed into as few data
//! buffers as the binding limit allows; larger ones, and 64-bit ones, run one by one through
//! the single-file path, which is faster for them.
//!
//! Every input is opened and checked, and every destination worked out and checked, before any
//! GPU work or any write: a bad input or a clash stops the job with nothing written. Each output
//! is written to its temporary file as its batch finishes, and all of them are put in place
//! together once the whole job has succeeded (files/job.rs).

use std::path::{Path, PathBuf};

use gpusort_core::schedule::{Batch, RunStats, Scheduler, Work};
use gpusort_core::{Gpu, KeyType};

use crate::error::{CliError, CliResult};
use gpusort_files::{check_distinct, check_output_path, is_std, Input, Named, Written};

/// The inputs of a job and where each result goes.
pub struct Files {
    pub inputs: Vec<Input>,
    pub dests: Vec<PathBuf>,
}

/// Whether these flags make a many-file job (several inputs, or an output folder).
pub fn is_many(inputs: &[PathBuf], out_dir: Option<&Path>) -> bool {
    inputs.len() > 1 || out_dir.is_some()
}

/// Open every input (raw ones as `dtype`, .npy ones as their header says) and work out every
/// destination: `DIR/<input's file name>`, or the input itself with `--in-place` (where the
/// command `offers_in_place`). A missing `--out-dir` is created (with its parents) once every
/// input has been checked, and removed again if the job fails while it is still empty. With
/// `rows` (sorts), N-D inputs are taken as rows to sort along their last axis; otherwise every
/// input is 1-D.
pub fn open_all(
    paths: &[PathBuf],
    dtype: Option<KeyType>,
    out_dir: Option<&Path>,
    in_place: bool,
    offers_in_place: bool,
    rows: bool,
) -> Result<Files, CliError> {
    let dir = match (out_dir, in_place) {
        (Some(_), true) => {
            return Err(CliError::usage(
                "--out-dir and --in-place exclude each other",
            ))
        }
        (None, false) => {
            return Err(CliError::usage(if offers_in_place {
                "several inputs need --out-dir DIR (or --in-place)"
            } else {
                "several inputs need --out-dir DIR"
            }))
        }
        (Some(d), false) => {
            if d.exists() && !d.is_dir() {
                return Err(CliError::usage(format!(
                    "--out-dir {} is a file, not a folder",
                    d.display()
                )));
            }
            Some(d)
        }
        (None, true) => None,
    };
    let mut inputs = Vec::with_capacity(paths.len());
    for p in paths {
        if is_std(p) {
            return Err(CliError::usage(
                "standard input (-) is one input: give it alone, with -o",
            ));
        }
        // --dtype names what raw inputs hold; a .npy input carries its own, which must agree
        // with a --dtype given (as the single-file form checks)
        inputs.push(if rows {
            Input::open_rows(p, dtype)?
        } else {
            Input::open(p, dtype)?
        });
    }
    if let Some(d) = dir {
        gpusort_files::create_out_dir(d)?;
    }
    let mut dests = Vec::with_capacity(paths.len());
    for p in paths {
        let dest = match dir {
            None => p.clone(),
            Some(d) => {
                let name = p
                    .file_name()
                    .ok_or_else(|| CliError::usage(format!("{} names no file", p.display())))?;
                d.join(name)
            }
        };
        check_output_path(&dest)?;
        dests.push(dest);
    }
    let named: Vec<Named> = inputs
        .iter()
        .map(|i| Named {
            flag: "",
            path: &i.path,
        })
        .collect();
    let written: Vec<Written> = dests
        .iter()
        .enumerate()
        .map(|(i, d)| Written {
            flag: "",
            path: d,
            replaces: in_place.then_some(i),
        })
        .collect();
    check_distinct(&named, &written)?;
    Ok(Files { inputs, dests })
}

/// The flags a many-file job cannot take (they name one output each).
pub fn reject_single_file_flags(flags: &[(&str, bool)]) -> Result<(), CliError> {
    match flags.iter().find(|(_, given)| *given) {
        Some((name, _)) => Err(CliError::usage(format!(
            "{name} takes one input; with several inputs or --out-dir, leave it out"
        ))),
        None => Ok(()),
    }
}

/// Group files (by index) into batches whose data fit one binding of `max_words` words.
pub fn batches(files: &[usize], lens: &[usize], max_words: u64) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut words = 0u64;
    for &f in files {
        let n = lens[f] as u64;
        if out.is_empty() || words + n > max_words {
            out.push(Vec::new());
            words = 0;
        }
        out.last_mut().expect("just pushed").push(f);
        words += n;
    }
    out
}

/// What the merged runs of a job did, for its summary line.
#[derive(Default)]
pub struct Merged {
    pub launches: usize,
    pub mode: Option<gpusort_core::schedule::Mode>,
}

/// Run the files `chosen` (indices into `files.inputs`) in the scheduler's shared launches, as
/// few batches as one binding allows. Each file's 32-bit words are followed by `extra(input)`
/// words (a split's destination and count); `tasks(f, input, offset)` gives file f's tasks
/// (work, first word, words); `done(f, words)` receives file f's words after its batch ran,
/// extra words included.
pub fn run_merged(
    gpu: &Gpu,
    sched: &Scheduler,
    files: &Files,
    chosen: &[usize],
    extra: impl Fn(&Input) -> usize,
    tasks: impl Fn(usize, &Input, u32) -> Vec<(Work, u32, u32)>,
    mut done: impl FnMut(usize, &[u32]) -> Result<(), CliError>,
) -> Result<Merged, CliError> {
    let spans: Vec<usize> = files.inputs.iter().map(|i| i.len + extra(i)).collect();
    let mut merged = Merged::default();
    for group in batches(chosen, &spans, gpu.max_binding() / 4) {
        let mut data: Vec<u32> = Vec::with_capacity(group.iter().map(|&f| spans[f]).sum());
        let mut batch = Batch::default();
        let mut at = Vec::with_capacity(group.len());
        for &f in &group {
            let input = &files.inputs[f];
            let offset = data.len() as u32;
            data.extend(input.to_vec::<u32>());
            data.resize(data.len() + extra(input), 0);
            for (work, first, n) in tasks(f, input, offset) {
                batch.add(work, first, n, &[]);
            }
            at.push(offset as usize..data.len());
        }
        let stats: RunStats = sched.run_host(gpu, &batch, &mut data)?;
        merged.launches += stats.launches;
        merged.mode = Some(stats.mode);
        for (&f, r) in group.iter().zip(at) {
            done(f, &data[r])?;
        }
    }
    Ok(merged)
}

/// Files `files` (indices into `lens`) dealt out to `devices` devices: largest first, each to
/// the device with the fewest elements so far.
pub fn deal(files: &[usize], lens: &[usize], devices: usize) -> Vec<Vec<usize>> {
    let mut by_size = files.to_vec();
    by_size.sort_by_key(|&f| std::cmp::Reverse(lens[f]));
    let devices = devices.max(1);
    let mut load = vec![0usize; devices];
    let mut dealt: Vec<Vec<usize>> = vec![Vec::new(); devices];
    for f in by_size {
        let d = (0..devices).min_by_key(|&d| load[d]).unwrap_or(0);
        load[d] += lens[f].max(1);
        dealt[d].push(f);
    }
    dealt
}

/// Each device's dealt files (see [`deal`]) through `one(device, file)` on a thread per device,
/// the devices at once; the first error in device order is returned.
pub fn on_devices(
    dealt: &[Vec<usize>],
    one: impl Fn(usize, usize) -> CliResult + Sync,
) -> CliResult {
    let one = &one;
    let results: Vec<CliResult> = std::thread::scope(|s| {
        let handles: Vec<_> = dealt
            .iter()
            .enumerate()
            .map(|(d, mine)| s.spawn(move || mine.iter().try_for_each(|&f| one(d, f))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CliError::runtime("a device's thread panicked")))
            })
            .collect()
    });
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_respect_the_binding() {
        let lens = [5, 3, 9, 2, 2];
        assert_eq!(
            batches(&[0, 1, 2, 3, 4], &lens, 9),
            vec![vec![0, 1], vec![2], vec![3, 4]]
        );
        assert_eq!(batches(&[], &lens, 9), Vec::<Vec<usize>>::new());
    }
}
