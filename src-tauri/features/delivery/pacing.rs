//! Pacing: how fast one target may be sent requests. Pure: every clock reading is passed in, nothing sleeps.
//!
//! A [`Pacer`] per target combines four things:
//!
//! * a **hold** — "send nothing before X" — set from `Retry-After` on a 429/503, or from rate-limit headers that say
//!   the window or the day's budget is used up. It applies to every request of the target, whichever lead was
//!   answered, and a later, earlier hold never shortens a longer one.
//! * a **[`Limiter`]** for the effective rate: the slowest of the declared rate (configuration), the rates learned
//!   from the target's headers, and the daily-budget slowdown.
//! * what the target said about its **daily budget** ([`Pacer::daily_usage`]); past [`DAILY_SLOWDOWN_PERCENT`] the
//!   remaining budget is spread over a day instead of being spent at full speed.
//! * an **adaptive concurrency** limit (AIMD): halved by a 429, raised by one after a run of successes.
//! * a **pace learned from refusals** that name no rate and no time ("too many", a 429 without `Retry-After` or
//!   rate-limit headers, Salesforce's concurrent-request limit): AIMD on the rate itself — the first refusal sets
//!   the pace to [`REFUSAL_BETA`] of what the target accepted over the last [`ACCEPT_WINDOW_MS`], each later one
//!   lowers it by the same factor, and it rises by
//!   [`REFUSAL_STEP`] (at least one request per second) each second the target keeps accepting at that pace. A
//!   fixed hold would leave the target idle and then hit it at full speed again; the learned pace keeps it busy just
//!   under its limit.
//! * **one request first after a hold**: when a hold ends, one request tests the water ([`Pacer::admit`] lets one
//!   through and then waits for its answer); only a good answer lets the rest follow. Every hold counts
//!   ([`Pacer::holds`]), so a request claimed before a hold is never sent after it.
//!
//! # The window guarantee
//!
//! Vendors count differently: HubSpot counts requests in a rolling 10 s window, Pipedrive in a 2 s window, others
//! use token buckets whose burst size is not published. A plain token bucket of capacity `count` that starts full
//! would break a rolling window: it can send `count` at once and then `count` more as it refills within the same
//! window (380 in the first 10 s against HubSpot's 190/10 s). So the limiter enforces two rules:
//!
//! 1. **Hard cap, exact:** a log of the send times within the last window (a ring of at most `count` timestamps)
//!    refuses a request when `count` were sent in the window ending now. By construction no half-open window of the
//!    declared length ever holds more than `count` sends.
//! 2. **Smoothing:** a GCRA (a token bucket in "theoretical arrival time" form) paces sends one interval
//!    (`window / count`) apart, allowing a small burst of 5 % of `count`. Under a steady backlog it alone sets the
//!    pace, so token-bucket vendors with a small burst size are not hit by a wall of `count` requests; the log only
//!    bites at the start and after a burst.
//!
//! Both use the declared window lengthened by a 1 % guard ([`GUARD_PER_MILLE`]): requests leave at exact spacing,
//! but they arrive with network jitter, and a vendor counting a rolling window at the limit would see an extra one
//! now and then. The guard costs 1 % of throughput.
//!
//! Above [`LOG_MAX_COUNT`] (daily quotas such as `250000/1d`) the log would be too large, so the limiter falls back
//! to the GCRA alone, sized so its worst case still fits: with a burst `b` (1 % of `count`) and interval
//! `window / (count − b + 1)`, any window holds at most `(count − b + 1) + (b − 1) = count` sends.
//!
//! Memory is bounded by `count ≤ LOG_MAX_COUNT` timestamps per target.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use reqwest::header::HeaderMap;
use reqwest::StatusCode;

use crate::features::targets::PacingHints;
use crate::model::parse_retry_after;
pub use crate::model::{Rate, RateError, MAX_WINDOW};

/// The guard added to every window, in thousandths of the window (1 %). See the module documentation.
pub const GUARD_PER_MILLE: u32 = 10;
/// The largest count enforced with an exact log of send times; above it the limiter is a GCRA alone.
pub const LOG_MAX_COUNT: u32 = 100_000;
/// The burst the smoothing GCRA allows, in percent of the count (at least one request).
pub const SMOOTHING_BURST_PERCENT: u32 = 5;
/// The burst of the fallback GCRA (no log), in percent of the count. Its interval is shortened by the burst, so a
/// large burst would cost throughput: 1 % costs 1 %.
pub const FALLBACK_BURST_PERCENT: u32 = 1;
/// Once this share of a daily budget is used, the rest is spread over a day (see [`Pacer::learn`]).
pub const DAILY_SLOWDOWN_PERCENT: u64 = 90;
/// How long to hold a target whose daily budget is used up when the answer does not say when it renews. After the
/// hold one request goes through; its headers renew the hold if the budget is still used up.
pub const DAILY_RECHECK_SECONDS: i64 = 15 * 60;
/// On a refusal that names no rate, the pace drops to this share of itself (the first time: of what the target
/// accepted just before).
pub const REFUSAL_BETA: f64 = 0.9;
/// Over how long the accepted answers are counted for that, in milliseconds.
pub const ACCEPT_WINDOW_MS: i64 = 2_000;
/// Each second the target keeps accepting at the learned pace, the pace rises by this share of itself (at least
/// one request per second).
pub const REFUSAL_STEP: f64 = 0.05;
/// The slowest pace refusals can teach, in requests per second (one every five seconds).
pub const MIN_REFUSED_PACE: f64 = 0.2;
/// A learned pace is forgotten after this long without a refusal.
pub const REFUSED_PACE_MEMORY_SECONDS: i64 = 600;
/// While the one request after a hold is out, the pacer asks to be asked again this often (its answer usually
/// wakes the worker first).
const PROBE_PATIENCE_MS: i64 = 1_000;

/// The longest hold a header can impose. A longer instruction is far more likely a vendor bug or a misread date
/// than a real instruction; the target is still held for a whole day.
pub const MAX_HOLD_SECONDS: i64 = 24 * 3600;
/// A 429 that carries no timing at all holds the target for one window of the effective rate, at most this long.
pub const MAX_UNTIMED_429_HOLD_SECONDS: i64 = 60;

// ---------------------------------------------------------------------------------------------------------------
// Limiter
// ---------------------------------------------------------------------------------------------------------------

/// The spacing of requests sent at `rate` one by one, the guard included, rounded up to a whole microsecond: a
/// team of processes sharing one target's budget (`store::team`) reserves its request slots this far apart, and
/// each process's own [`Limiter`] at the same rate admits them (never closer than its own interval).
pub fn spacing(rate: Rate) -> TimeDelta {
    let declared = u64::try_from(rate.window().as_nanos()).unwrap_or(u64::MAX / 4);
    let window = declared + declared / 1000 * u64::from(GUARD_PER_MILLE);
    let nanos = window.div_ceil(u64::from(rate.count().max(1))).max(1);
    TimeDelta::microseconds(i64::try_from(nanos.div_ceil(1000)).unwrap_or(i64::MAX))
}

/// Paces requests to one [`Rate`]: an exact log of recent sends (the hard cap) plus a GCRA (the smoothing), or the
/// GCRA alone above [`LOG_MAX_COUNT`]. See the module documentation for the guarantee.
#[derive(Debug, Clone)]
pub struct Limiter {
    rate: Rate,
    /// The declared window plus the guard.
    window: TimeDelta,
    /// GCRA emission interval: the spacing of sends under a steady backlog.
    interval: TimeDelta,
    /// GCRA tolerance: `(burst − 1) · interval`.
    tolerance: TimeDelta,
    /// GCRA theoretical arrival time of the next request; `None` before the first send.
    tat: Option<DateTime<Utc>>,
    /// Send times within the last `window`, oldest first, at most `rate.count` of them. `None` above
    /// [`LOG_MAX_COUNT`].
    log: Option<VecDeque<DateTime<Utc>>>,
}

