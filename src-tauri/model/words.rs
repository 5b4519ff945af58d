//! The domain words Leadline stores as text: each is an enum whose wire name (serde, the generated TypeScript
//! union) is the text kept in the database. Reading a stored value the enum does not know is an error naming
//! the word and the value, never a silent default.

use serde::{Deserialize, Serialize};

/// A stored or received text that is not one of a word's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a {word} (expected one of: {expected})")]
pub struct UnknownWord {
    pub word: &'static str,
    pub value: String,
    pub expected: String,
}

/// Declares a domain word: the enum with serde (`snake_case`), ts-rs, `ALL`, `as_str`, `Display` and `FromStr`.
macro_rules! word {
    ($(#[$meta:meta])* $name:ident, $label:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ts_rs::TS)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The stored (and wire) text.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownWord;

            fn from_str(s: &str) -> Result<$name, UnknownWord> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownWord {
                        word: $label,
                        value: s.to_string(),
                        expected: [$($text),+].join(", "),
                    }),
                }
            }
        }
    };
}

word! {
    /// Why an attempt failed, which decides what happens next.
    ErrorClass, "error class" {
        /// The target or the network hiccuped: retry with backoff.
        Transient = "transient",
        /// The target asked us to slow down: wait as it says; not a wasted attempt.
        RateLimited = "rate_limited",
        /// The lead itself is wrong for the CRM (validation, format): dead letter; fix the data and replay.
        PermanentData = "permanent_data",
        /// Our setup is wrong (credentials, deleted field or endpoint): dead letter and alert; replay after the fix.
        PermanentConfig = "permanent_config",
        /// The request was sent and no answer came: the CRM may or may not have the lead.
        Ambiguous = "ambiguous",
    }
}

impl ErrorClass {
    pub fn parse(s: &str) -> Option<ErrorClass> {
        s.parse().ok()
    }

    /// Classes that go straight to the dead-letter queue without a retry.
    pub fn is_permanent(self) -> bool {
        matches!(self, ErrorClass::PermanentData | ErrorClass::PermanentConfig)
    }
}

word! {
    /// Where one step of a lead's route stands (`delivery.state`).
    DeliveryState, "delivery state" {
        /// Behind an earlier step that has not delivered yet.
        Waiting = "waiting",
        Pending = "pending",
        /// Leased by a worker.
        Running = "running",
        Delivered = "delivered",
        /// In the dead-letter queue; its resolution says what became of it.
        Dead = "dead",
    }
}

word! {
    /// What became of a dead letter (`delivery.resolution`).
    Resolution, "dead-letter resolution" {
        Open = "open",
        Replayed = "replayed",
        FixedManually = "fixed_manually",
        Discarded = "discarded",
    }
}

word! {
    /// Which dead letters a filter looks at: one resolution, or all of them (`open` when not given).
    ResolutionFilter, "resolution filter" {
        Open = "open",
        Replayed = "replayed",
        FixedManually = "fixed_manually",
        Discarded = "discarded",
        All = "all",
    }
}

// The enum comes from `word!`, which cannot take `#[default]` on one variant.
#[allow(clippy::derivable_impls)]
impl Default for ResolutionFilter {
    fn default() -> ResolutionFilter {
        ResolutionFilter::Open
    }
}

impl ResolutionFilter {
    /// The one resolution it keeps; `None` for all.
    pub fn resolution(self) -> Option<Resolution> {
        match self {
            ResolutionFilter::Open => Some(Resolution::Open),
            ResolutionFilter::Replayed => Some(Resolution::Replayed),
            ResolutionFilter::FixedManually => Some(Resolution::FixedManually),
            ResolutionFilter::Discarded => Some(Resolution::Discarded),
            ResolutionFilter::All => None,
        }
    }
}

word! {
    /// How bad an alert is.
    Severity, "alert severity" {
        Critical = "critical",
        Warning = "warning",
        Info = "info",
    }
}

