//! Progress display: a spinner or bar with the current phase on a terminal (`auto`), also into
//! a pipe or file (`always`), or never.

use std::time::Duration;

use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Auto,
    Always,
    Never,
}

/// A phase display. `auto` draws only when stderr is a terminal (indicatif's own check).
pub fn spinner(when: When, quiet: bool) -> ProgressBar {
    let target = match (when, quiet) {
        (_, true) | (When::Never, _) => ProgressDrawTarget::hidden(),
        // a term-like target draws whether or not stderr is a terminal (indicatif's own `term`
        // target hides itself on a pipe)
        (When::Always, _) => {
            ProgressDrawTarget::term_like_with_hz(Box::new(console::Term::buffered_stderr()), 10)
        }
        (When::Auto, _) => ProgressDrawTarget::stderr(),
    };
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// A bar of `total` units (hidden like the spinner in pipes and with --quiet).
pub fn bar(when: When, quiet: bool, total: u64, unit: &str) -> ProgressBar {
    let bar = spinner(when, quiet);
    bar.set_length(total);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{msg}} {{bar:40}} {{pos}}/{{len}} {unit} [{{elapsed_precise}}, eta {{eta}}]"
        ))
        .expect("valid template"),
    );
    bar
}
