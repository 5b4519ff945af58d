//! A hold: why nothing is sent to a target for a while, whatever lead is due, and until when.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// Why nothing is sent to a target for a while, whatever lead is due.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HoldReason {
    /// The target (or Graph) said when to come back (`Retry-After`, usage headers).
    RateLimited,
    /// The target refused the credential in this environment variable; one probe is let through at `until`.
    Credentials { credential: String },
    /// The target refused its own setup (a WhatsApp template that does not exist, an SMS region not enabled):
    /// every lead would fail the same way, so they wait for a person to fix it; one probe is let through at
    /// `until`.
    Setup { reason: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct Hold {
    pub until: DateTime<Utc>,
    pub reason: HoldReason,
}