impl Limiter {
    pub fn new(rate: Rate) -> Limiter {
        let mut limiter = Limiter {
            rate,
            window: TimeDelta::zero(),
            interval: TimeDelta::zero(),
            tolerance: TimeDelta::zero(),
            tat: None,
            log: None,
        };
        limiter.set_rate(rate);
        limiter
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Switches to another rate, keeping what was sent: the GCRA's schedule carries over (no fresh burst), and the
    /// log keeps its newest entries. When the log is first created by the switch (from above [`LOG_MAX_COUNT`]),
    /// earlier sends are unknown to it; the carried-over schedule still prevents a burst.
    pub fn set_rate(&mut self, rate: Rate) {
        self.rate = rate;
        let count = u64::from(rate.count());
        // MAX_WINDOW (31 days) in nanoseconds, plus the guard, fits in an i64 many times over.
        let declared = u64::try_from(rate.window().as_nanos()).unwrap_or(u64::MAX / 4);
        let window = declared + declared / 1000 * u64::from(GUARD_PER_MILLE);
        let use_log = rate.count() <= LOG_MAX_COUNT;
        let percent = if use_log { SMOOTHING_BURST_PERCENT } else { FALLBACK_BURST_PERCENT };
        let burst = (count * u64::from(percent)).div_ceil(100).clamp(1, count);
        // With the log as the hard cap, smoothing paces at exactly the rate; without it, the interval leaves room
        // for the burst so that the GCRA alone keeps any window within `count`. Rounding up never paces faster.
        let slots = if use_log { count } else { count - burst + 1 };
        let interval = window.div_ceil(slots).max(1);
        let nanos = |n: u64| TimeDelta::nanoseconds(i64::try_from(n).unwrap_or(i64::MAX));
        self.window = nanos(window);
        self.interval = nanos(interval);
        self.tolerance = nanos(interval * (burst - 1));
        if use_log {
            let log = self.log.get_or_insert_with(VecDeque::new);
            while log.len() > rate.count() as usize {
                log.pop_front();
            }
        } else {
            self.log = None;
        }
    }

    /// Takes a slot for a request sent at `now`, or says when the next one frees up (always after `now`).
    /// `now` should not go backwards between calls; if it does, the log treats it as the latest time seen.
    pub fn try_acquire(&mut self, now: DateTime<Utc>) -> Result<(), DateTime<Utc>> {
        let now = match self.log.as_ref().and_then(|log| log.back()) {
            Some(&latest) => now.max(latest),
            None => now,
        };
        let tat = self.tat.map_or(now, |tat| tat.max(now));
        let mut wait: Option<DateTime<Utc>> = None;
        let smooth_at = tat - self.tolerance;
        if now < smooth_at {
            wait = Some(smooth_at);
        }
        if let Some(log) = self.log.as_mut() {
            // The window ending now is (now − window, now]: a send at exactly now − window has left it.
            let cutoff = now - self.window;
            while log.front().is_some_and(|&t| t <= cutoff) {
                log.pop_front();
            }
            if log.len() >= self.rate.count() as usize {
                if let Some(&oldest) = log.front() {
                    let frees_at = oldest + self.window;
                    wait = Some(wait.map_or(frees_at, |w| w.max(frees_at)));
                }
            }
        }
        if let Some(at) = wait {
            return Err(at);
        }
        self.tat = Some(tat + self.interval);
        if let Some(log) = self.log.as_mut() {
            log.push_back(now);
        }
        Ok(())
    }

    /// How many send times the log holds (0 without a log).
    pub fn logged(&self) -> usize {
        self.log.as_ref().map_or(0, VecDeque::len)
    }

    /// Whether the exact log is in use (count ≤ [`LOG_MAX_COUNT`]).
    pub fn has_log(&self) -> bool {
        self.log.is_some()
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Pacer
// ---------------------------------------------------------------------------------------------------------------

/// The answer of [`Pacer::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Send now; the slot is taken.
    Go,
    /// Send nothing to this target before this instant.
    WaitUntil(DateTime<Utc>),
}

/// What an answer said about the target's capacity, for [`Pacer::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The target accepted the request (any 2xx).
    Success,
    /// 429 Too Many Requests, with the instant `Retry-After` named, if any. Without one (and without rate-limit
    /// headers that held the target), it is a refusal that names no rate: [`Outcome::TooMany`].
    RateLimited { retry_after: Option<DateTime<Utc>> },
    /// The target refused for load without saying how many requests it takes or for how long (Salesforce's
    /// `REQUEST_LIMIT_EXCEEDED` for concurrent requests): the pace is lowered and learned again.
    TooMany,
    /// Anything else: says nothing about capacity (a 4xx about one lead, a 5xx, a network error).
    Other,
}

impl Outcome {
    /// The outcome an HTTP status stands for (the retry-after instant is left to [`Pacer::learn`]).
    pub fn from_status(status: StatusCode) -> Outcome {
        if status.is_success() {
            Outcome::Success
        } else if status == StatusCode::TOO_MANY_REQUESTS {
            Outcome::RateLimited { retry_after: None }
        } else {
            Outcome::Other
        }
    }
}

/// The pacing state of one target. See the module documentation.
#[derive(Debug, Clone)]
pub struct Pacer {
    declared: Option<Rate>,
    /// From HubSpot's `X-HubSpot-RateLimit-Max` over `-Interval-Milliseconds`.
    learned_hubspot: Option<Rate>,
    /// From `x-ratelimit-limit` over the inferred window (see [`Pacer::learn`]).
    learned_generic: Option<Rate>,
    /// The longest `x-ratelimit-reset` seen, in seconds: a lower bound of that vendor's window length.
    longest_reset_seconds: u64,
    /// The remaining daily budget spread over a day, once past [`DAILY_SLOWDOWN_PERCENT`].
    daily_cap: Option<Rate>,
    daily: Option<(u64, u64)>,
    limiter: Option<Limiter>,
    hold_until: Option<DateTime<Utc>>,
    max_concurrency: u32,
    concurrency: u32,
    /// Successes since the limit last changed.
    success_run: u32,
    /// Answers still expected for requests sent under the limit before the last halving; their 429s were caused
    /// by the old limit and do not halve again.
    unsettled: u32,
    /// The pace refusals that named no rate taught (requests per second), while it is remembered.
    refused_pace: Option<f64>,
    /// Whether the pace is still being found fast (after the first refusal, before the second).
    pace_found: bool,
    /// When the pace was last lowered, raised, and when the target last refused.
    last_decrease: Option<DateTime<Utc>>,
    last_increase: Option<DateTime<Utc>>,
    last_refusal: Option<DateTime<Utc>>,
    /// Answers accepted and requests admitted recently (what the target takes, and whether a pace is used).
    accepted: RecentCount,
    admitted: RecentCount,
    /// How many holds were imposed so far (see [`Pacer::holds`]).
    holds: u64,
    probe: Probe,
}

/// The request after a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// No hold since the last good answer: requests go as paced.
    Clear,
    /// A hold was imposed: when it ends, one request goes first.
    Due,
    /// That request is out: nothing else goes until it is answered.
    Out,
}

/// Events counted over the last [`ACCEPT_WINDOW_MS`], in buckets of a tenth of it.
#[derive(Debug, Clone, Default)]
struct RecentCount {
    /// (bucket start in ms since the epoch, count), oldest first.
    buckets: VecDeque<(i64, u32)>,
}

impl RecentCount {
    const BUCKET_MS: i64 = ACCEPT_WINDOW_MS / 10;

    fn add(&mut self, now: DateTime<Utc>) {
        let bucket = now.timestamp_millis().div_euclid(Self::BUCKET_MS) * Self::BUCKET_MS;
        match self.buckets.back_mut() {
            Some((start, n)) if *start == bucket => *n += 1,
            _ => self.buckets.push_back((bucket, 1)),
        }
        self.trim(now);
    }

    fn trim(&mut self, now: DateTime<Utc>) {
        let oldest = now.timestamp_millis() - ACCEPT_WINDOW_MS;
        while self.buckets.front().is_some_and(|(start, _)| *start + Self::BUCKET_MS <= oldest) {
            self.buckets.pop_front();
        }
    }

    /// Events per second over the window ending at `now` (over the time since the first event, when shorter, but
    /// at least one bucket), and the time that covers.
    fn rate_over(&mut self, now: DateTime<Utc>) -> (f64, TimeDelta) {
        self.trim(now);
        let Some((first, _)) = self.buckets.front() else { return (0.0, TimeDelta::zero()) };
        let span = (now.timestamp_millis() - first).clamp(Self::BUCKET_MS, ACCEPT_WINDOW_MS);
        let n: u32 = self.buckets.iter().map(|(_, n)| n).sum();
        (f64::from(n) * 1000.0 / span as f64, TimeDelta::milliseconds(span))
    }

    /// Events in the second before `now`.
    fn last_second(&mut self, now: DateTime<Utc>) -> f64 {
        self.trim(now);
        let since = now.timestamp_millis() - 1000;
        f64::from(self.buckets.iter().filter(|(start, _)| *start >= since).map(|(_, n)| n).sum::<u32>())
    }
}

/// A pace in requests per second as a [`Rate`] the limiter enforces (whole requests per second above ten, per
/// ten seconds below).
fn rate_of_pace(pace: f64) -> Rate {
    let pace = pace.max(MIN_REFUSED_PACE);
    let made = if pace >= 10.0 {
        Rate::new(pace.round() as u32, Duration::from_secs(1))
    } else {
        Rate::new((pace * 10.0).round().max(1.0) as u32, Duration::from_secs(10))
    };
    made.expect("a positive count per a short window")
}

