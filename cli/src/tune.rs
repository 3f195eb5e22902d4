//! `gpusort tune`: the library's tuner ([`gpusort_core::tune`]) on this device, its result stored
//! in the tuning file (`tuning::file()`) for every later run on the same adapter, driver and
//! gpusort version; `--show` and `--reset` read and edit that file.

use gpusort_core::tuning::{StoredTuning, TuningFile};

use crate::error::{CliError, CliResult};
use crate::{Engine, Global};

#[derive(clap::Args, Debug)]
pub struct TuneArgs {
    /// A short run (small sizes, a few candidates): seconds; the default on software adapters.
    #[arg(long)]
    pub quick: bool,
    /// Print the tuning stored for this device and where it is; measure nothing.
    #[arg(long, conflicts_with = "reset")]
    pub show: bool,
    /// Forget the tuning stored for this device (later runs use the defaults).
    #[arg(long)]
    pub reset: bool,
}

pub fn run(g: &Global, args: &TuneArgs) -> CliResult {
    if let Engine::Cpu { why } = g.engine()? {
        return Err(CliError::usage(format!(
            "gpusort tune measures a GPU, and jobs here run on the CPU engine ({why}); \
             --backend gpu tunes the software adapter"
        )));
    }
    let gpu = g.gpu()?;
    let path = crate::tuning::file().ok_or_else(|| {
        CliError::usage("no cache directory for the tuning: set GPUSORT_CACHE_DIR")
    })?;
    if args.show {
        match crate::tuning::stored(&gpu) {
            Some(t) => println!(
                "{}: tuned on {} (gpusort {}), in {}\nsort: {:?}\nscan: {:?}\nstencil: {:?}",
                gpu.adapter.name,
                t.date,
                t.gpusort_version,
                path.display(),
                t.sort,
                t.scan,
                t.stencil
            ),
            None => println!(
                "{}: no stored tuning (the defaults are in use); `gpusort tune` measures one",
                gpu.adapter.name
            ),
        }
        return Ok(());
    }
    let mut file = TuningFile::load(&path).unwrap_or_else(|e| {
        tracing::warn!("{e}; starting a new tuning file");
        TuningFile::default()
    });
    if args.reset {
        let before = file.tunings.len();
        file.tunings.retain(|t| !t.matches(&gpu));
        file.save(&path)?;
        if !g.quiet {
            println!(
                "{}: {}",
                gpu.adapter.name,
                if file.tunings.len() < before {
                    "stored tuning forgotten; the defaults are in use"
                } else {
                    "no stored tuning to forget"
                }
            );
        }
        return Ok(());
    }
    let say = |line: &str| {
        if !g.quiet {
            println!("{line}");
        }
    };
    let start = std::time::Instant::now();
    let tuned = gpusort_core::tune::measure(&gpu, args.quick, &say)?;
    file.insert(StoredTuning::measured(&gpu, &tuned));
    file.save(&path)?;
    if !g.quiet {
        println!(
            "tuned {} in {:.0} s: sort {:.2}x, scan {:.2}x, stencils {:.2}x the defaults' speed; \
             stored in {}",
            gpu.adapter.name,
            start.elapsed().as_secs_f64(),
            tuned.sort_gain,
            tuned.scan_gain,
            tuned.stencil_gain,
            path.display()
        );
    }
    Ok(())
}
