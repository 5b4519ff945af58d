//! Retry budgets: which waiting leads are projected to run out of their retry time (the `retry_budget` alert).
//!
//! A step's time budget (`backoff.budget_seconds`) runs from when it became due (`pending_since`). A retry —
//! after a transient failure, or a rate-limited one, whose wait is not an attempt but is time — is made only if it
//! falls at or before the budget's end (`delivery::backoff::decide_retry`); otherwise the lead is dead-lettered.
//! While its target is held (a `Retry-After`, a refused credential) or its breaker is open, a lead is not tried at
//! all and its budget keeps running; when the target opens again it is tried once more, and a lead whose budget
//! has ended is dead-lettered by that try's first failure.
//!
//! **The rule** ([`Projection::runs_out`]): a lead is projected to run out when the earliest moment it can next
//! be tried — its own `next_attempt_at`, or the end of its target's hold or open breaker if that is later — leaves
//! it less than a [`margin`] of its budget:
//!
//! - at or after the end of its budget, that try is its last: a failure dead-letters it (a hold outlasting what is
//!   left, the case the alert exists for);
//! - within the margin of the end, a lead that has failed for most of its budget cannot realistically be tried
//!   again after the next failure: the backoff's wait (up to `backoff.cap_ms`) takes it to the end.
//!
//! The margin is `monitor.retry_budget_warning_minutes`, but never more than a quarter of the budget. A window
//! longer than the budget (the default 30 min against a 15 min budget) would otherwise cover every lead from the
//! moment it became due, and the alert said "14 min of its 15 min retry budget left" one minute into a short
//! rate-limit hold. A lead with most of its budget ahead of its next try is never projected to run out.
//!
//! A person's pause has no end to project: its leads are judged as if they could go now (only the margin rule
//! applies), and the Targets page shows the pause itself.

use chrono::{DateTime, Duration, Utc};

use crate::features::delivery::breaker::BreakerState;
use crate::features::delivery::worker::{Hold, HoldReason};

/// The part of a budget before its end within which a lead's next try makes it projected to run out: the warning
/// window, at most a quarter of the budget (see the module's doc).
pub fn margin(budget: Duration, warning: Duration) -> Duration {
    warning.min(budget / 4).max(Duration::zero())
}

/// What keeps a target from sending until a known time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// The target said when to come back (or is paced near its limit): nothing is sent before then.
    RateLimited,
    /// It refused its credential: one lead probes at this time.
    Credentials,
    /// It refused the step's own setup (a first contact's template, its region): one lead probes at this time.
    Setup,
    /// Its breaker is open: one probe goes at this time, the rest after the probe succeeds.
    Breaker,
}

/// A target blocked until `until` by `by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub until: DateTime<Utc>,
    pub by: Blocker,
}

/// When a target can next send at all, if that is after `now`: the end of its hold, or the end of its open
/// breaker's cooldown, whichever is later. `None`: it may send now (a paused target included: see the module's doc).
pub fn blocked(
    hold: Option<&Hold>,
    breaker: BreakerState,
    opened_at: Option<DateTime<Utc>>,
    cooldown: Duration,
    now: DateTime<Utc>,
) -> Option<Blocked> {
    let held = hold.filter(|h| h.until > now).map(|h| Blocked {
        until: h.until,
        by: match h.reason {
            HoldReason::Credentials { .. } => Blocker::Credentials,
            HoldReason::Setup { .. } => Blocker::Setup,
            _ => Blocker::RateLimited,
        },
    });
    let open = match (breaker, opened_at) {
        (BreakerState::Open, Some(opened)) if opened + cooldown > now => {
            Some(Blocked { until: opened + cooldown, by: Blocker::Breaker })
        }
        _ => None,
    };
    match (held, open) {
        (Some(h), Some(o)) => Some(if o.until > h.until { o } else { h }),
        (h, o) => h.or(o),
    }
}

/// The rule for one target's leads at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    /// `backoff.budget_seconds`.
    pub budget: Duration,
    /// See [`margin`].
    pub margin: Duration,
    /// The earliest moment any of the target's leads can be tried: now, or the end of what blocks it.
    pub earliest: DateTime<Utc>,
}

impl Projection {
    pub fn new(budget: Duration, warning: Duration, now: DateTime<Utc>, blocked: Option<&Blocked>) -> Self {
        let earliest = blocked.map_or(now, |b| b.until.max(now));
        Self { budget, margin: margin(budget, warning), earliest }
    }

    /// Whether a lead due since `pending_since`, next tried no earlier than `next_attempt_at`, is projected to run
    /// out of its retry time: its earliest next try is at or after its budget's end less the margin.
    pub fn runs_out(&self, pending_since: DateTime<Utc>, next_attempt_at: DateTime<Utc>) -> bool {
        next_attempt_at.max(self.earliest) >= pending_since + self.budget - self.margin
    }