impl Pacer {
    /// A pacer for a target declared to allow `declared` (none: pace only on what the target says) with at most
    /// `max_concurrency` requests in flight (at least 1).
    pub fn new(declared: Option<Rate>, max_concurrency: u32) -> Pacer {
        let max_concurrency = max_concurrency.max(1);
        Pacer {
            declared,
            learned_hubspot: None,
            learned_generic: None,
            longest_reset_seconds: 0,
            daily_cap: None,
            daily: None,
            limiter: declared.map(Limiter::new),
            hold_until: None,
            max_concurrency,
            concurrency: max_concurrency,
            success_run: 0,
            unsettled: 0,
            refused_pace: None,
            pace_found: false,
            last_decrease: None,
            last_increase: None,
            last_refusal: None,
            accepted: RecentCount::default(),
            admitted: RecentCount::default(),
            holds: 0,
            probe: Probe::Clear,
        }
    }

    /// May a request go to the target at `now`? `Go` takes the slot; the caller must then send.
    /// A hold answers before the rate limiter is asked, so a held target uses up no slots.
    ///
    /// After a hold, one request is let through and nothing else until it is answered ([`Pacer::record`]) or
    /// given back unsent ([`Pacer::probe_unused`]).
    pub fn admit(&mut self, now: DateTime<Utc>) -> Admit {
        if let Some(until) = self.hold_until {
            if now < until {
                return Admit::WaitUntil(until);
            }
        }
        if self.probe == Probe::Out {
            return Admit::WaitUntil(now + TimeDelta::milliseconds(PROBE_PATIENCE_MS));
        }
        match self.try_acquire(now) {
            Ok(()) => {
                if self.probe == Probe::Due {
                    self.probe = Probe::Out;
                }
                self.admitted.add(now);
                Admit::Go
            }
            Err(at) => Admit::WaitUntil(at),
        }
    }

    /// The request let through after a hold was not sent after all (its lead went back to the queue): the next
    /// one tests the water instead.
    pub fn probe_unused(&mut self) {
        if self.probe == Probe::Out {
            self.probe = Probe::Due;
        }
    }

    /// How many holds this pacer has imposed (every new or longer hold counts one): a request is sent only if no
    /// hold came since it was claimed.
    pub fn holds(&self) -> u64 {
        self.holds
    }

    /// Ends the hold in force at once (a refused credential was replaced); one request still goes first.
    pub fn release_hold(&mut self) {
        self.hold_until = None;
    }

    /// The rate limiter alone (no hold): takes a slot, or says when the next one frees up.
    pub fn try_acquire(&mut self, now: DateTime<Utc>) -> Result<(), DateTime<Utc>> {
        match self.limiter.as_mut() {
            Some(limiter) => limiter.try_acquire(now),
            None => Ok(()),
        }
    }

    /// Holds the target until `until` (capped at [`MAX_HOLD_SECONDS`] from `now`). Never shortens a hold in force.
    pub fn hold(&mut self, now: DateTime<Utc>, until: DateTime<Utc>) {
        let until = until.min(now + TimeDelta::seconds(MAX_HOLD_SECONDS));
        if until > now && self.hold_until.is_none_or(|current| until > current) {
            self.hold_until = Some(until);
            self.holds += 1;
            self.probe = Probe::Due;
        }
    }

    /// The hold, if one is still in force at `now`.
    pub fn held_until(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.hold_until.filter(|&until| until > now)
    }

    /// The rate requests are paced to now: the slowest of the declared, the learned and the daily-budget rates.
    pub fn effective_rate(&self) -> Option<Rate> {
        [self.declared, self.learned_hubspot, self.learned_generic, self.daily_cap, self.refused_pace.map(rate_of_pace)]
            .into_iter()
            .flatten()
            .reduce(Rate::slowest)
    }

    /// The daily budget as the target last reported it: `(used, limit)`. `used` may exceed `limit` (Salesforce
    /// allows short overruns).
    pub fn daily_usage(&self) -> Option<(u64, u64)> {
        self.daily
    }

    /// How many requests may be in flight now (AIMD; between 1 and the configured maximum).
    pub fn concurrency(&self) -> u32 {
        self.concurrency
    }

    /// One HTTP answer: learns from its headers, then records its outcome.
    pub fn observe(&mut self, now: DateTime<Utc>, status: StatusCode, headers: &HeaderMap) {
        self.learn(now, status, headers, &PacingHints::default());
        self.record(now, Outcome::from_status(status));
    }

    /// The pace learned from refusals that named no rate, in requests per second, if one is in force.
    pub fn refused_pace(&self) -> Option<f64> {
        self.refused_pace
    }

    /// Records an answer's outcome: the concurrency limit, the pace learned from refusals, and the request after a
    /// hold.
    ///
    /// AIMD on concurrency: a 429 halves the limit (at least 1), except a 429 answering a request sent before the
    /// last halving (the next `old limit − 1` answers): one overload is one halving, not one per request in flight.
    /// A run of successes as long as the current limit raises it by one, up to the maximum. Other answers change
    /// nothing.
    ///
    /// A 429 holds the target until its `retry_after`. A refusal that names no time and no rate (which leaves the
    /// connections alone) (a 429 without
    /// `Retry-After` whose headers set no hold either, or [`Outcome::TooMany`]) lowers the pace instead (see the
    /// module documentation) and holds the target for one request's spacing at the new pace, so that the requests
    /// already claimed go back and one request tests the new pace first.
    pub fn record(&mut self, now: DateTime<Utc>, outcome: Outcome) {
        let settled = self.unsettled == 0;
        self.unsettled = self.unsettled.saturating_sub(1);
        let outcome = match outcome {
            Outcome::RateLimited { retry_after: None } if self.held_until(now).is_none() => Outcome::TooMany,
            other => other,
        };
        match outcome {
            Outcome::Success => {
                if self.probe == Probe::Out {
                    self.probe = Probe::Clear;
                }
                self.accepted.add(now);
                self.raise_pace(now);
                if settled {
                    self.success_run += 1;
                    if self.success_run >= self.concurrency && self.concurrency < self.max_concurrency {
                        self.concurrency += 1;
                        self.success_run = 0;
                    }
                }
            }
            Outcome::RateLimited { .. } | Outcome::TooMany => {
                self.last_refusal = Some(now);
                match retry_after_of(outcome) {
                    Some(at) => self.hold(now, at),
                    None if outcome == Outcome::TooMany || self.held_until(now).is_none() => self.lower_pace(now),
                    None => {}
                }
                // A refusal that named no rate is answered by the pace alone: halving the connections as well
                // would cap the target far below what it takes once the pace is right.
                if settled && outcome != Outcome::TooMany {
                    let old = self.concurrency;
                    self.concurrency = (old / 2).max(1);
                    self.success_run = 0;
                    self.unsettled = old - 1;
                }
            }
            Outcome::Other => {
                if self.probe == Probe::Out {
                    self.probe = Probe::Clear;
                }
            }
        }
    }

    /// A refusal that named no rate: the pace drops to [`REFUSAL_BETA`] of itself — the first time, of what the
    /// target accepted recently — at most once a second (the answers to requests already in flight say nothing new).
    fn lower_pace(&mut self, now: DateTime<Utc>) {
        if self.last_decrease.is_some_and(|at| now - at < TimeDelta::seconds(1)) {
            return;
        }
        // What the target took over the last window; over less than a second it says little (a first refusal a
        // few milliseconds into a burst).
        let (accepted, measured) = self.accepted.rate_over(now);
        let lowered = match self.refused_pace {
            Some(pace) if measured >= TimeDelta::seconds(1) => REFUSAL_BETA * pace.min(accepted),
            Some(pace) => REFUSAL_BETA * pace,
            None => REFUSAL_BETA * accepted,
        };
        // The first refusal starts a fast search upwards from a rough estimate; the second ends it.
        self.pace_found = self.refused_pace.is_some();
        let pace = lowered.max(MIN_REFUSED_PACE);
        self.refused_pace = Some(pace);
        self.last_decrease = Some(now);
        self.last_increase = Some(now);
        self.refresh_limiter();
        let spacing = TimeDelta::microseconds((1e6 / pace) as i64);
        self.hold(now, now + spacing);
    }

