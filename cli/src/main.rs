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
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                    | clap::error::ErrorKind::MissingSubcommand
            ) =>
        {
            // a bare `gpusort` (GPUSORT_* variables set or not): the help, then exit 2 as for
            // any incomplete command line
            use clap::CommandFactory;
            eprint!("{}", Cli::command().render_help());
            return ExitCode::from(2);
        }
        Err(e) => {
            // one line, like every other error; the subcommand's --help has the details
            let text = e.render().to_string();
            let first = text
                .lines()
                .take_while(|l| !l.trim().is_empty() && !l.starts_with("Usage:"))
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ");
            let first = first.trim_start_matches("error: ");
            eprintln!("gpusort: {first} (see {} --help)", gpusort::help_command());
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
    // An input that shrinks under its memory map raises SIGBUS (as would an output map on a full
    // disk where its space could not be reserved): one line, exit 1, temporaries removed,
    // instead of a silent kill.
    #[cfg(unix)]
    // SAFETY: installing a handler at startup, before any other thread runs; the handler only
    // unlinks files (when no other thread holds the list), writes one line and calls _exit.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
    // Ctrl-C / SIGTERM: remove temporary outputs and say what, if anything, had been written
    // (the final step holds the same lock while it renames, so the answer is exact).
    let _ = ctrlc::set_handler(|| {
        let message = gpusort_files::interrupted();
        eprintln!("gpusort: {message}");
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
    // Every output is in place when run returns: end without tearing down what the command
    // kept (gpusort::exit).
    match gpusort::run(&cli) {
        Ok(()) => gpusort_files::exit::now(0),
        Err(e) => {
            eprintln!("gpusort: {}", e.message);
            gpusort_files::exit::now(e.code as u8)
        }
    }
}

/// Whether a thread is already answering a SIGBUS (several threads reading a truncated map
/// fault at once; one line is enough).
#[cfg(unix)]
static SIGBUS_TAKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn on_sigbus(_: libc::c_int) {
    if SIGBUS_TAKEN.swap(true, std::sync::atomic::Ordering::SeqCst) {
        // another thread is cleaning up and will end the process: wait for it (returning
        // would only fault again)
        loop {
            // SAFETY: pause is async-signal-safe; it waits for the process to end.
            unsafe { libc::pause() };
        }
    }
    gpusort_files::remove_pending_now();
    let line: &[u8] = b"gpusort: a file under a memory map could not be read or written (did another process truncate an input, or is the disk full?); no output was written\n";
    // SAFETY: write and _exit are async-signal-safe.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
        libc::_exit(1);
    }
}
