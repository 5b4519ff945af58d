//! Volume-drop and silence detection: is a source sending less than it normally does at this hour?
//!
//! The baseline is the source's own history by hour of week (local time, `monitor.timezone`), averaged over
//! `monitor.volume.baseline_weeks`. While a source is new it falls back, in this order, to:
//! - 3 to 14 days of history: the same hour of day on days of the same kind (business day or not);
//! - 6 business hours of history: its mean rate during business hours, and no judgement outside them;
//! - less: no baseline ("learning"), no alert.
//!
//! **Volume drop**: the expected count λ over a rolling window is summed from the baseline minute by minute.
//! Three windows are judged (a quarter, half and all of `window_minutes`) so a sharp drop shows early. Real traffic is noisier than a Poisson process (a quiet Tuesday is not an incident), so λ is
//! lowered by `tolerance` first; then the alert opens when P(X ≤ observed | λ) < `p_value` (Poisson lower tail),
//! and resolves when that probability is back above `resolve_p_value` (the smallest p of the windows, times
//! their number). No judgement when λ is below
//! `min_expected`: nights and weekends with almost no traffic never alarm, and an alert already open stays open
//! until traffic proves it normal again.
//!
//! **Silence**: nothing at all for `silence_minutes`, during which the baseline expected at least
//! `silence_min_expected` events (12 by default: with the tolerance, nothing at all then has a probability
//! below e^-8.4 ≈ 0.02 %), in an hour that normally has traffic (the window's expectation passes
//! `min_expected`, as for drops). Resolves with the next event. A silence includes the drop, so a source that is
//! silent is not also reported as a drop.
//!
//! **Listening time**: counts only mean something over time Leadline was listening. After a start, each window is
//! clipped to the whole minutes listened ([`listened_windows`]): five minutes after a start the windows are five
//! minutes long, and judged as soon as their expectation passes `min_expected`. Until then nothing is judged, and
//! the assessment says when it will be ([`Assessment::judged_from`]) and whether leads arrived since the start.
//!
//! Everything here is pure: history, counts and time are given, so it is tested on a simulated month.

use std::collections::HashMap;

use chrono::{DateTime, Datelike, Duration, Timelike, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use crate::config::{BusinessHours, VolumeConfig};

const HOUR_MS: i64 = 3_600_000;

/// How the baseline was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum BaselineKind {
    /// The source's own history by hour of week.
    HourOfWeek,
    /// A few days of history: the same hour of day on days of the same kind.
    HourOfDay,
    /// Hardly any history: its mean rate in business hours, no judgement outside them.
    BusinessHours,
    /// Not enough history to judge.
    Learning,
}

/// Expected events per hour for each hour of the week (Monday 00:00 local = slot 0); `None`: no judgement.
#[derive(Debug, Clone)]
pub struct Baseline {
    pub kind: BaselineKind,
    pub per_hour: [Option<f64>; 168],
    tz: Tz,
}