    /// Each second the target keeps accepting at the learned pace (the pace was used: at least half of it was
    /// admitted over the last second), the pace rises: by half of itself while it is still being found (after the
    /// first refusal, whose estimate is rough), then by [`REFUSAL_STEP`] of itself, at least one request per
    /// second. After [`REFUSED_PACE_MEMORY_SECONDS`] without a refusal it is forgotten.
    fn raise_pace(&mut self, now: DateTime<Utc>) {
        let Some(pace) = self.refused_pace else { return };
        if self.last_refusal.is_some_and(|at| now - at > TimeDelta::seconds(REFUSED_PACE_MEMORY_SECONDS)) {
            self.refused_pace = None;
            self.pace_found = false;
            self.refresh_limiter();
            return;
        }
        if self.last_increase.is_some_and(|at| now - at < TimeDelta::seconds(1)) {
            return;
        }
        self.last_increase = Some(now);
        if self.admitted.last_second(now) < 0.5 * pace {
            // Not enough demand to tell whether more would be taken.
            return;
        }
        let step = if self.pace_found { (pace * REFUSAL_STEP).max(1.0) } else { (pace * 0.5).max(1.0) };
        self.refused_pace = Some(pace + step);
        self.refresh_limiter();
    }

    /// Learns from an answer's headers (any status). Unreadable values are ignored.
    ///
    /// * HubSpot ("Usage details" rate-limit headers): `X-HubSpot-RateLimit-Max` requests per
    ///   `X-HubSpot-RateLimit-Interval-Milliseconds` becomes a learned rate; `-Remaining: 0` holds for one interval
    ///   (a rolling window: the header does not say when a slot frees, one interval is the latest it can be).
    ///   `-Daily` and `-Daily-Remaining` give the daily usage; a used-up day holds for
    ///   [`DAILY_RECHECK_SECONDS`] (HubSpot resets at midnight in the account's time zone, which we don't know).
    /// * Pipedrive and the generic form: `x-ratelimit-limit` requests per window, where the window is the declared
    ///   one or the longest `x-ratelimit-reset` seen, whichever is longer (Pipedrive's window is 2 s and its
    ///   headers don't name it; a declared `100/s` must not turn its `40` into 40/s). `x-ratelimit-remaining: 0`
    ///   holds until `x-ratelimit-reset` (seconds; a value above 10⁹ is read as a Unix time).
    ///   `x-daily-requests-left: 0` holds until the next midnight UTC, when Pipedrive's day renews.
    /// * Salesforce `Sforce-Limit-Info: api-usage=used/limit` gives the daily usage (a rolling 24 h count);
    ///   at or past the limit the target is held for [`PacingHints::used_up_recheck`], else [`DAILY_RECHECK_SECONDS`].
    /// * `Retry-After` (seconds or HTTP date) on a 429 or 503 holds the target until then.
    ///
    /// Daily slowdown: once `used ≥ 90 %` of the limit, the remaining budget is paced as `remaining/1d`, so the
    /// day's last requests are spread out instead of spent at once — the closer to the limit, the slower.
    /// A learned rate only ever slows the pace: the declared rate stays a ceiling.
    ///
    /// `hints` is what the vendor asks beyond its headers: past [`NearLimit::above`] of a daily allowance, one
    /// request per [`NearLimit::interval`] instead of the rest spread over a day (Salesforce).
    pub fn learn(&mut self, now: DateTime<Utc>, status: StatusCode, headers: &HeaderMap, hints: &PacingHints) {
        // HubSpot.
        let hs_max = header_u64(headers, "x-hubspot-ratelimit-max");
        let hs_interval = header_u64(headers, "x-hubspot-ratelimit-interval-milliseconds");
        if let (Some(max), Some(interval)) = (hs_max, hs_interval) {
            let rate = u32::try_from(max).ok().and_then(|max| Rate::new(max, Duration::from_millis(interval)));
            if rate.is_some() {
                self.learned_hubspot = rate;
            }
        }
        if header_u64(headers, "x-hubspot-ratelimit-remaining") == Some(0) {
            let interval = hs_interval.filter(|&ms| ms > 0).unwrap_or(1_000);
            self.hold(now, add_millis(now, interval));
        }
        let hs_daily = header_u64(headers, "x-hubspot-ratelimit-daily");
        let hs_daily_remaining = header_u64(headers, "x-hubspot-ratelimit-daily-remaining");
        if let (Some(limit), Some(remaining)) = (hs_daily, hs_daily_remaining) {
            self.set_daily(now, limit.saturating_sub(remaining), limit, hints);
        }
        if hs_daily_remaining == Some(0) {
            self.hold(now, now + TimeDelta::seconds(DAILY_RECHECK_SECONDS));
        }

        // Pipedrive and the generic x-ratelimit-* form.
        let reset_at = header_u64(headers, "x-ratelimit-reset").map(|reset| {
            if reset > 1_000_000_000 {
                i64::try_from(reset).ok().and_then(|s| DateTime::from_timestamp(s, 0)).map_or(now, |at| at.max(now))
            } else {
                self.longest_reset_seconds = self.longest_reset_seconds.max(reset.min(86_400));
                add_millis(now, reset.saturating_mul(1000))
            }
        });
        if let Some(limit) = header_u64(headers, "x-ratelimit-limit").and_then(|l| u32::try_from(l).ok()) {
            let declared = self.declared.map_or(Duration::from_secs(1), |r| r.window());
            let window = declared.max(Duration::from_secs(self.longest_reset_seconds));
            if let Some(rate) = Rate::new(limit, window) {
                self.learned_generic = Some(rate);
            }
        }
        if header_u64(headers, "x-ratelimit-remaining") == Some(0) {
            let window = self.learned_generic.map_or(TimeDelta::seconds(1), |r| {
                TimeDelta::from_std(r.window()).unwrap_or(TimeDelta::seconds(MAX_HOLD_SECONDS))
            });
            // "0 seconds to reset" with nothing remaining still means "not this instant": wait for one window.
            let until = reset_at.filter(|&at| at > now).unwrap_or(now + window);
            self.hold(now, until);
        }
        if header_u64(headers, "x-daily-requests-left") == Some(0) {
            self.hold(now, next_utc_midnight(now));
        }

        // Salesforce.
        if let Some((used, limit)) =
            headers.get("sforce-limit-info").and_then(|v| v.to_str().ok()).and_then(salesforce_usage)
        {
            self.set_daily(now, used, limit, hints);
        }

        // Retry-After.
        if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
            if let Some(at) =
                headers.get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| parse_retry_after(v, now))
            {
                self.hold(now, at);
            }
        }

        self.refresh_limiter();
    }

    /// Records the daily usage, sets or clears the slowdown, and holds a used-up target.
    fn set_daily(&mut self, now: DateTime<Utc>, used: u64, limit: u64, hints: &PacingHints) {
        if limit == 0 {
            return;
        }
        self.daily = Some((used, limit));
        let remaining = limit.saturating_sub(used);
        let near = hints.near_limit.filter(|n| used as f64 / limit as f64 > n.above);
        if remaining == 0 {
            self.daily_cap = None;
            let recheck = hints
                .used_up_recheck
                .and_then(|d| TimeDelta::from_std(d).ok())
                .unwrap_or(TimeDelta::seconds(DAILY_RECHECK_SECONDS));
            self.hold(now, now + recheck);
        } else if let Some(near) = near {
            self.daily_cap = Rate::new(1, near.interval);
        } else if hints.near_limit.is_some() {
            self.daily_cap = None;
        } else if u128::from(used) * 100 >= u128::from(limit) * u128::from(DAILY_SLOWDOWN_PERCENT) {
            let count = u32::try_from(remaining).unwrap_or(u32::MAX);
            self.daily_cap = Rate::new(count, Duration::from_secs(86_400));
        } else {
            self.daily_cap = None;
        }
    }

    /// Keeps the limiter on the effective rate, preserving its state across a change.
    fn refresh_limiter(&mut self) {
        match (self.effective_rate(), self.limiter.as_mut()) {
            (None, _) => self.limiter = None,
            (Some(rate), Some(limiter)) => {
                if limiter.rate() != rate {
                    limiter.set_rate(rate);
                }
            }
            (Some(rate), None) => self.limiter = Some(Limiter::new(rate)),
        }
    }
}

/// The instant a rate-limited outcome names.
fn retry_after_of(outcome: Outcome) -> Option<DateTime<Utc>> {
    match outcome {
        Outcome::RateLimited { retry_after } => retry_after,
        _ => None,
    }
}

/// A header's value as a non-negative integer, if it is one.
fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// `now` plus `ms` milliseconds, capped at [`MAX_HOLD_SECONDS`] (so it cannot overflow).
fn add_millis(now: DateTime<Utc>, ms: u64) -> DateTime<Utc> {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX).min(MAX_HOLD_SECONDS * 1000);
    now + TimeDelta::milliseconds(ms)
}

/// The first instant of the next UTC day.
fn next_utc_midnight(now: DateTime<Utc>) -> DateTime<Utc> {
    let today = now.date_naive();
    today.succ_opt().and_then(|d| d.and_hms_opt(0, 0, 0)).map_or(now + TimeDelta::days(1), |dt| dt.and_utc())
}

