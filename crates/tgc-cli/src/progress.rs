//! The stage a long command is in, as a spinner on stderr: `tgc run`'s
//! import, C code generation and compile (tens of seconds for a CNN) and
//! run, `tgc compile`'s load and CUDA compile, `tgc import`'s decode and
//! writing. Drawn only when stderr is a terminal (`indicatif`'s stderr
//! target), so a pipe or a log file sees none of it; cleared when the
//! command ends, before its result or error is printed.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A spinner naming the current stage, with the time spent so far.
pub(crate) struct Stages {
    bar: ProgressBar,
}

impl Stages {
    /// Starts the spinner at `stage` (e.g. "importing model.onnx").
    pub(crate) fn start(stage: &str) -> Stages {
        let bar = ProgressBar::new_spinner();
        bar.set_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("a valid template"));
        bar.set_message(stage.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        Stages { bar }
    }

    /// Moves the spinner to `stage`.
    pub(crate) fn stage(&self, stage: &str) {
        self.bar.set_message(stage.to_string());
    }

    /// Removes the spinner, before the command prints on stderr.
    pub(crate) fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Stages {
    fn drop(&mut self) {
        self.clear();
    }
}