fn slot(t: DateTime<Utc>, tz: Tz) -> usize {
    let local = t.with_timezone(&tz);
    local.weekday().num_days_from_monday() as usize * 24 + local.hour() as usize
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

impl Baseline {
    /// Builds the baseline from hourly counts (`(hour start in Unix ms, count)`, hours without events may be
    /// missing) since the source's first hour. Only complete hours before `now` are used.
    pub fn from_history(
        hourly: &[(i64, f64)],
        first_hour: Option<i64>,
        now: DateTime<Utc>,
        tz: Tz,
        config: &VolumeConfig,
        business: &BusinessHours,
    ) -> Baseline {
        let mut per_hour = [None; 168];
        let Some(first) = first_hour else { return Baseline { kind: BaselineKind::Learning, per_hour, tz } };
        let current_hour = now.timestamp_millis().div_euclid(HOUR_MS) * HOUR_MS;
        let start = first.max(current_hour - config.baseline_weeks as i64 * 7 * 24 * HOUR_MS);
        let counts: HashMap<i64, f64> = hourly.iter().copied().collect();
        let hours: Vec<(DateTime<Utc>, f64)> = (0..)
            .map(|i| start + i * HOUR_MS)
            .take_while(|h| *h < current_hour)
            .map(|h| (DateTime::from_timestamp_millis(h).unwrap_or_default(), counts.get(&h).copied().unwrap_or(0.0)))
            .collect();
        let history_hours = hours.len();
        let is_business_day = |t: DateTime<Utc>| {
            let local = t.with_timezone(&tz).naive_local();
            // Business day: the business hours' start time on this date is within business hours.
            let probe =
                local.date().and_time(chrono::NaiveTime::parse_from_str(&business.start, "%H:%M").unwrap_or_default());
            business.contains(probe)
        };
        let kind = if history_hours >= 14 * 24 {
            BaselineKind::HourOfWeek
        } else if history_hours >= 3 * 24 {
            BaselineKind::HourOfDay
        } else if hours.iter().filter(|(t, _)| business.contains(t.with_timezone(&tz).naive_local())).count() >= 6 {
            BaselineKind::BusinessHours
        } else {
            BaselineKind::Learning
        };
        match kind {
            BaselineKind::HourOfWeek | BaselineKind::HourOfDay => {
                let mut by_week_slot: Vec<Vec<f64>> = vec![Vec::new(); 168];
                // Hour of day × (business day?) for the fallback.
                let mut by_day_slot: HashMap<(u32, bool), Vec<f64>> = HashMap::new();
                for (t, c) in &hours {
                    by_week_slot[slot(*t, tz)].push(*c);
                    let h = t.with_timezone(&tz).hour();
                    by_day_slot.entry((h, is_business_day(*t))).or_default().push(*c);
                }
                // A representative date for each slot of the coming week, to know its hour and day kind.
                let week_start = current_hour - 7 * 24 * HOUR_MS;
                for i in 0..168 {
                    let t = DateTime::from_timestamp_millis(week_start + i * HOUR_MS).unwrap_or_default();
                    let s = slot(t, tz);
                    let own = &by_week_slot[s];
                    per_hour[s] = if kind == BaselineKind::HourOfWeek && own.len() >= 2 {
                        mean(own)
                    } else {
                        let h = t.with_timezone(&tz).hour();
                        by_day_slot.get(&(h, is_business_day(t))).and_then(|v| mean(v))
                    };
                }
            }
            BaselineKind::BusinessHours => {
                let business_counts: Vec<f64> = hours
                    .iter()
                    .filter(|(t, _)| business.contains(t.with_timezone(&tz).naive_local()))
                    .map(|(_, c)| *c)
                    .collect();
                let rate = mean(&business_counts);
                let week_start = current_hour - 7 * 24 * HOUR_MS;
                for i in 0..168 {
                    let t = DateTime::from_timestamp_millis(week_start + i * HOUR_MS).unwrap_or_default();
                    if business.contains(t.with_timezone(&tz).naive_local()) {
                        per_hour[slot(t, tz)] = rate;
                    }
                }
            }
            BaselineKind::Learning => {}
        }
        Baseline { kind, per_hour, tz }
    }

    /// Events per hour expected at `t`.
    pub fn rate_at(&self, t: DateTime<Utc>) -> Option<f64> {
        self.per_hour[slot(t, self.tz)]
    }

    /// Events expected in `[from, to)`, summed minute by minute. `None` when any minute has no baseline.
    pub fn expected(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Option<f64> {
        self.sum_minutes(from, to, |t| self.rate_at(t))
    }

    /// Like [`expected`](Self::expected), counting minutes without a baseline as zero.
    pub fn expected_lenient(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
        self.sum_minutes(from, to, |t| Some(self.rate_at(t).unwrap_or(0.0))).unwrap_or(0.0)
    }

    fn sum_minutes(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        rate: impl Fn(DateTime<Utc>) -> Option<f64>,
    ) -> Option<f64> {
        let mut total = 0.0;
        let mut t = from;
        while t < to {
            let step = (to - t).min(Duration::minutes(1));
            total += rate(t)? * step.num_milliseconds() as f64 / HOUR_MS as f64;
            t += step;
        }
        Some(total)
    }
}

/// P(X ≤ k) for X ~ Poisson(λ), summed in log space so large λ does not underflow.
pub fn poisson_cdf(k: u64, lambda: f64) -> f64 {
    if lambda <= 0.0 {
        return 1.0;
    }
    if k as f64 > lambda * 10.0 + 100.0 {
        return 1.0;
    }
    let ln_lambda = lambda.ln();
    let mut ln_fact = 0.0;
    let mut max = f64::NEG_INFINITY;
    let mut terms = Vec::with_capacity(k as usize + 1);
    for i in 0..=k {
        if i > 0 {
            ln_fact += (i as f64).ln();
        }
        let t = -lambda + i as f64 * ln_lambda - ln_fact;
        max = max.max(t);
        terms.push(t);
    }
    let sum: f64 = terms.iter().map(|t| (t - max).exp()).sum();
    (max + sum.ln()).exp().min(1.0)
}

/// What to do with an alert after an assessment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Raise,
    Clear,
    /// No judgement possible (baseline too low or unknown): leave the alert as it is.
    Keep,
}

/// The state of one source at one moment, with the reasoning the UI and the alert text show.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct Assessment {
    pub baseline: BaselineKind,
    /// The window the verdict rests on (the most significant of the windows judged), minutes.
    pub window_minutes: u64,
    /// Events received in that window.
    pub observed: u64,
    /// Events the baseline expected in that window (before the tolerance), if it can tell.
    pub expected: Option<f64>,
    /// P(a count this low) under the baseline lowered by the tolerance, corrected for the number of windows.
    pub p_value: Option<f64>,
    pub drop: Verdict,
    /// Minutes since the last event.
    pub silent_minutes: Option<f64>,
    /// Events the baseline expected during that silence.
    pub expected_during_silence: Option<f64>,
    /// When the silence began: the last event, or the start of listening when nothing came since.
    pub silent_since: Option<DateTime<Utc>>,
    pub silence: Verdict,
    /// An event arrived since Leadline started listening (always, when it has listened all along).
    pub heard_since_start: bool,
    /// Too little has been listened to for any window to be judged yet, but it will be: the first time at which
    /// a window clipped to the listening time expects enough to judge. `None` once windows are judged, and when
    /// not even the full windows would be (a quiet hour).
    pub judged_from: Option<DateTime<Utc>>,
}

