//! The circuit breaker of one target: a pure state machine, the clock passed in.
//!
//! closed → open after `consecutive_failures` failures in a row, or when the failure ratio over the last
//! `window` results reaches `failure_ratio`; open → half-open once `cooldown_ms` has passed, letting exactly one
//! probe through; the probe's success closes it, its failure opens it again for another cooldown.
//! Only failures that say "the target is unwell" count (transient, ambiguous); a 4xx about one lead's data or a
//! rate limit shows the target is up and answering.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

use crate::config::BreakerConfig;
pub use crate::model::{BreakerState, Transition};

/// What the worker may do with a target right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Deliver normally.
    Allow,
    /// Deliver exactly one job as a probe.
    Probe,
    /// Deliver nothing; due jobs stay pending without using an attempt.
    Deny,
}

/// Whether an attempt's result counts for or against the target's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Healthy,
    Unhealthy,
    /// Says nothing about the target (a configuration error, a deferred job).
    Neutral,
}

#[derive(Debug, Clone)]
pub struct Breaker {
    state: BreakerState,
    consecutive_failures: u32,
    recent: VecDeque<bool>,
    opened_at: Option<DateTime<Utc>>,
    probe_in_flight: bool,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            state: BreakerState::Closed,
            consecutive_failures: 0,
            recent: VecDeque::new(),
            opened_at: None,
            probe_in_flight: false,
        }
    }
}

impl Breaker {
    pub fn state(&self) -> BreakerState {
        self.state
    }

    pub fn opened_at(&self) -> Option<DateTime<Utc>> {
        self.opened_at
    }

    /// Asks whether work may go to the target now; moves open → half-open when the cooldown is over.
    pub fn admit(&mut self, now: DateTime<Utc>, cfg: &BreakerConfig) -> (Admission, Option<Transition>) {
        match self.state {
            BreakerState::Closed => (Admission::Allow, None),
            BreakerState::Open => {
                let opened = self.opened_at.unwrap_or(now);
                if now >= opened + chrono::Duration::milliseconds(cfg.cooldown_ms as i64) {
                    self.state = BreakerState::HalfOpen;
                    self.probe_in_flight = true;
                    let t = Transition {
                        from: BreakerState::Open,
                        to: BreakerState::HalfOpen,
                        at: now,
                        reason: "cooldown over: letting one probe through".into(),
                    };
                    (Admission::Probe, Some(t))
                } else {
                    (Admission::Deny, None)
                }
            }
            BreakerState::HalfOpen => {
                if self.probe_in_flight {
                    (Admission::Deny, None)
                } else {
                    self.probe_in_flight = true;
                    (Admission::Probe, None)
                }
            }
        }
    }

    /// A probe was admitted but no job was due to carry it: let the next admission try again.
    pub fn probe_unused(&mut self) {
        if self.state == BreakerState::HalfOpen {
            self.probe_in_flight = false;
        }
    }

    /// Records one attempt's result and returns the transition it caused, if any.
    pub fn record(&mut self, health: Health, now: DateTime<Utc>, cfg: &BreakerConfig) -> Option<Transition> {
        let failed = match health {
            Health::Neutral => {
                self.probe_unused();
                return None;
            }
            Health::Healthy => false,
            Health::Unhealthy => true,
        };
        match self.state {
            BreakerState::HalfOpen => {
                self.probe_in_flight = false;
                if failed {
                    self.open(now, "probe failed".into())
                } else {
                    self.state = BreakerState::Closed;
                    self.opened_at = None;
                    self.consecutive_failures = 0;
                    self.recent.clear();
                    Some(Transition {
                        from: BreakerState::HalfOpen,
                        to: BreakerState::Closed,
                        at: now,
                        reason: "probe succeeded".into(),
                    })
                }
            }
            // Results of jobs that were in flight when the breaker opened change nothing.
            BreakerState::Open => None,
            BreakerState::Closed => {
                self.consecutive_failures = if failed { self.consecutive_failures + 1 } else { 0 };
                if cfg.window > 0 {
                    self.recent.push_back(failed);
                    while self.recent.len() > cfg.window as usize {
                        self.recent.pop_front();
                    }
                }
                if self.consecutive_failures >= cfg.consecutive_failures {
                    let n = self.consecutive_failures;
                    return self.open(now, format!("{n} consecutive failures"));
                }
                if cfg.failure_ratio > 0.0 && self.recent.len() == cfg.window as usize {
                    let failures = self.recent.iter().filter(|f| **f).count();
                    let ratio = failures as f64 / self.recent.len() as f64;
                    if ratio >= cfg.failure_ratio {
                        return self.open(now, format!("{failures} of the last {} attempts failed", self.recent.len()));
                    }
                }
                None
            }
        }
    }

