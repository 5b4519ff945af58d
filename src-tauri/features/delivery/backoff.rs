//! Retry timing: full-jitter exponential backoff, `Retry-After`, and the decision to retry or give up.
//!
//! All functions are pure: the clock reading and the random source are passed in.

use chrono::{DateTime, Utc};
use rand::Rng;

use crate::config::BackoffConfig;
pub use crate::model::parse_retry_after;
use crate::model::{ErrorClass, Failure};

/// Full jitter: a uniformly random delay in `[0, min(cap, base · 2^attempt)]` milliseconds.
/// `attempt` counts from 0 for the first retry.
pub fn full_jitter_ms(cfg: &BackoffConfig, attempt: u32, rng: &mut impl Rng) -> u64 {
    let ceiling = exponential_ceiling_ms(cfg, attempt);
    rng.random_range(0..=ceiling)
}

/// `min(cap, base · 2^attempt)`, without overflow.
pub fn exponential_ceiling_ms(cfg: &BackoffConfig, attempt: u32) -> u64 {
    let factor = 1u64.checked_shl(attempt.min(63)).unwrap_or(u64::MAX);
    cfg.base_ms.saturating_mul(factor).min(cfg.cap_ms)
}

/// The facts about a failed job that decide its next step.
#[derive(Debug, Clone)]
pub struct RetryInput<'a> {
    pub failure: &'a Failure,
    /// Counted attempts before this one.
    pub attempts_before: u32,
    /// When this step became due: the time budget runs from here.
    pub pending_since: DateTime<Utc>,
    /// The instant the target asked us to wait for (`Retry-After`), if any.
    pub retry_after: Option<DateTime<Utc>>,
    pub now: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RetryDecision {
    /// Try again at `at`. `counts` says whether this attempt used up one of `max_attempts`.
    Retry { at: DateTime<Utc>, counts: bool },
    /// Give up: the job goes to the dead-letter queue with this explanation.
    Dead { why: String },
}

/// Decides what happens after a failed attempt. Ambiguous failures must have been resolved (looked up) by the
/// caller first; one that reaches this function is parked, never retried blindly.
pub fn decide_retry(input: &RetryInput<'_>, cfg: &BackoffConfig, rng: &mut impl Rng) -> RetryDecision {
    let class = input.failure.class;
    match class {
        ErrorClass::PermanentData | ErrorClass::PermanentConfig => {
            return RetryDecision::Dead { why: format!("{class}: not retried") };
        }
        ErrorClass::Ambiguous => {
            return RetryDecision::Dead {
                why: "ambiguous: the CRM may have the lead; it cannot be looked up, so it is not retried blindly"
                    .into(),
            };
        }
        ErrorClass::Transient | ErrorClass::RateLimited => {}
    }
    let counts = class != ErrorClass::RateLimited;
    let attempts = input.attempts_before + u32::from(counts);
    if counts && attempts >= cfg.max_attempts {
        return RetryDecision::Dead { why: format!("gave up after {attempts} attempts") };
    }
    let backoff = chrono::Duration::milliseconds(full_jitter_ms(cfg, attempts.saturating_sub(1), rng) as i64);
    let mut at = input.now + backoff;
    if let Some(after) = input.retry_after {
        // The target's instruction is a floor: never earlier than it asked.
        at = at.max(after);
        if class == ErrorClass::RateLimited {
            at = after;
        }
    }
    let deadline = input.pending_since + chrono::Duration::seconds(cfg.budget_seconds as i64);
    if at > deadline {
        return RetryDecision::Dead {
            why: format!(
                "time budget of {} exhausted: the next try would be at {} (after {attempts} attempts)",
                humanize_seconds(cfg.budget_seconds),
                at.format("%H:%M:%S UTC")
            ),
        };
    }
    RetryDecision::Retry { at, counts }
}