word! {
    /// What an alert is about; at most one unresolved alert per (kind, key).
    AlertKind, "alert kind" {
        PermanentConfig = "permanent_config",
        Credentials = "credentials",
        OldestPending = "oldest_pending",
        BreakerOpen = "breaker_open",
        NewCause = "new_cause",
        DeadLetterGrowth = "dead_letter_growth",
        RetryBudget = "retry_budget",
        Silence = "silence",
        VolumeDrop = "volume_drop",
        SourceFailing = "source_failing",
        ReconciliationFound = "reconciliation_found",
        AutoReplay = "auto_replay",
    }
}

word! {
    /// Where an alert stands: open → acknowledged → resolved.
    AlertState, "alert state" {
        Open = "open",
        Acknowledged = "acknowledged",
        Resolved = "resolved",
    }
}

word! {
    /// Why an alert waits to be announced.
    Held, "alert hold" {
        /// Its kind's policy is `digest`.
        Digest = "digest",
        /// It opened during quiet hours.
        QuietHours = "quiet_hours",
    }
}

word! {
    /// A target's circuit breaker.
    BreakerState, "breaker state" {
        Closed = "closed",
        Open = "open",
        HalfOpen = "half_open",
    }
}

word! {
    /// Where a replay stands (`replay.status`).
    ReplayStatus, "replay status" {
        Running = "running",
        /// By a person, or because the canary failed.
        Paused = "paused",
        Cancelled = "cancelled",
        Finished = "finished",
    }
}

word! {
    /// Which part of a replay is being sent (`replay.phase`).
    ReplayPhase, "replay phase" {
        Canary = "canary",
        /// Paused: a canary lead failed again.
        CanaryFailed = "canary_failed",
        Rest = "rest",
    }
}

word! {
    /// What became of one item of a replay.
    ReplayOutcome, "replay outcome" {
        Delivered = "delivered",
        InProgress = "in_progress",
        Queued = "queued",
        /// Failed again with the same reason as before.
        FailedSameReason = "failed_same_reason",
        /// Failed again, but for a different reason.
        FailedNewReason = "failed_new_reason",
        /// Discarded or fixed by hand while the replay ran.
        ResolvedByHand = "resolved_by_hand",
    }
}

word! {
    /// What happened to a replay (`replay_event.kind`).
    ReplayEventKind, "replay event" {
        Started = "started",
        CanarySent = "canary_sent",
        CanaryPassed = "canary_passed",
        CanaryFailed = "canary_failed",
        Waiting = "waiting",
        Resumed = "resumed",
        /// The target takes leads again after a wait.
        Continued = "continued",
        Paused = "paused",
        Cancelled = "cancelled",
        Finished = "finished",
    }
}

/// Decodes a stored word, with a clear error when the database holds a value the enum does not know.
pub(crate) fn decode<T: std::str::FromStr<Err = UnknownWord>>(s: &str) -> anyhow::Result<T> {
    s.parse::<T>().map_err(|e| anyhow::anyhow!("unexpected value in the database: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_round_trips_and_matches_serde() {
        fn check<T>(all: &[T])
        where
            T: Copy
                + std::fmt::Debug
                + PartialEq
                + Serialize
                + std::str::FromStr<Err = UnknownWord>
                + std::fmt::Display,
        {
            for &w in all {
                let text = w.to_string();
                assert_eq!(text.parse::<T>().unwrap(), w);
                assert_eq!(serde_json::to_value(w).unwrap(), serde_json::Value::String(text));
            }
        }
        check(ErrorClass::ALL);
        check(DeliveryState::ALL);
        check(Resolution::ALL);
        check(ResolutionFilter::ALL);
        check(Severity::ALL);
        check(AlertKind::ALL);
        check(AlertState::ALL);
        check(Held::ALL);
        check(BreakerState::ALL);
        check(ReplayStatus::ALL);
        check(ReplayPhase::ALL);
        check(ReplayOutcome::ALL);
        check(ReplayEventKind::ALL);
    }

    #[test]
    fn an_unknown_value_is_an_error_naming_the_word() {
        let e = decode::<Resolution>("lost").unwrap_err().to_string();
        assert!(e.contains("`lost` is not a dead-letter resolution"), "{e}");
        assert!(e.contains("open, replayed, fixed_manually, discarded"), "{e}");
    }
}