/// The windows judged: a quarter, half and all of `window_minutes`, so a sharp drop is seen in the short
/// windows early, and a gradual one in the long window.
pub fn windows(config: &VolumeConfig) -> Vec<u64> {
    let w = config.window_minutes;
    let mut v: Vec<u64> = [w / 4, w / 2, w].into_iter().filter(|m| *m >= 5).collect();
    v.dedup();
    if v.is_empty() {
        v.push(w);
    }
    v
}

/// The shortest window judged: fewer minutes say too little about a source (and [`windows`] makes none shorter).
pub const MIN_JUDGED_MINUTES: u64 = 5;

/// The windows to count over at `now` when Leadline has been listening since `listening_since` (`None`: all
/// along): each of [`windows`] clipped to the whole minutes listened, none shorter than [`MIN_JUDGED_MINUTES`]
/// (or the configured window, if that is shorter), without repeats. Empty right after a start.
pub fn listened_windows(config: &VolumeConfig, listening_since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Vec<u64> {
    let listened = listening_since.map(|since| (now - since).num_minutes().max(0) as u64);
    let mut v: Vec<u64> = windows(config)
        .into_iter()
        .filter_map(|w| {
            let clipped = listened.map_or(w, |l| w.min(l));
            (clipped > 0 && clipped >= MIN_JUDGED_MINUTES.min(w)).then_some(clipped)
        })
        .collect();
    v.dedup();
    v
}

/// Whether any of `minutes` (windows ending at `now`) expects enough, after the tolerance, to be judged.
fn judgeable(baseline: &Baseline, minutes: &[u64], now: DateTime<Utc>, config: &VolumeConfig) -> bool {
    minutes.iter().any(|&m| {
        baseline
            .expected(now - Duration::minutes(m as i64), now)
            .is_some_and(|lambda| lambda * (1.0 - config.tolerance) >= config.min_expected)
    })
}

/// The first minute after `now` at which a window clipped to the time listened since `since` can be judged,
/// looking no further than the longest window (after that the windows are no longer clipped).
fn first_judgement(
    baseline: &Baseline,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    config: &VolumeConfig,
) -> Option<DateTime<Utc>> {
    let longest = windows(config).into_iter().max()? as i64;
    let listened = (now - since).num_minutes().max(0);
    (listened + 1..=listened + longest)
        .map(|m| since + Duration::minutes(m))
        .find(|&t| judgeable(baseline, &listened_windows(config, Some(since), t), t, config))
}

/// Judges a source at `now`: `counts` are the events observed in each of [`listened_windows`] (`(minutes, count)`),
/// `last_event` the time of its last event, `listening_since` when Leadline started receiving (`None`: always).
/// Each window is tested; the smallest p-value, multiplied by the number of windows tested (Bonferroni),
/// decides, so looking at several windows does not add false alarms. Silence is measured from the last event or
/// the start of listening, whichever is later — and a start is not a lead: only an event ends a silence. Whether
/// the hour normally has traffic is asked of the full windows: it is a property of the hour, not of how long
/// Leadline has listened.
pub fn assess(
    baseline: &Baseline,
    counts: &[(u64, u64)],
    last_event: Option<DateTime<Utc>>,
    listening_since: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    config: &VolumeConfig,
) -> Assessment {
    let keep = 1.0 - config.tolerance;
    let judged: Vec<(u64, u64, f64, f64)> = counts
        .iter()
        .filter_map(|&(minutes, observed)| {
            let lambda = baseline.expected(now - Duration::minutes(minutes as i64), now)?;
            (lambda * keep >= config.min_expected)
                .then(|| (minutes, observed, lambda, poisson_cdf(observed, lambda * keep)))
        })
        .collect();
    let tests = judged.len().max(1) as f64;
    let best = judged.iter().min_by(|a, b| a.3.partial_cmp(&b.3).unwrap_or(std::cmp::Ordering::Equal)).copied();
    let longest = counts.iter().max_by_key(|c| c.0).copied().unwrap_or((config.window_minutes, 0));
    let (window_minutes, observed, expected, p_value, drop) = match best {
        Some((minutes, observed, lambda, p)) => {
            let p = (p * tests).min(1.0);
            let verdict = if p < config.p_value {
                Verdict::Raise
            } else if p >= config.resolve_p_value {
                Verdict::Clear
            } else {
                Verdict::Keep
            };
            (minutes, observed, Some(lambda), Some(p), verdict)
        }
        None => (
            longest.0,
            longest.1,
            baseline.expected(now - Duration::minutes(longest.0 as i64), now),
            None,
            Verdict::Keep,
        ),
    };
    let busy_hour = judgeable(baseline, &windows(config), now, config);
    // Nothing judged because too little was listened to: say when it will be, if the hour allows it at all.
    let judged_from = match listening_since {
        Some(since) if judged.is_empty() && listened_windows(config, Some(since), now) != windows(config) => {
            first_judgement(baseline, since, now, config)
        }
        _ => None,
    };
    let heard_since_start = match (last_event, listening_since) {
        (Some(last), Some(start)) => last >= start,
        (last, None) => last.is_some(),
        (None, Some(_)) => false,
    };
    let silent_since = match (last_event, listening_since) {
        (Some(last), Some(start)) => Some(last.max(start)),
        (last, start) => last.or(start),
    };
    let (silent_minutes, expected_during_silence, silence) = match silent_since {
        Some(last) => {
            let silent = (now - last).num_milliseconds().max(0) as f64 / 60_000.0;
            let during = baseline.expected_lenient(last, now);
            // Only in hours that normally have traffic: some window's expectation must be worth judging.
            let verdict = if silent < config.silence_minutes as f64 {
                if heard_since_start {
                    Verdict::Clear
                } else {
                    Verdict::Keep
                }
            } else if busy_hour && during >= config.silence_min_expected {
                Verdict::Raise
            } else {
                Verdict::Keep
            };
            (Some(silent), Some(during), verdict)
        }
        None => (None, None, Verdict::Keep),
    };
    // A silence is the extreme drop: report it once, as a silence.
    let drop = if silence == Verdict::Raise && drop == Verdict::Raise { Verdict::Keep } else { drop };
    Assessment {
        baseline: baseline.kind,
        window_minutes,
        observed,
        expected,
        p_value,
        drop,
        silent_minutes,
        expected_during_silence,
        silent_since,
        silence,
        heard_since_start,
        judged_from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_is_not_a_lead_only_an_event_ends_a_silence() {
        let config = VolumeConfig::default();
        let mut per_hour = [Some(120.0); 168];
        per_hour[0] = Some(120.0);
        let baseline = Baseline { kind: BaselineKind::HourOfWeek, per_hour, tz: chrono_tz::UTC };
        let start = DateTime::from_timestamp(1_767_600_000, 0).unwrap();
        let now = start + Duration::minutes(1);
        // Nothing since an hour before the start: the silence cannot be judged yet, and is not over.
        let before = Some(start - Duration::hours(1));
        assert_eq!(assess(&baseline, &[], before, Some(start), now, &config).silence, Verdict::Keep);
        // A lead since the start ends it.
        let after = Some(start + Duration::seconds(30));
        assert_eq!(assess(&baseline, &[], after, Some(start), now, &config).silence, Verdict::Clear);
    }

    /// A baseline of `per_hour` events every hour of the week.
    fn flat(per_hour: f64) -> Baseline {
        Baseline { kind: BaselineKind::HourOfWeek, per_hour: [Some(per_hour); 168], tz: chrono_tz::UTC }
    }

    fn start() -> DateTime<Utc> {
        DateTime::from_timestamp(1_767_600_000, 0).unwrap()
    }

    #[test]
    fn windows_are_clipped_to_the_whole_minutes_listened() {
        let config = VolumeConfig::default(); // 60 min: windows of 15, 30 and 60
        let since = Some(start());
        let at = |minutes: i64, seconds: i64| start() + Duration::minutes(minutes) + Duration::seconds(seconds);
        assert_eq!(listened_windows(&config, None, at(0, 0)), [15, 30, 60], "listening all along");
        assert!(listened_windows(&config, since, at(0, 30)).is_empty());
        assert!(listened_windows(&config, since, at(4, 59)).is_empty(), "under five minutes says too little");
        assert_eq!(listened_windows(&config, since, at(5, 0)), [5], "three clipped windows are one test");
        assert_eq!(listened_windows(&config, since, at(20, 10)), [15, 20]);
        assert_eq!(listened_windows(&config, since, at(45, 0)), [15, 30, 45]);
        assert_eq!(listened_windows(&config, since, at(90, 0)), [15, 30, 60]);
        // A configured window shorter than five minutes is judged once it has been listened to in full.
        let short = VolumeConfig { window_minutes: 3, ..VolumeConfig::default() };
        assert!(listened_windows(&short, since, at(2, 0)).is_empty());
        assert_eq!(listened_windows(&short, since, at(3, 0)), [3]);
    }

    #[test]
    fn five_minutes_after_a_start_a_busy_source_is_judged_on_five_minutes() {
        let config = VolumeConfig::default();
        let baseline = flat(1200.0); // 100 expected in five minutes
        let now = start() + Duration::minutes(5) + Duration::seconds(20);
        let windows = listened_windows(&config, Some(start()), now);
        assert_eq!(windows, [5]);
        let last = Some(now - Duration::seconds(200));
        let none = assess(&baseline, &[(5, 3)], last, Some(start()), now, &config);
        assert_eq!((none.drop, none.window_minutes, none.judged_from), (Verdict::Raise, 5, None));
        let usual = assess(&baseline, &[(5, 96)], last, Some(start()), now, &config);
        assert_eq!((usual.drop, usual.judged_from), (Verdict::Clear, None));
        assert!(usual.heard_since_start);
    }

    #[test]
    fn too_early_to_judge_says_when_it_will_be_and_whether_leads_came() {
        let config = VolumeConfig::default(); // judged when 70 % of the expectation reaches 8
        let now = start() + Duration::minutes(3) + Duration::seconds(10);
        // 120 an hour: 8 / 0.7 = 11.4 expected after 5.7 minutes, so the six-minute window is the first judged.
        let a = assess(&flat(120.0), &[], None, Some(start()), now, &config);
        assert_eq!(a.judged_from, Some(start() + Duration::minutes(6)));
        assert_eq!((a.drop, a.silence, a.p_value, a.heard_since_start), (Verdict::Keep, Verdict::Keep, None, false));
        let heard = assess(&flat(120.0), &[], Some(now - Duration::seconds(5)), Some(start()), now, &config);
        assert!(heard.heard_since_start);
        assert_eq!(heard.silence, Verdict::Clear);
        // 30 an hour: only the 30-minute window expects enough (15 × 0.7 ≥ 8, 7.5 × 0.7 < 8 for the 15-minute one).
        let a = assess(&flat(30.0), &[], None, Some(start()), now, &config);
        assert_eq!(a.judged_from, Some(start() + Duration::minutes(23)));
        // 6 an hour: not even an hour would be judged. That is a quiet hour, not a matter of listening longer.
        assert_eq!(assess(&flat(6.0), &[], None, Some(start()), now, &config).judged_from, None);
        // Once windows are judged, nothing is pending.
        let later = start() + Duration::minutes(8);
        assert_eq!(assess(&flat(120.0), &[(8, 16)], None, Some(start()), later, &config).judged_from, None);
    }

    #[test]
    fn the_smallest_p_value_of_the_clipped_windows_is_corrected_for_their_number() {
        let config = VolumeConfig::default();
        let baseline = flat(240.0); // 4 a minute
        let now = start() + Duration::minutes(20);
        let counts = [(15, 40), (20, 60)];
        let a = assess(&baseline, &counts, Some(now), Some(start()), now, &config);
        let p15 = poisson_cdf(40, 60.0 * 0.7);
        let p20 = poisson_cdf(60, 80.0 * 0.7);
        assert_eq!(a.window_minutes, if p15 < p20 { 15 } else { 20 });
        assert!((a.p_value.unwrap() - 2.0 * p15.min(p20)).abs() < 1e-12, "{a:?}");
    }

    #[test]
    fn a_silence_is_dated_from_the_last_lead_or_the_start_of_listening() {
        let config = VolumeConfig { silence_minutes: 10, ..VolumeConfig::default() };
        let baseline = flat(240.0);
        let since = start() - Duration::minutes(30);
        let now = start() + Duration::seconds(3);
        // Nothing for ten minutes of a busy hour, the last lead heard before this process started.
        let last = Some(now - Duration::minutes(10));
        let a = assess(&baseline, &[(15, 20), (30, 80)], last, Some(since), now, &config);
        assert_eq!((a.silence, a.silent_since), (Verdict::Raise, last));
        assert_eq!(a.drop, Verdict::Keep, "a silence is reported once, as a silence");
        // Never a lead since listening began: the silence is dated from then, not from before it.
        let a = assess(&baseline, &[], Some(since - Duration::hours(5)), Some(since), now, &config);
        assert_eq!(a.silent_since, Some(since));
    }

    #[test]
    fn poisson_lower_tail_matches_known_values() {
        // P(X ≤ 0 | 1) = e^-1; P(X ≤ 4 | 20) ≈ 1.69e-5; P(X ≤ 10 | 10) ≈ 0.583.
        assert!((poisson_cdf(0, 1.0) - (-1.0f64).exp()).abs() < 1e-12);
        assert!((poisson_cdf(4, 20.0) - 1.6944e-5).abs() < 1e-8, "{}", poisson_cdf(4, 20.0));
        assert!((poisson_cdf(10, 10.0) - 0.58304).abs() < 1e-4);
        // Large λ does not underflow: P(X ≤ 900 | 1000) ≈ 7.5e-4.
        let p = poisson_cdf(900, 1000.0);
        assert!(p > 5e-4 && p < 1e-3, "{p}");
        assert_eq!(poisson_cdf(5, 0.0), 1.0);
    }
}
