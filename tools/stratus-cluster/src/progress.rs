//! Progress for the tools' long waits, from `indicatif`: a spinner with the
//! time spent, drawn on standard error when it is a terminal and hidden
//! elsewhere, where the tools print a plain line when a wait starts and
//! one when it ends (CI logs stay readable).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A wait in progress: `what` and the time spent, redrawn ten times a
/// second on a terminal until [`Wait::done`] (or until dropped).
pub struct Wait {
    bar: ProgressBar,
    what: String,
}

impl Wait {
    /// Start showing `what` (prefixed with `tool: `, as the tools' lines
    /// are); on a terminal as a spinner, elsewhere as one plain line.
    pub fn start(tool: &str, what: impl Into<String>) -> Self {
        let what = format!("{tool}: {}", what.into());
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if bar.is_hidden() {
            eprintln!("{what}");
        } else {
            let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar.set_message(what.clone());
            bar.enable_steady_tick(Duration::from_millis(100));
        }
        Self { bar, what }
    }

    /// End the wait, saying `outcome` (e.g. `built in 12 s`) after what it
    /// was.
    pub fn done(self, outcome: &str) {
        self.bar.finish_and_clear();
        eprintln!("{}: {outcome}", self.what);
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        // A wait that ended in an error leaves no spinner behind.
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}