    fn open(&mut self, now: DateTime<Utc>, reason: String) -> Option<Transition> {
        let from = self.state;
        self.state = BreakerState::Open;
        self.opened_at = Some(now);
        self.consecutive_failures = 0;
        self.recent.clear();
        Some(Transition { from, to: BreakerState::Open, at: now, reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BreakerConfig {
        BreakerConfig { consecutive_failures: 3, failure_ratio: 0.5, window: 10, cooldown_ms: 1_000 }
    }

    fn t(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_800_000_000_000 + ms).unwrap()
    }

    #[test]
    fn opens_after_consecutive_failures_and_denies() {
        let mut b = Breaker::default();
        let c = cfg();
        assert!(b.record(Health::Unhealthy, t(0), &c).is_none());
        assert!(b.record(Health::Unhealthy, t(1), &c).is_none());
        let tr = b.record(Health::Unhealthy, t(2), &c).unwrap();
        assert_eq!((tr.from, tr.to), (BreakerState::Closed, BreakerState::Open));
        assert_eq!(tr.reason, "3 consecutive failures");
        assert_eq!(b.admit(t(500), &c).0, Admission::Deny);
        assert_eq!(b.opened_at(), Some(t(2)), "the desk says since when the target is down");
    }

    #[test]
    fn a_success_resets_the_consecutive_count() {
        let mut b = Breaker::default();
        let c = BreakerConfig { failure_ratio: 0.0, ..cfg() };
        for i in 0..10 {
            b.record(Health::Unhealthy, t(i * 3), &c);
            b.record(Health::Unhealthy, t(i * 3 + 1), &c);
            b.record(Health::Healthy, t(i * 3 + 2), &c);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn opens_on_failure_ratio_over_the_window() {
        let mut b = Breaker::default();
        let c = BreakerConfig { consecutive_failures: 100, ..cfg() };
        let mut opened = None;
        for i in 0..10 {
            let h = if i % 2 == 0 { Health::Unhealthy } else { Health::Healthy };
            if let Some(tr) = b.record(h, t(i), &c) {
                opened = Some((i, tr));
            }
        }
        let (i, tr) = opened.expect("ratio of 0.5 over 10 opens the breaker");
        assert_eq!(i, 9);
        assert_eq!(tr.reason, "5 of the last 10 attempts failed");
    }

    #[test]
    fn a_failure_ratio_below_the_threshold_keeps_it_closed() {
        let c = BreakerConfig { consecutive_failures: 100, ..cfg() };
        for failures in 1..5 {
            let mut b = Breaker::default();
            for i in 0..20 {
                let h = if i % 10 < failures { Health::Unhealthy } else { Health::Healthy };
                assert!(b.record(h, t(i), &c).is_none(), "{failures} of 10 failed: stays closed");
            }
        }
    }

    #[test]
    fn half_open_admits_one_probe_then_closes_or_reopens() {
        let c = cfg();
        let mut b = Breaker::default();
        for i in 0..3 {
            b.record(Health::Unhealthy, t(i), &c);
        }
        // Cooldown not over yet.
        assert_eq!(b.admit(t(999), &c).0, Admission::Deny);
        let (adm, tr) = b.admit(t(1_002), &c);
        assert_eq!(adm, Admission::Probe);
        assert_eq!(tr.unwrap().to, BreakerState::HalfOpen);
        // Only one probe at a time.
        assert_eq!(b.admit(t(1_003), &c).0, Admission::Deny);
        // The probe fails: open again, and a new cooldown starts from now.
        let tr = b.record(Health::Unhealthy, t(1_010), &c).unwrap();
        assert_eq!((tr.from, tr.to), (BreakerState::HalfOpen, BreakerState::Open));
        assert_eq!(b.admit(t(2_000), &c).0, Admission::Deny);
        assert_eq!(b.admit(t(2_011), &c).0, Admission::Probe);
        let tr = b.record(Health::Healthy, t(2_020), &c).unwrap();
        assert_eq!(tr.to, BreakerState::Closed);
        assert_eq!(b.admit(t(2_021), &c).0, Admission::Allow);
    }

    #[test]
    fn neutral_results_and_unused_probes_free_the_probe_slot() {
        let c = cfg();
        let mut b = Breaker::default();
        for i in 0..3 {
            b.record(Health::Unhealthy, t(i), &c);
        }
        assert_eq!(b.admit(t(5_000), &c).0, Admission::Probe);
        b.probe_unused();
        assert_eq!(b.admit(t(5_001), &c).0, Admission::Probe);
        assert!(b.record(Health::Neutral, t(5_002), &c).is_none());
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert_eq!(b.admit(t(5_003), &c).0, Admission::Probe);
    }

    #[test]
    fn late_results_while_open_change_nothing() {
        let c = cfg();
        let mut b = Breaker::default();
        for i in 0..3 {
            b.record(Health::Unhealthy, t(i), &c);
        }
        assert!(b.record(Health::Healthy, t(10), &c).is_none());
        assert_eq!(b.state(), BreakerState::Open);
    }
}
