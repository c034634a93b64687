//! The write circuit breaker (§18.3, §22.8): after too many consecutive
//! failed writes, ProxOps stops writing for a while and runs read-only.
//!
//! Owns the count of consecutive failed write calls and the open window.
//! A write is any POST, PUT or DELETE (PUT included, unlike the original).
//! Only a successful write closes the breaker; reads neither open nor close
//! it. When the window has passed, the next write goes through and the count
//! starts again from zero (so re-opening takes another full run of failures).
//!
//! **Architecture Invariant:** time is an argument (`now`); this module reads
//! no clock and sends nothing.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// When the breaker opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive failed write calls that open the breaker (default 20).
    pub threshold: u32,
    /// How long writes are refused once it is open (default 10 min).
    pub open_for: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> BreakerPolicy {
        BreakerPolicy {
            threshold: 20,
            open_for: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    consecutive_failures: u32,
    open_until: Option<Instant>,
}

#[derive(Debug)]
pub(crate) struct WriteBreaker {
    policy: BreakerPolicy,
    state: Mutex<State>,
}

impl WriteBreaker {
    pub(crate) fn new(policy: BreakerPolicy) -> WriteBreaker {
        // Like the original, a zero threshold or window falls back to the default.
        let default = BreakerPolicy::default();
        let policy = BreakerPolicy {
            threshold: if policy.threshold == 0 {
                default.threshold
            } else {
                policy.threshold
            },
            open_for: if policy.open_for.is_zero() {
                default.open_for
            } else {
                policy.open_for
            },
        };
        WriteBreaker {
            policy,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is two plain numbers, valid whatever a panicking holder did.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// May a write be sent now? Past the window this half-opens the breaker:
    /// the write goes through and the count restarts.
    pub(crate) fn admit(&self, now: Instant) -> bool {
        let mut state = self.state();
        match state.open_until {
            Some(until) if now < until => false,
            Some(_) => {
                state.open_until = None;
                state.consecutive_failures = 0;
                true
            }
            None => true,
        }
    }

    /// Records the outcome of one write call.
    pub(crate) fn record(&self, succeeded: bool, now: Instant) {
        let mut state = self.state();
        if succeeded {
            state.consecutive_failures = 0;
            state.open_until = None;
            return;
        }
        state.consecutive_failures = state.consecutive_failures.saturating_add(1);
        if state.consecutive_failures >= self.policy.threshold && state.open_until.is_none() {
            state.open_until = Some(now + self.policy.open_for);
        }
    }

    pub(crate) fn is_open(&self, now: Instant) -> bool {
        matches!(self.state().open_until, Some(until) if now < until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> WriteBreaker {
        WriteBreaker::new(BreakerPolicy::default())
    }

    #[test]
    fn opens_after_twenty_consecutive_failures_for_ten_minutes() {
        let t0 = Instant::now();
        let b = breaker();
        for _ in 0..19 {
            assert!(b.admit(t0));
            b.record(false, t0);
        }
        assert!(!b.is_open(t0));
        assert!(b.admit(t0));
        b.record(false, t0);
        assert!(b.is_open(t0));
        assert!(!b.admit(t0 + Duration::from_secs(599)));
        assert!(b.is_open(t0 + Duration::from_secs(599)));
        assert!(!b.is_open(t0 + Duration::from_secs(600)));
    }

    #[test]
    fn a_success_in_between_restarts_the_count() {
        let t0 = Instant::now();
        let b = breaker();
        for _ in 0..19 {
            b.record(false, t0);
        }
        b.record(true, t0);
        for _ in 0..19 {
            b.record(false, t0);
        }
        assert!(!b.is_open(t0));
    }

    #[test]
    fn after_the_window_writes_flow_and_reopening_needs_a_full_run_again() {
        let t0 = Instant::now();
        let b = breaker();
        for _ in 0..20 {
            b.record(false, t0);
        }
        let later = t0 + Duration::from_secs(601);
        assert!(b.admit(later));
        b.record(false, later);
        assert!(
            !b.is_open(later),
            "one failure after half-open must not re-open"
        );
        for _ in 0..19 {
            b.record(false, later);
        }
        assert!(b.is_open(later));
    }

    #[test]
    fn zero_policy_values_fall_back_to_defaults() {
        let b = WriteBreaker::new(BreakerPolicy {
            threshold: 0,
            open_for: Duration::ZERO,
        });
        assert_eq!(b.policy, BreakerPolicy::default());
    }
}