/// `(used, limit)` from a `Sforce-Limit-Info` value such as `api-usage=25/5000; per-app-api-usage=17/250(...)`.
fn salesforce_usage(value: &str) -> Option<(u64, u64)> {
    value.split([';', ',']).find_map(|part| {
        let (key, usage) = part.trim().split_once('=')?;
        if key.trim() != "api-usage" {
            return None;
        }
        let (used, limit) = usage.trim().split_once('/')?;
        Some((used.trim().parse().ok()?, limit.trim().parse().ok()?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use reqwest::header::{HeaderName, HeaderValue};

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z").unwrap().to_utc()
    }

    fn ms(n: i64) -> TimeDelta {
        TimeDelta::milliseconds(n)
    }

    fn rate(text: &str) -> Rate {
        text.parse().unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    // --- Rate ---------------------------------------------------------------------------------------------------

    #[test]
    fn a_teams_spacing_is_admitted_by_each_processes_limiter() {
        for text in ["50/s", "190/10s", "7/1s", "3/1m", "100000/1d"] {
            let rate: Rate = text.parse().unwrap();
            let gap = spacing(rate);
            let mut limiter = Limiter::new(rate);
            // A process sending every third slot of the team's schedule, and one sending every slot: both go.
            for step in [1, 3] {
                let mut at = t0();
                for _ in 0..50 {
                    assert_eq!(limiter.try_acquire(at), Ok(()), "{text}: a slot of the team's schedule refused");
                    at += gap * step;
                }
                limiter = Limiter::new(rate);
            }
            // And the team's schedule keeps every window within the rate.
            let per_window = (rate.window().as_nanos() / (gap.num_nanoseconds().unwrap() as u128)) + 1;
            assert!(per_window <= u128::from(rate.count()), "{text}: {per_window} slots in one window");
        }
    }

    // --- Limiter ------------------------------------------------------------------------------------------------

    /// Sends as fast as the limiter allows from `t0` for `duration`, jumping to each wait-until. Returns send times.
    fn hammer(limiter: &mut Limiter, duration: TimeDelta) -> Vec<DateTime<Utc>> {
        let mut now = t0();
        let mut sent = Vec::new();
        while now < t0() + duration {
            match limiter.try_acquire(now) {
                Ok(()) => sent.push(now),
                Err(at) => {
                    assert!(at > now, "a wait must lie in the future");
                    now = at;
                }
            }
        }
        sent
    }

    /// The most sends found in any half-open window `[s, s + window)`.
    fn busiest_window(sent: &[DateTime<Utc>], window: Duration) -> usize {
        let window = TimeDelta::from_std(window).unwrap();
        let mut start = 0;
        let mut most = 0;
        for end in 0..sent.len() {
            while sent[end] - sent[start] >= window {
                start += 1;
            }
            most = most.max(end - start + 1);
        }
        most
    }

    #[test]
    fn no_window_ever_exceeds_the_count_and_throughput_stays_near_the_rate() {
        for text in ["190/10s", "100/s", "5/1m", "3/s", "1/s", "40/2s", "1000/1h"] {
            let r = rate(text);
            let mut limiter = Limiter::new(r);
            let span = TimeDelta::from_std(r.window()).unwrap() * 20;
            let sent = hammer(&mut limiter, span);
            assert!(busiest_window(&sent, r.window()) <= r.count() as usize, "{text}");
            // The window guard included, nothing is lost beyond it: ≥ 98 % of count per window over 20 windows.
            let allowed = 20.0 * f64::from(r.count());
            assert!(sent.len() as f64 >= 0.98 * allowed, "{text}: {} of {allowed}", sent.len());
            assert!(limiter.logged() <= r.count() as usize);
        }
    }

    #[test]
    fn a_hubspot_window_gets_190_not_380_in_the_first_ten_seconds() {
        let mut limiter = Limiter::new(rate("190/10s"));
        let sent = hammer(&mut limiter, TimeDelta::seconds(10));
        assert!(sent.len() <= 190, "{}", sent.len());
        // The start is smoothed: a burst of 5 % (10 requests), then one every 10.1 s / 190.
        let at_once = sent.iter().filter(|&&t| t == t0()).count();
        assert_eq!(at_once, 10);
    }

    #[test]
    fn random_arrivals_never_exceed_the_window() {
        let mut rng = StdRng::seed_from_u64(11);
        for text in ["190/10s", "50/s", "5/1m"] {
            let r = rate(text);
            let mut limiter = Limiter::new(r);
            let mut now = t0();
            let mut sent = Vec::new();
            for _ in 0..20_000 {
                // Bursts and lulls: mostly tight spacing, sometimes a long pause.
                let gap = if rng.random_bool(0.02) { rng.random_range(0..20_000) } else { rng.random_range(0..40) };
                now += ms(gap);
                if limiter.try_acquire(now).is_ok() {
                    sent.push(now);
                }
            }
            assert!(busiest_window(&sent, r.window()) <= r.count() as usize, "{text}");
        }
    }

    #[test]
    fn above_the_log_size_a_bucket_alone_keeps_the_window() {
        let r = rate("250000/1d");
        let mut limiter = Limiter::new(r);
        assert!(!limiter.has_log());
        let sent = hammer(&mut limiter, TimeDelta::days(3));
        assert_eq!(limiter.logged(), 0);
        assert!(busiest_window(&sent, r.window()) <= 250_000);
        assert!(sent.len() as f64 >= 0.97 * 750_000.0, "{}", sent.len());
        assert!(Limiter::new(rate("100000/1d")).has_log());
    }

    #[test]
    fn a_rate_change_keeps_the_schedule_and_trims_the_log() {
        let mut limiter = Limiter::new(rate("100/s"));
        let sent = hammer(&mut limiter, TimeDelta::seconds(1));
        assert!(limiter.logged() > 50);
        let now = *sent.last().unwrap();
        limiter.set_rate(rate("10/s"));
        assert_eq!(limiter.logged(), 10);
        // No fresh burst after the switch: the log is full for the new count.
        assert!(limiter.try_acquire(now).is_err());
    }

    // --- Hold ---------------------------------------------------------------------------------------------------

    #[test]
    fn an_http_date_retry_after_holds_every_request_until_the_date() {
        let mut pacer = Pacer::new(Some(rate("100/s")), 8);
        let now = t0();
        let h = headers(&[("retry-after", "Mon, 30 Nov 2026 10:05:00 GMT")]);
        pacer.observe(now, StatusCode::TOO_MANY_REQUESTS, &h);
        let until = t0() + TimeDelta::minutes(5);
        assert_eq!(pacer.held_until(now), Some(until));
        // Every request of the target waits, whichever lead it carries, at any instant before the date.
        let mut at = now;
        while at < until {
            assert_eq!(pacer.admit(at), Admit::WaitUntil(until));
            at += ms(997);
        }
        assert_eq!(pacer.admit(until), Admit::Go);
    }

    #[test]
    fn an_earlier_hold_never_shortens_a_longer_one() {
        let mut pacer = Pacer::new(None, 4);
        let now = t0();
        pacer.observe(now, StatusCode::SERVICE_UNAVAILABLE, &headers(&[("retry-after", "120")]));
        pacer.observe(now + ms(10), StatusCode::TOO_MANY_REQUESTS, &headers(&[("retry-after", "5")]));
        pacer.record(now + ms(20), Outcome::RateLimited { retry_after: Some(now + TimeDelta::seconds(1)) });
        assert_eq!(pacer.admit(now + TimeDelta::seconds(60)), Admit::WaitUntil(now + TimeDelta::seconds(120)));
        // A longer one extends it.
        pacer.hold(now, now + TimeDelta::seconds(300));
        assert_eq!(pacer.held_until(now), Some(now + TimeDelta::seconds(300)));
        // A hold cannot exceed a day.
        pacer.hold(now, now + TimeDelta::days(400));
        assert_eq!(pacer.held_until(now), Some(now + TimeDelta::seconds(MAX_HOLD_SECONDS)));
    }

    #[test]
    fn retry_after_only_counts_on_429_and_503() {
        let mut pacer = Pacer::new(None, 4);
        pacer.observe(t0(), StatusCode::OK, &headers(&[("retry-after", "120")]));
        pacer.observe(t0(), StatusCode::INTERNAL_SERVER_ERROR, &headers(&[("retry-after", "120")]));
        assert_eq!(pacer.admit(t0()), Admit::Go);
    }

    #[test]
    fn an_untimed_refusal_lowers_the_pace_instead_of_holding_for_a_fixed_time() {
        // The target took 40 requests a second, then refused without saying why or for how long.
        let mut pacer = Pacer::new(None, 8);
        let mut at = t0();
        for _ in 0..80 {
            assert_eq!(pacer.admit(at), Admit::Go);
            pacer.record(at, Outcome::Success);
            at += ms(25);
        }
        pacer.observe(at, StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new());
        let pace = pacer.refused_pace().expect("a pace was learned");
        assert!((0.85 * 40.0..=0.95 * 40.0).contains(&pace), "pace {pace:.1}/s after accepting 40/s");
        assert_eq!(pacer.effective_rate(), Some(rate("36/s")));
        // No fixed hold: only one request's spacing at the new pace, then one request tests it.
        let held = pacer.held_until(at).expect("held for one spacing");
        assert!(held - at <= ms(30), "held {} ms", (held - at).num_milliseconds());
        // A second refusal within the second (an answer to a request already in flight) lowers nothing more.
        pacer.record(at + ms(10), Outcome::TooMany);
        assert_eq!(pacer.refused_pace(), Some(pace));
        // With a Retry-After the target said how long: it is held, the pace is not guessed.
        let mut timed = Pacer::new(None, 4);
        timed.observe(t0(), StatusCode::TOO_MANY_REQUESTS, &headers(&[("retry-after", "3")]));
        assert_eq!(timed.held_until(t0()), Some(t0() + TimeDelta::seconds(3)));
        assert_eq!(timed.refused_pace(), None);
        // With a reset header, the header's time is used.
        let mut headed = Pacer::new(Some(rate("100/10s")), 4);
        let h = headers(&[("x-ratelimit-limit", "100"), ("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "3")]);
        headed.observe(t0(), StatusCode::TOO_MANY_REQUESTS, &h);
        assert_eq!(headed.held_until(t0()), Some(t0() + TimeDelta::seconds(3)));
        assert_eq!(headed.refused_pace(), None);
    }

    #[test]
    fn the_learned_pace_rises_while_the_target_keeps_accepting_and_is_forgotten_later() {
        let mut pacer = Pacer::new(None, 8);
        let mut at = t0();
        for _ in 0..20 {
            pacer.admit(at);
            pacer.record(at, Outcome::Success);
            at += ms(100);
        }
        /// Sends as fast as the pacer admits for `seconds`, every answer good.
        fn busy(pacer: &mut Pacer, at: &mut DateTime<Utc>, seconds: i64) {
            let end = *at + TimeDelta::seconds(seconds);
            while *at < end {
                match pacer.admit(*at) {
                    Admit::Go => pacer.record(*at, Outcome::Success),
                    Admit::WaitUntil(next) => {
                        *at = next;
                        continue;
                    }
                }
                *at += ms(1);
            }
        }
        // After the first refusal the estimate is rough: the pace grows by half each second until refused again.
        pacer.record(at, Outcome::TooMany);
        let first = pacer.refused_pace().unwrap();
        busy(&mut pacer, &mut at, 3);
        let searched = pacer.refused_pace().unwrap();
        assert!(searched >= first * 2.0, "{first:.1} → {searched:.1} in three seconds");
        // The second refusal ends the search: from then on one request a second more (5 %, at least one).
        pacer.record(at, Outcome::TooMany);
        let start = pacer.refused_pace().unwrap();
        // (Lowered from what the target accepted over the last two seconds, or from the pace, whichever is lower.)
        assert!(start <= 0.9 * searched + 0.01 && start >= 0.9 * first, "{searched:.1} → {start:.1}");
        busy(&mut pacer, &mut at, 5);
        let raised = pacer.refused_pace().unwrap();
        assert!(raised >= start + 4.0 && raised <= start + 6.0, "{start:.1} → {raised:.1}");
        // Without demand it does not rise (nothing says more would be taken).
        let idle = at + TimeDelta::seconds(30);
        pacer.record(idle, Outcome::Success);
        assert_eq!(pacer.refused_pace(), Some(raised));
        // Ten minutes after the last refusal it is forgotten.
        pacer.record(idle + TimeDelta::seconds(REFUSED_PACE_MEMORY_SECONDS), Outcome::Success);
        assert_eq!(pacer.refused_pace(), None);
        assert_eq!(pacer.effective_rate(), None);
    }

    #[test]
    fn after_a_hold_one_request_tests_the_water_before_the_rest() {
        let mut pacer = Pacer::new(None, 8);
        let holds = pacer.holds();
        pacer.observe(t0(), StatusCode::SERVICE_UNAVAILABLE, &headers(&[("retry-after", "2")]));
        assert_eq!(pacer.holds(), holds + 1, "a request claimed before the hold is not sent after it");
        let end = t0() + TimeDelta::seconds(2);
        assert_eq!(pacer.admit(end - ms(1)), Admit::WaitUntil(end));
        assert_eq!(pacer.admit(end), Admit::Go, "the first request after the hold");
        assert!(matches!(pacer.admit(end), Admit::WaitUntil(_)), "the rest wait for its answer");
        assert!(matches!(pacer.admit(end + ms(500)), Admit::WaitUntil(_)));
        // Given back unsent: the next request tests instead.
        pacer.probe_unused();
        assert_eq!(pacer.admit(end + ms(600)), Admit::Go);
        assert!(matches!(pacer.admit(end + ms(600)), Admit::WaitUntil(_)));
        // A good answer lets the rest follow.
        pacer.record(end + ms(700), Outcome::Success);
        for _ in 0..8 {
            assert_eq!(pacer.admit(end + ms(700)), Admit::Go);
        }
        // A refusal of the probe holds again, and the next hold has its own probe.
        pacer.observe(end + ms(800), StatusCode::TOO_MANY_REQUESTS, &headers(&[("retry-after", "1")]));
        let again = end + ms(800) + TimeDelta::seconds(1);
        assert_eq!(pacer.admit(again), Admit::Go);
        assert!(matches!(pacer.admit(again), Admit::WaitUntil(_)));
    }

    #[test]
    fn near_a_daily_limit_a_vendor_can_ask_for_one_request_per_interval() {
        let hints = PacingHints {
            near_limit: Some(crate::features::targets::NearLimit { above: 0.9, interval: Duration::from_millis(500) }),
            used_up_recheck: None,
        };
        let mut pacer = Pacer::new(None, 8);
        let usage = |used: &str| headers(&[("Sforce-Limit-Info", &format!("api-usage={used}/100000"))]);
        pacer.learn(t0(), StatusCode::OK, &usage("90000"), &hints);
        assert_eq!(pacer.effective_rate(), None, "at the threshold nothing is slowed down");
        pacer.learn(t0(), StatusCode::OK, &usage("90001"), &hints);
        assert_eq!(pacer.effective_rate(), Rate::new(1, Duration::from_millis(500)));
        let sent: Vec<_> = (0..40).map(|i| t0() + ms(i * 50)).filter(|at| pacer.admit(*at) == Admit::Go).collect();
        for pair in sent.windows(2) {
            assert!(pair[1] - pair[0] >= ms(495), "{} ms apart", (pair[1] - pair[0]).num_milliseconds());
        }
        pacer.learn(t0(), StatusCode::OK, &usage("50000"), &hints);
        assert_eq!(pacer.effective_rate(), None, "below the threshold again");
    }

    // --- Headers ------------------------------------------------------------------------------------------------

    /// HubSpot, "API usage details": X-HubSpot-RateLimit-Daily, -Daily-Remaining, -Interval-Milliseconds, -Max,
    /// -Remaining (values as in HubSpot's example, 100 per 10 000 ms, 250 000 a day).
    #[test]
    fn hubspot_headers_set_the_rate_the_holds_and_the_daily_usage() {
        let mut pacer = Pacer::new(Some(rate("190/10s")), 8);
        let ok = headers(&[
            ("X-HubSpot-RateLimit-Daily", "250000"),
            ("X-HubSpot-RateLimit-Daily-Remaining", "249950"),
            ("X-HubSpot-RateLimit-Interval-Milliseconds", "10000"),
            ("X-HubSpot-RateLimit-Max", "100"),
            ("X-HubSpot-RateLimit-Remaining", "99"),
        ]);
        pacer.observe(t0(), StatusCode::OK, &ok);
        assert_eq!(pacer.effective_rate(), Some(rate("100/10s")));
        assert_eq!(pacer.daily_usage(), Some((50, 250_000)));
        assert_eq!(pacer.admit(t0()), Admit::Go);

        // A higher learned maximum never raises the declared rate.
        let mut generous = Pacer::new(Some(rate("50/10s")), 8);
        generous.observe(t0(), StatusCode::OK, &ok);
        assert_eq!(generous.effective_rate(), Some(rate("50/10s")));

        // The interval's budget is used up: hold for one interval.
        let empty = headers(&[
            ("X-HubSpot-RateLimit-Interval-Milliseconds", "10000"),
            ("X-HubSpot-RateLimit-Max", "100"),
            ("X-HubSpot-RateLimit-Remaining", "0"),
        ]);
        pacer.observe(t0(), StatusCode::OK, &empty);
        assert_eq!(pacer.admit(t0() + ms(9_999)), Admit::WaitUntil(t0() + TimeDelta::seconds(10)));

        // The day's budget is used up: hold, then look again.
        let mut day = Pacer::new(None, 8);
        day.observe(
            t0(),
            StatusCode::TOO_MANY_REQUESTS,
            &headers(&[("X-HubSpot-RateLimit-Daily", "250000"), ("X-HubSpot-RateLimit-Daily-Remaining", "0")]),
        );
        assert_eq!(day.daily_usage(), Some((250_000, 250_000)));
        assert_eq!(day.held_until(t0()), Some(t0() + TimeDelta::seconds(DAILY_RECHECK_SECONDS)));
    }

    /// Pipedrive, "Rate limiting": x-ratelimit-limit (per 2-second window), x-ratelimit-remaining,
    /// x-ratelimit-reset (seconds), x-daily-requests-left (POST/PUT requests left in the UTC day); their example is
    /// `40 / 39 / 2 / 9999`.
    #[test]
    fn pipedrive_headers_set_the_rate_and_the_holds() {
        let mut pacer = Pacer::new(Some(rate("100/s")), 8);
        let ok = headers(&[
            ("x-ratelimit-limit", "40"),
            ("x-ratelimit-remaining", "39"),
            ("x-ratelimit-reset", "2"),
            ("x-daily-requests-left", "9999"),
        ]);
        pacer.observe(t0(), StatusCode::OK, &ok);
        // The window is the longest reset seen (2 s), not the declared 1 s: 40/2s, not 40/s.
        assert_eq!(pacer.effective_rate(), Some(rate("40/2s")));
        assert_eq!(pacer.held_until(t0()), None);

        let empty = headers(&[("x-ratelimit-limit", "40"), ("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1")]);
        pacer.observe(t0(), StatusCode::OK, &empty);
        assert_eq!(pacer.admit(t0() + ms(500)), Admit::WaitUntil(t0() + TimeDelta::seconds(1)));
        // Still 40/2s: the window never shrinks to a shorter reset.
        assert_eq!(pacer.effective_rate(), Some(rate("40/2s")));

        // A reset given as a Unix time.
        let mut unix = Pacer::new(None, 8);
        let at = t0() + TimeDelta::seconds(30);
        let reset = at.timestamp().to_string();
        unix.observe(t0(), StatusCode::OK, &headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &reset)]));
        assert_eq!(unix.held_until(t0()), Some(at));

        // No daily requests left: hold until the UTC day renews.
        let mut day = Pacer::new(None, 8);
        day.observe(t0(), StatusCode::OK, &headers(&[("x-daily-requests-left", "0")]));
        let midnight = DateTime::parse_from_rfc3339("2026-12-01T00:00:00Z").unwrap().to_utc();
        assert_eq!(day.admit(t0() + TimeDelta::hours(13)), Admit::WaitUntil(midnight));
        assert_eq!(day.admit(midnight), Admit::Go);
    }

    /// Salesforce REST API "Limit Info Header": `Sforce-Limit-Info: api-usage=10018/100000`, optionally followed by
    /// `; per-app-api-usage=17/250(appName=...)` or `; api-bursts=1/750`; usage may exceed the limit.
    #[test]
    fn salesforce_usage_is_exposed_and_slows_down_past_ninety_percent() {
        let mut pacer = Pacer::new(Some(rate("25/s")), 8);
        pacer.observe(t0(), StatusCode::OK, &headers(&[("Sforce-Limit-Info", "api-usage=10018/100000")]));
        assert_eq!(pacer.daily_usage(), Some((10_018, 100_000)));
        assert_eq!(pacer.effective_rate(), Some(rate("25/s")));

        let h = headers(&[("Sforce-Limit-Info", "api-usage=95000/100000; per-app-api-usage=17/250(appName=leadline)")]);
        pacer.observe(t0(), StatusCode::OK, &h);
        assert_eq!(pacer.daily_usage(), Some((95_000, 100_000)));
        assert_eq!(pacer.effective_rate(), Some(rate("5000/1d")));

        // The closer to the limit, the slower; back under 90 %, full speed again.
        pacer.observe(t0(), StatusCode::OK, &headers(&[("Sforce-Limit-Info", "api-usage=99990/100000")]));
        assert_eq!(pacer.effective_rate(), Some(rate("10/1d")));
        pacer.observe(t0(), StatusCode::OK, &headers(&[("Sforce-Limit-Info", "api-usage=80000/100000")]));
        assert_eq!(pacer.effective_rate(), Some(rate("25/s")));

        // At or past the limit: hold and look again later.
        pacer.observe(
            t0(),
            StatusCode::FORBIDDEN,
            &headers(&[("Sforce-Limit-Info", "api-usage=110018/100000; api-bursts=1/750")]),
        );
        assert_eq!(pacer.daily_usage(), Some((110_018, 100_000)));
        assert_eq!(pacer.held_until(t0()), Some(t0() + TimeDelta::seconds(DAILY_RECHECK_SECONDS)));

        assert_eq!(salesforce_usage("per-app-api-usage=17/250(appName=x)"), None);
        assert_eq!(salesforce_usage("api-usage=abc/100"), None);
    }

    #[test]
    fn unreadable_headers_are_ignored() {
        let mut pacer = Pacer::new(Some(rate("10/s")), 4);
        let h = headers(&[
            ("x-ratelimit-limit", "lots"),
            ("x-ratelimit-remaining", "-1"),
            ("x-hubspot-ratelimit-max", "0"),
            ("x-hubspot-ratelimit-interval-milliseconds", "0"),
            ("sforce-limit-info", "api-usage=5/0"),
            ("retry-after", "soon"),
        ]);
        pacer.learn(t0(), StatusCode::TOO_MANY_REQUESTS, &h, &PacingHints::default());
        assert_eq!(pacer.effective_rate(), Some(rate("10/s")));
        assert_eq!(pacer.daily_usage(), None);
        // Nothing the headers said holds the target (the refusal itself is `record`'s to judge).
        assert_eq!(pacer.held_until(t0()), None);
    }

    #[test]
    fn a_target_without_a_declared_rate_is_paced_once_it_tells_its_limit() {
        let mut pacer = Pacer::new(None, 4);
        for _ in 0..1000 {
            assert_eq!(pacer.admit(t0()), Admit::Go);
        }
        pacer.observe(t0(), StatusCode::OK, &headers(&[("x-ratelimit-limit", "10"), ("x-ratelimit-remaining", "5")]));
        assert_eq!(pacer.effective_rate(), Some(rate("10/s")));
        let sent = (0..100).filter(|_| pacer.admit(t0()) == Admit::Go).count();
        assert_eq!(sent, 1);
    }

    // --- AIMD ---------------------------------------------------------------------------------------------------

    #[test]
    fn aimd_halves_once_per_overload_and_recovers_one_by_one() {
        let mut pacer = Pacer::new(None, 16);
        assert_eq!(pacer.concurrency(), 16);
        let limited = Outcome::RateLimited { retry_after: Some(t0()) };
        pacer.record(t0(), limited);
        assert_eq!(pacer.concurrency(), 8);
        // The other 15 requests in flight under the old limit answer 429 too: no further halving.
        for _ in 0..15 {
            pacer.record(t0(), limited);
        }
        assert_eq!(pacer.concurrency(), 8);
        // A 429 for a request sent under the new limit halves again, down to 1 and no further. After each halving
        // the answers of the `old − 1` other requests in flight are awaited first.
        for (expected, in_flight) in [(4, 7), (2, 3), (1, 1), (1, 0), (1, 0)] {
            pacer.record(t0(), limited);
            assert_eq!(pacer.concurrency(), expected);
            for _ in 0..in_flight {
                pacer.record(t0(), Outcome::Other);
            }
        }
        // Recovery: a run of `limit` successes adds one.
        let mut successes = 0;
        while pacer.concurrency() < 16 {
            let before = pacer.concurrency();
            for _ in 0..before {
                pacer.record(t0(), Outcome::Success);
                successes += 1;
            }
            assert_eq!(pacer.concurrency(), before + 1);
        }
        assert_eq!(successes, (1..16).sum::<u32>());
        for _ in 0..100 {
            pacer.record(t0(), Outcome::Success);
        }
        assert_eq!(pacer.concurrency(), 16);
    }

    #[test]
    fn other_answers_neither_raise_nor_lower_concurrency() {
        let mut pacer = Pacer::new(None, 4);
        pacer.record(t0(), Outcome::RateLimited { retry_after: Some(t0() + TimeDelta::seconds(1)) });
        assert_eq!(pacer.concurrency(), 2);
        for _ in 0..50 {
            pacer.record(t0(), Outcome::Other);
        }
        assert_eq!(pacer.concurrency(), 2);
        assert_eq!(Pacer::new(None, 0).concurrency(), 1);
    }

    // --- Simulated drain ----------------------------------------------------------------------------------------

    /// A target that enforces a token bucket of `rate` per second and `capacity` burst, optionally announcing it
    /// Pipedrive-style (limit per 1 s window, remaining tokens, seconds until full; Retry-After on a 429).
    struct BucketServer {
        rate: f64,
        capacity: f64,
        tokens: f64,
        last: DateTime<Utc>,
        announce: bool,
    }

    impl BucketServer {
        fn new(rate: f64, capacity: f64, announce: bool) -> BucketServer {
            BucketServer { rate, capacity, tokens: capacity, last: t0(), announce }
        }

        fn arrive(&mut self, at: DateTime<Utc>) -> (StatusCode, HeaderMap) {
            let elapsed = (at - self.last).num_nanoseconds().unwrap() as f64 / 1e9;
            if elapsed > 0.0 {
                self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
                self.last = at;
            }
            let ok = self.tokens >= 1.0;
            if ok {
                self.tokens -= 1.0;
            }
            let mut h = HeaderMap::new();
            if self.announce {
                let reset = ((self.capacity - self.tokens) / self.rate).ceil();
                h = headers(&[
                    ("x-ratelimit-limit", &format!("{}", self.rate as u64)),
                    ("x-ratelimit-remaining", &format!("{}", self.tokens.floor() as u64)),
                    ("x-ratelimit-reset", &format!("{reset}")),
                ]);
                if !ok {
                    let wait = ((1.0 - self.tokens) / self.rate).ceil() as u64;
                    h.insert("retry-after", HeaderValue::from_str(&wait.to_string()).unwrap());
                }
            }
            (if ok { StatusCode::OK } else { StatusCode::TOO_MANY_REQUESTS }, h)
        }
    }

    struct Flight {
        arrive: DateTime<Utc>,
        done: DateTime<Utc>,
        answer: Option<(StatusCode, HeaderMap)>,
    }

    struct Drained {
        /// Delivered per second, from the start to the last delivery.
        achieved: f64,
        /// Share of the requests sent that were answered 429.
        limited_share: f64,
    }

    /// Delivers `jobs` leads through `pacer` to `server` on a virtual clock, as the worker would: as many in flight
    /// as `concurrency()` allows, each admitted by the pacer, 5–30 ms each way on the network, a 429 retried.
    fn drain(pacer: &mut Pacer, server: &mut BucketServer, jobs: usize, seed: u64) -> Drained {
        drain_with(pacer, server, jobs, seed, true)
    }

    /// [`drain`]; without `learn_from_refusals` the pacer hears only the headers, as a client that keeps no pace
    /// of its own would.
    fn drain_with(
        pacer: &mut Pacer,
        server: &mut BucketServer,
        jobs: usize,
        seed: u64,
        learn_from_refusals: bool,
    ) -> Drained {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut now = t0();
        let mut pending = jobs;
        let mut flights: Vec<Flight> = Vec::new();
        let (mut delivered, mut sent, mut limited) = (0usize, 0usize, 0usize);
        let mut last_delivery = t0();
        while delivered < jobs {
            // Requests reach the server in the order they arrive.
            let mut arriving: Vec<&mut Flight> =
                flights.iter_mut().filter(|f| f.answer.is_none() && f.arrive <= now).collect();
            arriving.sort_by_key(|f| f.arrive);
            for f in arriving {
                f.answer = Some(server.arrive(f.arrive));
            }
            // Answers come back in the order they are received.
            let (mut done, in_flight): (Vec<Flight>, Vec<Flight>) = flights.into_iter().partition(|f| f.done <= now);
            flights = in_flight;
            done.sort_by_key(|f| f.done);
            for f in done {
                let (status, h) = f.answer.expect("answered before it came back");
                if learn_from_refusals {
                    pacer.observe(f.done, status, &h);
                } else {
                    pacer.learn(f.done, status, &h, &PacingHints::default());
                }
                if status == StatusCode::TOO_MANY_REQUESTS {
                    limited += 1;
                    pending += 1;
                } else {
                    delivered += 1;
                    last_delivery = f.done;
                }
            }
            let mut wake = None;
            while pending > 0 && flights.len() < pacer.concurrency() as usize {
                match pacer.admit(now) {
                    Admit::Go => {
                        pending -= 1;
                        sent += 1;
                        let arrive = now + ms(rng.random_range(5..=30));
                        let done = arrive + ms(rng.random_range(5..=30));
                        flights.push(Flight { arrive, done, answer: None });
                    }
                    Admit::WaitUntil(at) => {
                        wake = Some(at);
                        break;
                    }
                }
            }
            let next = flights.iter().map(|f| if f.answer.is_none() { f.arrive } else { f.done }).chain(wake).min();
            match next {
                Some(next) => now = next,
                None => break,
            }
        }
        let seconds = (last_delivery - t0()).num_milliseconds() as f64 / 1000.0;
        Drained { achieved: delivered as f64 / seconds, limited_share: limited as f64 / sent as f64 }
    }

    /// Declared rate = the server's rate; the server's bucket allows only a tenth of a second's burst and says
    /// nothing in its headers.
    #[test]
    fn drain_at_the_declared_rate_against_a_small_burst_bucket() {
        for r in [50u32, 200] {
            let mut pacer = Pacer::new(Some(Rate::new(r, Duration::from_secs(1)).unwrap()), 16);
            let mut server = BucketServer::new(f64::from(r), f64::from(r) / 10.0, false);
            let d = drain(&mut pacer, &mut server, 60 * r as usize, u64::from(r));
            let ratio = d.achieved / f64::from(r);
            assert!(ratio >= 0.95, "R={r}: achieved {:.2}/s = {:.1} % of allowed", d.achieved, ratio * 100.0);
            assert!(d.limited_share < 0.01, "R={r}: {:.2} % answered 429", d.limited_share * 100.0);
        }
    }

    /// Declared twice what the server allows; the server announces its limit Pipedrive-style and the pacer must
    /// learn it from the first answers.
    #[test]
    fn drain_with_an_overstated_rate_learns_the_server_limit_from_headers() {
        for r in [50u32, 200] {
            let mut pacer = Pacer::new(Some(Rate::new(2 * r, Duration::from_secs(1)).unwrap()), 16);
            let mut server = BucketServer::new(f64::from(r), f64::from(r), true);
            let d = drain(&mut pacer, &mut server, 60 * r as usize, u64::from(r) + 1);
            assert_eq!(pacer.effective_rate(), Rate::new(r, Duration::from_secs(1)));
            let ratio = d.achieved / f64::from(r);
            assert!(ratio >= 0.95, "R={r}: achieved {:.2}/s = {:.1} % of allowed", d.achieved, ratio * 100.0);
            assert!(d.limited_share < 0.01, "R={r}: {:.2} % answered 429", d.limited_share * 100.0);
        }
    }

    /// Without a pace (declared rate far above the server's, no headers, refusals not learned from) the same drain
    /// would be throttled hard: the simulation can tell a working pacer from a broken one.
    #[test]
    fn the_simulation_detects_an_unpaced_client() {
        let mut pacer = Pacer::new(Some(rate("10000/s")), 16);
        let mut server = BucketServer::new(50.0, 5.0, false);
        let d = drain_with(&mut pacer, &mut server, 3000, 3, false);
        assert!(d.limited_share > 0.05, "{:.2} %", d.limited_share * 100.0);
    }

    /// A server that refuses above its rate and says nothing (no `Retry-After`, no rate-limit headers), the
    /// target configured without a rate: the pacer finds the pace from the refusals alone.
    #[test]
    fn drain_against_a_silent_limit_finds_the_pace_from_refusals() {
        for r in [40u32, 200] {
            let mut pacer = Pacer::new(None, 16);
            let mut server = BucketServer::new(f64::from(r), f64::from(r) / 10.0, false);
            let d = drain(&mut pacer, &mut server, 60 * r as usize, u64::from(r) + 7);
            let ratio = d.achieved / f64::from(r);
            assert!(ratio >= 0.8, "R={r}: achieved {:.2}/s = {:.1} % of allowed", d.achieved, ratio * 100.0);
            assert!(d.limited_share < 0.05, "R={r}: {:.2} % refused", d.limited_share * 100.0);
        }
    }
}