fn humanize_seconds(s: u64) -> String {
    if s % 3600 == 0 {
        format!("{} h", s / 3600)
    } else if s % 60 == 0 {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn cfg() -> BackoffConfig {
        BackoffConfig { base_ms: 100, cap_ms: 10_000, max_attempts: 5, budget_seconds: 3600 }
    }

    fn failure(class: ErrorClass) -> Failure {
        Failure { class, reason: "x".into(), field: None }
    }

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z").unwrap().to_utc()
    }

    #[test]
    fn ceiling_doubles_then_caps_without_overflow() {
        let c = cfg();
        assert_eq!(exponential_ceiling_ms(&c, 0), 100);
        assert_eq!(exponential_ceiling_ms(&c, 1), 200);
        assert_eq!(exponential_ceiling_ms(&c, 6), 6_400);
        assert_eq!(exponential_ceiling_ms(&c, 7), 10_000);
        assert_eq!(exponential_ceiling_ms(&c, 200), 10_000);
    }

    #[test]
    fn full_jitter_stays_in_range_and_spreads() {
        let c = cfg();
        let mut rng = StdRng::seed_from_u64(7);
        let samples: Vec<u64> = (0..2000).map(|_| full_jitter_ms(&c, 3, &mut rng)).collect();
        assert!(samples.iter().all(|&d| d <= 800));
        let low = samples.iter().filter(|&&d| d < 400).count();
        // Uniform: about half below the midpoint.
        assert!((800..1200).contains(&low), "{low}");
    }

    #[test]
    fn retry_after_both_forms() {
        let now = t0();
        assert_eq!(parse_retry_after("120", now), Some(now + chrono::Duration::seconds(120)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(now));
        let date = parse_retry_after("Mon, 30 Nov 2026 10:05:00 GMT", now).unwrap();
        assert_eq!(date, now + chrono::Duration::minutes(5));
        // A date in the past means "now", not "never".
        assert_eq!(parse_retry_after("Fri, 31 Dec 1999 23:59:59 GMT", now), Some(now));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
        assert!(parse_retry_after("99999999999999999999", now).is_none());
    }

    #[test]
    fn permanent_and_ambiguous_are_never_retried() {
        let mut rng = StdRng::seed_from_u64(1);
        for class in [ErrorClass::PermanentData, ErrorClass::PermanentConfig, ErrorClass::Ambiguous] {
            let f = failure(class);
            let d = decide_retry(
                &RetryInput { failure: &f, attempts_before: 0, pending_since: t0(), retry_after: None, now: t0() },
                &cfg(),
                &mut rng,
            );
            assert!(matches!(d, RetryDecision::Dead { .. }), "{class}");
        }
    }

    #[test]
    fn transient_retries_until_max_attempts() {
        let mut rng = StdRng::seed_from_u64(1);
        let f = failure(ErrorClass::Transient);
        for before in 0..4 {
            let d = decide_retry(
                &RetryInput { failure: &f, attempts_before: before, pending_since: t0(), retry_after: None, now: t0() },
                &cfg(),
                &mut rng,
            );
            match d {
                RetryDecision::Retry { at, counts } => {
                    assert!(counts);
                    let ceiling = exponential_ceiling_ms(&cfg(), before) as i64;
                    assert!(at >= t0() && at <= t0() + chrono::Duration::milliseconds(ceiling));
                }
                other => panic!("attempt {before}: {other:?}"),
            }
        }
        let d = decide_retry(
            &RetryInput { failure: &f, attempts_before: 4, pending_since: t0(), retry_after: None, now: t0() },
            &cfg(),
            &mut rng,
        );
        assert_eq!(d, RetryDecision::Dead { why: "gave up after 5 attempts".into() });
    }

    #[test]
    fn rate_limit_waits_exactly_as_told_and_does_not_count() {
        let mut rng = StdRng::seed_from_u64(1);
        let f = failure(ErrorClass::RateLimited);
        let after = t0() + chrono::Duration::seconds(30);
        // Even at the attempt limit, a rate limit is not a wasted attempt.
        let d = decide_retry(
            &RetryInput { failure: &f, attempts_before: 4, pending_since: t0(), retry_after: Some(after), now: t0() },
            &cfg(),
            &mut rng,
        );
        assert_eq!(d, RetryDecision::Retry { at: after, counts: false });
    }

    #[test]
    fn transient_with_retry_after_is_never_earlier() {
        let mut rng = StdRng::seed_from_u64(3);
        let f = failure(ErrorClass::Transient);
        let after = t0() + chrono::Duration::seconds(60);
        for _ in 0..100 {
            let d = decide_retry(
                &RetryInput {
                    failure: &f,
                    attempts_before: 0,
                    pending_since: t0(),
                    retry_after: Some(after),
                    now: t0(),
                },
                &cfg(),
                &mut rng,
            );
            match d {
                RetryDecision::Retry { at, .. } => assert!(at >= after),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_rate_limit_is_kept_exactly_even_when_sooner_than_the_backoff() {
        let f = failure(ErrorClass::RateLimited);
        let after = t0() + chrono::Duration::milliseconds(1);
        for seed in 0..20 {
            let mut rng = StdRng::seed_from_u64(seed);
            let input = RetryInput {
                failure: &f,
                attempts_before: 4,
                pending_since: t0(),
                retry_after: Some(after),
                now: t0(),
            };
            assert_eq!(decide_retry(&input, &cfg(), &mut rng), RetryDecision::Retry { at: after, counts: false });
        }
    }

    #[test]
    fn a_transient_failure_waits_for_its_backoff_when_the_hint_is_sooner() {
        let f = failure(ErrorClass::Transient);
        let after = t0() + chrono::Duration::milliseconds(1);
        let later = (0..20).filter(|seed| {
            let mut rng = StdRng::seed_from_u64(*seed);
            let input = RetryInput {
                failure: &f,
                attempts_before: 3,
                pending_since: t0(),
                retry_after: Some(after),
                now: t0(),
            };
            matches!(decide_retry(&input, &cfg(), &mut rng), RetryDecision::Retry { at, .. } if at > after)
        });
        assert!(later.count() > 10, "the backoff, not the sooner hint, decides");
    }

    #[test]
    fn a_retry_due_exactly_at_the_end_of_the_budget_is_still_made() {
        let mut rng = StdRng::seed_from_u64(1);
        let f = failure(ErrorClass::RateLimited);
        let end = t0() + chrono::Duration::seconds(3600);
        let input =
            RetryInput { failure: &f, attempts_before: 0, pending_since: t0(), retry_after: Some(end), now: t0() };
        assert_eq!(decide_retry(&input, &cfg(), &mut rng), RetryDecision::Retry { at: end, counts: false });
    }

    #[test]
    fn budgets_are_written_in_the_largest_whole_unit() {
        assert_eq!(humanize_seconds(3600), "1 h");
        assert_eq!(humanize_seconds(7200), "2 h");
        assert_eq!(humanize_seconds(600), "10 min");
        assert_eq!(humanize_seconds(5400), "90 min");
        assert_eq!(humanize_seconds(90), "90 s");
    }

    #[test]
    fn time_budget_dead_letters_even_with_attempts_left() {
        let mut rng = StdRng::seed_from_u64(1);
        let f = failure(ErrorClass::RateLimited);
        let now = t0() + chrono::Duration::minutes(59);
        let d = decide_retry(
            &RetryInput {
                failure: &f,
                attempts_before: 0,
                pending_since: t0(),
                retry_after: Some(now + chrono::Duration::minutes(5)),
                now,
            },
            &cfg(),
            &mut rng,
        );
        match d {
            RetryDecision::Dead { why } => assert!(why.contains("time budget of 1 h"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
