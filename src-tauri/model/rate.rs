//! A rate limit as configured (`rate = "190/10s"`) and as learned from a target's headers: at most `count`
//! requests in any window of length `window`. The pacer (`features::delivery::pacing`) enforces it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest window a rate may declare.
pub const MAX_WINDOW: Duration = Duration::from_secs(31 * 24 * 3600);

// ---------------------------------------------------------------------------------------------------------------

/// A rate limit: at most `count` requests in any window of length `window`. Parsed from text like `"190/10s"`,
/// `"100/s"`, `"5/1m"` or `"250000/1d"` (units `ms`, `s`, `m`/`min`, `h`, `d`; a missing number means 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    count: u32,
    window: Duration,
}

/// Why a rate could not be read. Every message quotes the text it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    #[error("rate {0:?} is not of the form <count>/<window>, like \"190/10s\", \"100/s\", \"5/1m\" or \"250000/1d\"")]
    Garbage(String),
    #[error("rate {0:?}: the count must be at least 1")]
    ZeroCount(String),
    #[error("rate {input:?}: unknown unit {unit:?} (use ms, s, m, h or d)")]
    UnknownUnit { input: String, unit: String },
    #[error("rate {0:?}: the window must be longer than zero")]
    ZeroWindow(String),
    #[error("rate {0:?}: the window is longer than 31 days")]
    WindowTooLong(String),
}

impl Rate {
    /// A rate of `count` per `window`; `None` when the count is zero, the window is empty or longer than
    /// [`MAX_WINDOW`].
    pub fn new(count: u32, window: Duration) -> Option<Rate> {
        (count > 0 && !window.is_zero() && window <= MAX_WINDOW).then_some(Rate { count, window })
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn window(&self) -> Duration {
        self.window
    }

    /// Whether `self` allows fewer requests per unit of time than `other`.
    pub fn is_slower_than(&self, other: &Rate) -> bool {
        u128::from(self.count) * other.window.as_nanos() < u128::from(other.count) * self.window.as_nanos()
    }

    /// The slower of two rates.
    pub fn slowest(self, other: Rate) -> Rate {
        if other.is_slower_than(&self) {
            other
        } else {
            self
        }
    }

    /// Requests per second, for display and tests.
    pub fn per_second(&self) -> f64 {
        f64::from(self.count) / self.window.as_secs_f64()
    }
}

impl FromStr for Rate {
    type Err = RateError;

    fn from_str(input: &str) -> Result<Rate, RateError> {
        let garbage = || RateError::Garbage(input.to_string());
        let (count, window) = input.trim().split_once('/').ok_or_else(garbage)?;
        let count: u32 = count.trim().parse().map_err(|_| garbage())?;
        if count == 0 {
            return Err(RateError::ZeroCount(input.to_string()));
        }
        let window = window.trim();
        let digits = window.find(|c: char| !c.is_ascii_digit()).unwrap_or(window.len());
        let (amount, unit) = window.split_at(digits);
        let amount: u64 = if amount.is_empty() { 1 } else { amount.parse().map_err(|_| garbage())? };
        let unit = unit.trim();
        let unit_ms: u64 = match unit {
            "ms" => 1,
            "s" | "sec" => 1_000,
            "m" | "min" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(garbage()),
            other => return Err(RateError::UnknownUnit { input: input.to_string(), unit: other.to_string() }),
        };
        if amount == 0 {
            return Err(RateError::ZeroWindow(input.to_string()));
        }
        let window_ms = amount.checked_mul(unit_ms).ok_or_else(|| RateError::WindowTooLong(input.to_string()))?;
        let window = Duration::from_millis(window_ms);
        if window > MAX_WINDOW {
            return Err(RateError::WindowTooLong(input.to_string()));
        }
        Ok(Rate { count, window })
    }
}

impl fmt::Display for Rate {
    /// The canonical text form, which parses back to the same rate.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.window.as_millis();
        let (amount, unit) = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")]
            .into_iter()
            .find(|(unit_ms, _)| ms % unit_ms == 0)
            .map_or((ms, "ms"), |(unit_ms, unit)| (ms / unit_ms, unit));
        write!(f, "{}/{amount}{unit}", self.count)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Rate, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(text: &str) -> Rate {
        text.parse().unwrap()
    }

