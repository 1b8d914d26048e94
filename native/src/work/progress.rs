//! The progress bar of a long run: items done out of the run's total (resumed items count as
//! done from the start), the rate of this run's items and the ETA, on stderr.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar over a run's items, and the clock of the run's work loop.
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
}

impl Progress {
    /// A bar over `len` items named `what` (e.g. "images"), `done` of them finished already;
    /// the rate and ETA count only the items done from now on.
    pub fn new(len: usize, done: usize, what: &str) -> Self {
        let bar = ProgressBar::new(len as u64);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{bar:40}} {{pos}}/{{len}} {what} · {{per_sec}} · ETA {{eta}} {{msg}}"
            ))
            .expect("valid template"),
        );
        bar.set_position(done as u64);
        bar.reset_eta();
        Self { bar, started: Instant::now() }
    }

    /// Counts `n` more items as done (finished or failed).
    pub fn inc(&self, n: usize) {
        self.bar.inc(n as u64);
    }

    /// Ends the bar; returns the time since [`Progress::new`].
    pub fn finish(&self) -> Duration {
        self.bar.finish();
        self.started.elapsed()
    }
}
