//! The circuit breaker of one target: a pure state machine, the clock passed in.
//!
//! closed → open after `consecutive_failures` failures in a row, or when the failure ratio over the last
//! `window` results reaches `failure_ratio`; open → half-open once `cooldown_ms` has passed, letting exactly one
//! probe through; the probe's success closes it, its failure opens it again for another cooldown.
//! Only failures that say "the target is unwell" count (transient, ambiguous); a 4xx about one lead's data or a
//! rate limit shows the target is up and answering. A `503` that says when to come back (`Retry-After`: a
//! maintenance window) is the target saying it is down: it opens the breaker at once, whatever the count — the
//! target is held until the time it gave anyway, and the operator reads "down", not "rate-limited".

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
    /// The target said it is down until a given time (`503` with `Retry-After`): opens the breaker at once.
    Unavailable,
    /// Says nothing about the target (a configuration error, a deferred job).
    Neutral,
}

/// A breaker's state as the team shares it (`store::TargetControl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TeamBreaker {
    pub state: BreakerState,
    pub opened_at: Option<DateTime<Utc>>,
    pub changed_at: DateTime<Utc>,
    /// Half-open for longer than a probe can take: the probing process is gone.
    pub stale: bool,
}

#[derive(Debug, Clone)]
pub struct Breaker {
    state: BreakerState,
    consecutive_failures: u32,
    recent: VecDeque<bool>,
    opened_at: Option<DateTime<Utc>>,
    probe_in_flight: bool,
    /// When this breaker last changed state, here or (adopted) in another process of the team.
    changed_at: Option<DateTime<Utc>>,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            state: BreakerState::Closed,
            consecutive_failures: 0,
            recent: VecDeque::new(),
            opened_at: None,
            probe_in_flight: false,
            changed_at: None,
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
                    self.changed_at = Some(now);
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
            Health::Unavailable => {
                return match self.state {
                    BreakerState::Open => None,
                    BreakerState::HalfOpen => {
                        self.probe_in_flight = false;
                        self.open(now, "probe answered: unavailable, come back later".into())
                    }
                    BreakerState::Closed => {
                        self.open(now, "the target said it is unavailable (503 with Retry-After)".into())
                    }
                };
            }
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
                    self.changed_at = Some(now);
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

    /// Takes the team's state of this breaker, as another process of the team moved it (team mode: several
    /// processes on one database keep one breaker per target, moved by compare-and-set in the store).
    ///
    /// A state this breaker already knows, or an older one (read before this process's own move), changes
    /// nothing, unless `force` (this process's move lost the compare-and-set: the team's state wins whatever its
    /// time). Half-open means another process carries the probe: nothing is admitted here until it closes or
    /// opens again. `stale`: that probe has been under way longer than a lease (its process died): the breaker
    /// is taken as open with its cooldown over, so the next admission probes (and takes the probe over).
    pub fn adopt(&mut self, team: TeamBreaker, now: DateTime<Utc>, cfg: &BreakerConfig, force: bool) {
        let known = !force && self.changed_at.is_some_and(|c| team.changed_at <= c);
        if team.stale && team.state == BreakerState::HalfOpen && !(self.state == BreakerState::HalfOpen && known) {
            *self = Breaker {
                state: BreakerState::Open,
                opened_at: Some(now - chrono::Duration::milliseconds(cfg.cooldown_ms as i64)),
                changed_at: Some(team.changed_at),
                ..Breaker::default()
            };
            return;
        }
        if known || (team.state == self.state && team.state == BreakerState::Closed) {
            self.changed_at = self.changed_at.max(Some(team.changed_at));
            return;
        }
        *self = Breaker {
            state: team.state,
            opened_at: match team.state {
                BreakerState::Closed => None,
                _ => team.opened_at.or(Some(team.changed_at)),
            },
            probe_in_flight: team.state == BreakerState::HalfOpen,
            changed_at: Some(team.changed_at),
            ..Breaker::default()
        };
    }