    /// The same rule as the store asks it (`Store::running_out_of_budget`), in two parts, either of which makes a
    /// lead run out: it became due at or before `started_by` (the target's earliest moment comes too late for
    /// it), or its own next try is at least `own_wait` after it became due.
    pub fn as_query(&self) -> (DateTime<Utc>, Duration) {
        let usable = self.budget - self.margin;
        (self.earliest - usable, usable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(minutes: i64) -> DateTime<Utc> {
        "2026-03-02T10:00:00Z".parse::<DateTime<Utc>>().unwrap() + Duration::minutes(minutes)
    }

    fn min(m: i64) -> Duration {
        Duration::minutes(m)
    }

    fn hold(until: DateTime<Utc>) -> Hold {
        Hold { until, reason: HoldReason::RateLimited }
    }

    /// The rule and its query form agree on every lead of a grid around the budget's end.
    fn agree(p: &Projection) {
        let (started_by, own_wait) = p.as_query();
        for since in -40..=40 {
            for wait in 0..=20 {
                let (since, next) = (t(since), t(since + wait));
                let query = since <= started_by || next - since >= own_wait;
                assert_eq!(p.runs_out(since, next), query, "since {since}, next {next}");
            }
        }
    }

    #[test]
    fn the_margin_is_the_warning_window_but_at_most_a_quarter_of_the_budget() {
        assert_eq!(margin(Duration::hours(6), min(30)), min(30));
        assert_eq!(margin(min(15), min(30)), Duration::seconds(225));
        assert_eq!(margin(min(60), min(0)), min(0));
    }

    #[test]
    fn a_hold_shorter_than_what_is_left_projects_nothing() {
        // The reported case: a 15 min budget, one minute into a rate-limit hold that ends in 2 min.
        let now = t(1);
        let blocked = blocked(Some(&hold(t(3))), BreakerState::Closed, None, min(1), now);
        let p = Projection::new(min(15), min(30), now, blocked.as_ref());
        assert_eq!(p.earliest, t(3));
        // Due since 10:00, tried at 10:03 at the earliest: 12 of its 15 min are left.
        assert!(!p.runs_out(t(0), t(0)));
        assert!(!p.runs_out(t(0), t(2)));
        agree(&p);
    }

    #[test]
    fn a_hold_outlasting_what_is_left_projects_the_leads_it_outlasts() {
        let now = t(1);
        let blocked = blocked(Some(&hold(t(20))), BreakerState::Closed, None, min(1), now).unwrap();
        assert_eq!(blocked, Blocked { until: t(20), by: Blocker::RateLimited });
        let p = Projection::new(min(15), min(30), now, Some(&blocked));
        // Due since 10:00: its budget ends at 10:15, the hold at 10:20.
        assert!(p.runs_out(t(0), t(0)));
        // Due since 10:04: it ends at 10:19; with less than the margin (3 min 45 s) left at 10:20, too.
        assert!(p.runs_out(t(4), t(4)));
        // Due since 10:10: 5 min of its budget are left when the hold ends.
        assert!(!p.runs_out(t(10), t(10)));
        agree(&p);
    }

    #[test]
    fn a_lead_near_the_end_of_its_budget_runs_out_without_a_hold() {
        let now = t(0);
        let p = Projection::new(Duration::hours(6), min(30), now, None);
        assert_eq!(p.margin, min(30));
        // Due 5 h 40 min ago, next tried in 1 min: 19 min left at its next try.
        assert!(p.runs_out(now - min(340), now + min(1)));
        // Due 5 h ago, next tried in 1 min: 59 min left.
        assert!(!p.runs_out(now - min(300), now + min(1)));
        // Due 5 h ago, but its own next try (after a long backoff) is 40 min away: 20 min left then.
        assert!(p.runs_out(now - min(300), now + min(40)));
        agree(&p);
    }

    #[test]
    fn a_lead_with_most_of_its_budget_left_never_runs_out() {
        // A budget shorter than the warning window: only its last quarter counts.
        let now = t(14);
        let p = Projection::new(min(15), min(30), now, None);
        for since in 3..=14 {
            assert!(!p.runs_out(t(since), now), "due since 10:{since:02}");
        }
        assert!(p.runs_out(t(2), now), "due since 10:02: 3 of its 15 min left, less than the margin");
        agree(&p);
    }

    #[test]
    fn a_try_at_the_end_of_the_budget_is_its_last() {
        let p = Projection::new(min(15), min(0), t(0), None);
        assert!(p.runs_out(t(0), t(15)));
        assert!(!p.runs_out(t(0), t(14)));
        agree(&p);
    }

    #[test]
    fn an_open_breaker_blocks_until_its_cooldown_ends() {
        let now = t(1);
        let b = blocked(None, BreakerState::Open, Some(t(0)), min(30), now).unwrap();
        assert_eq!(b, Blocked { until: t(30), by: Blocker::Breaker });
        // The later of a hold and the breaker.
        let b = blocked(Some(&hold(t(40))), BreakerState::Open, Some(t(0)), min(30), now).unwrap();
        assert_eq!(b, Blocked { until: t(40), by: Blocker::RateLimited });
        // A cooldown already over (the next admission probes), a closed or half-open breaker: not blocked.
        assert_eq!(blocked(None, BreakerState::Open, Some(t(0)), Duration::seconds(30), now), None);
        assert_eq!(blocked(None, BreakerState::HalfOpen, Some(t(0)), min(30), now), None);
        assert_eq!(blocked(None, BreakerState::Closed, None, min(30), now), None);
    }

    #[test]
    fn a_hold_in_the_past_or_for_a_credential_or_a_setup() {
        let now = t(5);
        assert_eq!(blocked(Some(&hold(t(4))), BreakerState::Closed, None, min(1), now), None);
        let refused = Hold { until: t(6), reason: HoldReason::Credentials { credential: "CRM_TOKEN".into() } };
        assert_eq!(
            blocked(Some(&refused), BreakerState::Closed, None, min(1), now),
            Some(Blocked { until: t(6), by: Blocker::Credentials })
        );
        let setup = Hold { until: t(6), reason: HoldReason::Setup { reason: "template not found".into() } };
        assert_eq!(
            blocked(Some(&setup), BreakerState::Closed, None, min(1), now),
            Some(Blocked { until: t(6), by: Blocker::Setup })
        );
    }
}
