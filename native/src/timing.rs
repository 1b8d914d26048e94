//! Wall-clock stage timer behind the `--timings` flags: prints `timing <stage> <seconds>` to
//! stderr, one line per stage, so benchmark scripts can split a command's time.

use std::time::Instant;

/// Laps of a command's stages; silent unless switched on.
pub struct Stages {
    on: bool,
    last: Instant,
}

impl Stages {
    pub fn new(on: bool) -> Self {
        Self { on, last: Instant::now() }
    }

    /// Ends the stage `stage` (started at the previous lap or at [`Stages::new`]).
    pub fn lap(&mut self, stage: &str) {
        let now = Instant::now();
        if self.on {
            eprintln!("timing {stage} {:.6}", (now - self.last).as_secs_f64());
        }
        self.last = now;
    }
}
