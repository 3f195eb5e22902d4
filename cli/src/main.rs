//! `gpusort`: a thin binary over the gpusort library (cli/src/lib.rs) and gpusort-core. Parses
//! flags, installs signal handling, runs the command and reports errors as one line.

use std::process::ExitCode;

use clap::Parser;
use gpusort::Cli;

fn main() -> ExitCode {
    // Mesa's Vulkan drivers print an error per instance when XDG_RUNTIME_DIR is unset (headless
    // servers, containers); compute needs no display, so point it somewhere harmless. Done first,
    // before any thread exists.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = e.print(); // --help, --version
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // one line, like every other error; `--help` has the details
            let text = e.render().to_string();
            let first = text
                .lines()
                .take_while(|l| !l.trim().is_empty() && !l.starts_with("Usage:"))
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ");
            let first = first.trim_start_matches("error: ");
            eprintln!("gpusort: {first} (see gpusort --help)");
            return ExitCode::from(2);
        }
    };
    gpusort::init_logging(&cli.global);
    // A file-size limit (ulimit -f) or similar must surface as a write error we can clean up
    // after, not as SIGXFSZ killing the process with a temporary file left behind.
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_IGN at startup, before any other thread runs.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    // Ctrl-C / SIGTERM: remove temporary outputs; inputs are never written, so they stay intact.
    let _ = ctrlc::set_handler(|| {
        gpusort::files::remove_pending();
        eprintln!("gpusort: interrupted; no output was written");
        // _exit, not exit: running atexit handlers (the GPU driver's teardown) while the main
        // thread still uses the device can crash; the temporary files are already gone.
        #[cfg(unix)]
        // SAFETY: _exit only ends the process.
        unsafe {
            libc::_exit(130)
        };
        #[cfg(not(unix))]
        std::process::exit(130);
    });
    let result = gpusort::run(&cli);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpusort: {}", e.message);
            ExitCode::from(e.code as u8)
        }
    }
}