    #[test]
    fn rates_parse_in_every_documented_form() {
        assert_eq!(rate("190/10s"), Rate::new(190, Duration::from_secs(10)).unwrap());
        assert_eq!(rate("100/s"), Rate::new(100, Duration::from_secs(1)).unwrap());
        assert_eq!(rate("5/1m"), Rate::new(5, Duration::from_secs(60)).unwrap());
        assert_eq!(rate("5/min"), Rate::new(5, Duration::from_secs(60)).unwrap());
        assert_eq!(rate("250000/1d"), Rate::new(250_000, Duration::from_secs(86_400)).unwrap());
        assert_eq!(rate("40/2s"), Rate::new(40, Duration::from_secs(2)).unwrap());
        assert_eq!(rate("3/500ms"), Rate::new(3, Duration::from_millis(500)).unwrap());
        assert_eq!(rate(" 7 / 2h "), Rate::new(7, Duration::from_secs(7200)).unwrap());
    }

    #[test]
    fn rate_errors_name_the_problem() {
        let err = |s: &str| s.parse::<Rate>().unwrap_err();
        assert_eq!(err("0/10s"), RateError::ZeroCount("0/10s".into()));
        assert_eq!(err("10/5w"), RateError::UnknownUnit { input: "10/5w".into(), unit: "w".into() });
        assert_eq!(err("10/0s"), RateError::ZeroWindow("10/0s".into()));
        assert_eq!(err("10/32d"), RateError::WindowTooLong("10/32d".into()));
        assert_eq!(err("10/99999999999999999d"), RateError::WindowTooLong("10/99999999999999999d".into()));
        for garbage in ["", "fast", "10", "10/", "/s", "-1/s", "ten/s", "10/10", "1.5/s", "10/s/s"] {
            assert!(matches!(err(garbage), RateError::Garbage(_) | RateError::UnknownUnit { .. }), "{garbage:?}");
        }
        assert_eq!(err("10/s/s"), RateError::UnknownUnit { input: "10/s/s".into(), unit: "s/s".into() });
        let message = err("0/10s").to_string();
        assert!(message.contains("\"0/10s\"") && message.contains("at least 1"), "{message}");
        let message = err("10/5w").to_string();
        assert!(message.contains("unknown unit \"w\""), "{message}");
        assert!(err("fast").to_string().contains("<count>/<window>"));
    }

    #[test]
    fn rates_deserialize_from_config_text_and_display_back() {
        #[derive(Deserialize)]
        struct Target {
            rate: Rate,
        }
        let t: Target = toml::from_str("rate = \"190/10s\"").unwrap();
        assert_eq!(t.rate, rate("190/10s"));
        let bad = toml::from_str::<Target>("rate = \"0/10s\"").err().unwrap().to_string();
        assert!(bad.contains("the count must be at least 1"), "{bad}");
        for text in ["190/10s", "100/1s", "5/1m", "250000/1d", "3/500ms", "7/2h"] {
            assert_eq!(rate(text).to_string(), text);
            assert_eq!(rate(&rate(text).to_string()), rate(text));
        }
        assert_eq!(rate("5/60s").to_string(), "5/1m");
        assert_eq!(serde_json::to_string(&rate("100/s")).unwrap(), "\"100/1s\"");
    }

    #[test]
    fn rates_compare_by_requests_per_time() {
        assert!(rate("100/10s").is_slower_than(&rate("190/10s")));
        assert!(rate("40/2s").is_slower_than(&rate("100/s")));
        assert!(!rate("20/2s").is_slower_than(&rate("10/s")));
        assert_eq!(rate("40/2s").slowest(rate("100/s")), rate("40/2s"));
        assert_eq!(rate("100/s").slowest(rate("40/2s")), rate("40/2s"));
    }
}
