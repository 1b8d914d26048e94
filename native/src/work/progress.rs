//! The progress of a long run: items done out of the run's total (resumed items count as done
//! from the start), the rate of this run's items and the ETA, on stderr. On a terminal it is a
//! bar; elsewhere (Slurm, nohup, a pipe) plain lines, one every `CULTURELENS_PROGRESS_EVERY`
//! seconds (default 30; 0: one per update) and one at the end, since a bar that cannot redraw
//! prints nothing until the run ends.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// The environment variable of the plain lines' interval, in seconds.
pub const ENV_EVERY: &str = "CULTURELENS_PROGRESS_EVERY";

/// A progress display over a run's items, and the clock of the run's work loop.
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
    /// Plain lines instead of the bar: the interval and the state they report.
    lines: Option<Lines>,
}

struct Lines {
    every: Duration,
    what: String,
    len: usize,
    /// Items done when the run started (resumed), done now, and when the last line was printed.
    state: Mutex<(usize, usize, Instant)>,
    /// What the current item is doing (e.g. its denoising step), appended to the lines.
    detail: Mutex<String>,
}

impl Progress {
    /// A display over `len` items named `what` (e.g. "images"), `done` of them finished already;
    /// the rate and ETA count only the items done from now on.
    pub fn new(len: usize, done: usize, what: &str) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = if terminal { ProgressBar::new(len as u64) } else { ProgressBar::hidden() };
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{bar:40}} {{pos}}/{{len}} {what} · {{per_sec}} · ETA {{eta}} {{msg}}"
            ))
            .expect("valid template"),
        );
        bar.set_position(done as u64);
        bar.reset_eta();
        let lines = (!terminal).then(|| Lines {
            every: every_from_env(),
            what: what.to_string(),
            len,
            state: Mutex::new((done, done, Instant::now())),
            detail: Mutex::new(String::new()),
        });
        Self { bar, started: Instant::now(), lines }
    }

    /// Counts `n` more items as done (finished or failed).
    pub fn inc(&self, n: usize) {
        self.bar.inc(n as u64);
        if let Some(lines) = &self.lines {
            lines.state.lock().unwrap_or_else(|e| e.into_inner()).1 += n;
            lines.print_when_due(self.started.elapsed());
        }
    }

    /// What the current item is doing, between item updates (e.g. `denoising step 12/50`): the
    /// bar's message on a terminal; off a terminal, part of the next line, and a line of its own
    /// when the interval has passed since the last one.
    pub fn set_detail(&self, detail: String) {
        self.bar.set_message(detail.clone());
        if let Some(lines) = &self.lines {
            *lines.detail.lock().unwrap_or_else(|e| e.into_inner()) = detail;
            lines.print_when_due(self.started.elapsed());
        }
    }

    /// Clears the detail (the item it described is done), printing nothing.
    pub fn clear_detail(&self) {
        self.bar.set_message("");
        if let Some(lines) = &self.lines {
            lines.detail.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// Ends the display (a last plain line off a terminal); returns the time since
    /// [`Progress::new`].
    pub fn finish(&self) -> Duration {
        self.bar.finish();
        let elapsed = self.started.elapsed();
        if let Some(lines) = &self.lines {
            let state = lines.state.lock().unwrap_or_else(|e| e.into_inner());
            eprintln!("{}", lines.line(state.0, state.1, elapsed));
        }
        elapsed
    }
}

impl Lines {
    /// Prints a line when the interval has passed since the last one (`elapsed`: since the run
    /// started).
    fn print_when_due(&self, elapsed: Duration) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.2.elapsed() >= self.every {
            state.2 = Instant::now();
            eprintln!("{}", self.line(state.0, state.1, elapsed));
        }
    }

    /// `done/len what · rate/s · ETA`, the rate over this run's items only.
    fn line(&self, start: usize, done: usize, elapsed: Duration) -> String {
        let seconds = elapsed.as_secs_f64();
        let new = done.saturating_sub(start);
        let detail = self.detail.lock().unwrap_or_else(|e| e.into_inner());
        let detail =
            if detail.is_empty() || done >= self.len { String::new() } else { format!(" · {detail}") };
        if new == 0 || seconds <= 0.0 {
            return format!("progress: {done}/{} {}{detail}", self.len, self.what);
        }
        let rate = new as f64 / seconds;
        let left = self.len.saturating_sub(done) as f64 / rate;
        format!("progress: {done}/{} {} · {rate:.3}/s · ETA {left:.0} s{detail}", self.len, self.what)
    }
}

/// `CULTURELENS_PROGRESS_EVERY` (seconds, default 30); an unreadable value is the default.
fn every_from_env() -> Duration {
    std::env::var(ENV_EVERY)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::from_secs(30), Duration::from_secs_f64)
}