    fn open(&mut self, now: DateTime<Utc>, reason: String) -> Option<Transition> {
        let from = self.state;
        self.state = BreakerState::Open;
        self.opened_at = Some(now);
        self.consecutive_failures = 0;
        self.recent.clear();
        self.changed_at = Some(now);
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
    fn a_target_that_says_it_is_unavailable_opens_it_at_once() {
        let c = cfg();
        let mut b = Breaker::default();
        let tr = b.record(Health::Unavailable, t(0), &c).expect("one 503 with Retry-After opens it");
        assert_eq!((tr.from, tr.to), (BreakerState::Closed, BreakerState::Open));
        assert_eq!(b.admit(t(500), &c).0, Admission::Deny);
        // The probe after the cooldown is told the same: open again, for another cooldown.
        assert_eq!(b.admit(t(1_000), &c).0, Admission::Probe);
        let tr = b.record(Health::Unavailable, t(1_010), &c).expect("the probe's answer reopens it");
        assert_eq!((tr.from, tr.to), (BreakerState::HalfOpen, BreakerState::Open));
        assert_eq!(b.admit(t(1_500), &c).0, Admission::Deny);
        // Answers of requests already on their way when it opened change nothing.
        assert!(b.record(Health::Unavailable, t(1_600), &c).is_none());
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

    fn team(state: BreakerState, opened: Option<i64>, changed: i64, stale: bool) -> TeamBreaker {
        TeamBreaker { state, opened_at: opened.map(t), changed_at: t(changed), stale }
    }

    #[test]
    fn a_breaker_opened_by_another_process_is_taken_and_denies() {
        let c = cfg();
        let mut b = Breaker::default();
        b.record(Health::Unhealthy, t(0), &c);
        b.adopt(team(BreakerState::Open, Some(100), 100, false), t(150), &c, false);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.opened_at(), Some(t(100)));
        assert_eq!(b.admit(t(200), &c).0, Admission::Deny);
        // The cooldown runs from the team's opening: this process probes then, with a transition to publish.
        let (admission, transition) = b.admit(t(100 + c.cooldown_ms as i64), &c);
        assert_eq!(admission, Admission::Probe);
        assert_eq!(transition.map(|t| (t.from, t.to)), Some((BreakerState::Open, BreakerState::HalfOpen)));
    }

    #[test]
    fn another_process_probing_means_nothing_is_admitted_here() {
        let c = cfg();
        let mut b = Breaker::default();
        b.adopt(team(BreakerState::HalfOpen, Some(100), 5_100, false), t(5_200), &c, false);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert_eq!(b.admit(t(5_300), &c).0, Admission::Deny);
        assert_eq!(b.admit(t(50_000), &c).0, Admission::Deny);
        // Its probe succeeded: closed for the team, and here.
        b.adopt(team(BreakerState::Closed, None, 5_400, false), t(5_500), &c, false);
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.admit(t(5_600), &c).0, Admission::Allow);
    }

    #[test]
    fn an_older_team_state_does_not_undo_this_processes_newer_move_unless_forced() {
        let c = cfg();
        let mut b = Breaker::default();
        for i in 0..3 {
            b.record(Health::Unhealthy, t(1_000 + i), &c);
        }
        assert_eq!(b.state(), BreakerState::Open);
        // Read before this process's move was committed: still closed, as of earlier.
        b.adopt(team(BreakerState::Closed, None, 500, false), t(1_010), &c, false);
        assert_eq!(b.state(), BreakerState::Open);
        // This process's move lost: another had opened it at 990; the team's state wins.
        b.adopt(team(BreakerState::Open, Some(990), 990, false), t(1_010), &c, true);
        assert_eq!(b.opened_at(), Some(t(990)));
    }

    #[test]
    fn a_probe_whose_process_died_is_taken_over() {
        let c = cfg();
        let mut b = Breaker::default();
        b.adopt(team(BreakerState::HalfOpen, Some(100), 5_100, true), t(90_000), &c, false);
        assert_eq!(b.state(), BreakerState::Open);
        let (admission, transition) = b.admit(t(90_000), &c);
        assert_eq!(admission, Admission::Probe);
        assert!(transition.is_some());
    }

    #[test]
    fn a_closed_team_keeps_this_processes_failure_count() {
        let c = cfg();
        let mut b = Breaker::default();
        b.record(Health::Unhealthy, t(0), &c);
        b.record(Health::Unhealthy, t(1), &c);
        b.adopt(team(BreakerState::Closed, None, 0, false), t(2), &c, false);
        assert!(b.record(Health::Unhealthy, t(3), &c).is_some(), "the third failure in a row opens it");
    }
}
