//! Cooperative cancellation of long computations: a [`Cancel`] token (a shared flag) that a
//! caller raises from another thread, and [`checkpoint`]s between the units of long loops
//! (bootstrap resamples, Vendi groups, SoS exact resamples, embedding batches) where the work
//! stops when the token of the running thread is raised.
//!
//! The token is the thread's own ([`Cancel::run`] installs it for the closure it runs), so the
//! metric functions keep their signatures and their callers that never cancel (the CLI, the
//! browser) pay one thread-local read per checkpoint and behave exactly as before: without a
//! token a checkpoint does nothing. A raised token unwinds from the checkpoint to [`Cancel::run`]
//! with [`std::panic::resume_unwind`] (no panic hook, nothing printed), which returns `None`;
//! checkpoints sit between units of work, where no lock is held and no partial result is kept.
//! Checkpoints run on the thread that called [`Cancel::run`]; work handed to other threads (a
//! rayon pool) ends with the unit the checkpoint follows.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A cancellation flag shared by the thread that runs a computation and the one that may stop it.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

/// The unwinding payload of a cancelled computation (caught by [`Cancel::run`]).
struct Cancelled;

thread_local! {
    /// The token of the computation running on this thread, if any.
    static CURRENT: RefCell<Option<Cancel>> = const { RefCell::new(None) };
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Raises the flag: the computation stops at its next [`checkpoint`].
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Runs `work` on this thread with this token as the thread's: `Some` of its result, or
    /// `None` when the token was raised and a [`checkpoint`] in `work` stopped it. Any other
    /// panic goes on unwinding.
    pub fn run<T>(&self, work: impl FnOnce() -> T) -> Option<T> {
        let outer = CURRENT.with(|c| c.replace(Some(self.clone())));
        let result = catch_unwind(AssertUnwindSafe(work));
        CURRENT.with(|c| c.replace(outer));
        match result {
            Ok(value) => Some(value),
            Err(payload) if payload.is::<Cancelled>() => None,
            Err(payload) => resume_unwind(payload),
        }
    }
}

/// Stops the computation here when the running thread's token ([`Cancel::run`]) is raised;
/// nothing without a token.
pub fn checkpoint() {
    let cancelled = CURRENT.with(|c| c.borrow().as_ref().is_some_and(Cancel::is_cancelled));
    if cancelled {
        resume_unwind(Box::new(Cancelled));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_token_stops_at_the_next_checkpoint() {
        let token = Cancel::new();
        let mut done = 0;
        let out = token.run(|| {
            for i in 0..10 {
                checkpoint();
                done += 1;
                if i == 3 {
                    token.cancel();
                }
            }
            "finished"
        });
        assert_eq!(out, None);
        assert_eq!(done, 4);
    }

    #[test]
    fn without_a_raised_token_checkpoints_do_nothing() {
        checkpoint();
        assert_eq!(Cancel::new().run(|| (0..5).inspect(|_| checkpoint()).sum::<i32>()), Some(10));
        // A raised token outside `run` is not the thread's.
        Cancel::new().cancel();
        checkpoint();
    }

    #[test]
    fn other_panics_go_on_unwinding_and_the_outer_token_comes_back() {
        let outer = Cancel::new();
        let inner = Cancel::new();
        let out = outer.run(|| {
            let caught = catch_unwind(AssertUnwindSafe(|| inner.run(|| panic!("boom"))));
            assert!(caught.is_err());
            outer.cancel();
            checkpoint();
            "not reached"
        });
        assert_eq!(out, None);
    }
}
