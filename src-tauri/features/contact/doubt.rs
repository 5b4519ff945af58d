//! "Did this lead get our message?" — a person settles a first contact in doubt.
//!
//! A `whatsapp` or `sms` step whose request lost its answer is never sent again blindly (`targets::contact`): it
//! waits for a receipt or, for SMS, the provider's list. When neither has told within
//! `first_contact.in_doubt_minutes`, the step becomes a dead letter of class `ambiguous` with that question, and
//! only a person can answer it — by asking the lead, or looking in the provider's console:
//!
//! - **it arrived**: the message is recorded as delivered and the step is replayed; the replay finds it went out,
//!   sends nothing, and the lead's route goes on (an advisor's step after it, for example);
//! - **it did not**: the message is recorded as not sent and the step is replayed; the replay sends it once more
//!   (after the usual checks: opt-out, quiet hours, the lead's age).
//!
//! A plain replay of such a step, without an answer, asks the question again rather than guess. The answer is
//! written before the replay starts: should the replay not start (the lead was queued in another replay
//! meanwhile), a later replay of the step does what the person said.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::Config;
use crate::model::ContactStatus;
use crate::store::{DeadLetter, Resolution, Store};

/// The message a dead first-contact step is in doubt about.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct ContactDoubt {
    /// `whatsapp` or `sms`.
    pub channel: String,
    /// When the message whose answer was lost left.
    pub sent_at: DateTime<Utc>,
}

/// The step's key (as `targets::contact::step_key` builds it from a job): `source:source_ref:target`.
fn step_key(letter: &DeadLetter) -> String {
    format!("{}:{}:{}", letter.source, letter.source_ref, letter.target)
}

/// The doubt a person can settle on this dead letter: an open dead letter of a first-contact step whose message
/// is still `sending` (sent, its answer lost, no receipt since). `None` for any other dead letter.
pub async fn doubt_of(store: &Store, config: &Config, letter: &DeadLetter) -> anyhow::Result<Option<ContactDoubt>> {
    let first_contact = config.targets.get(&letter.target).is_some_and(|t| t.kind().is_first_contact());
    if !first_contact || letter.resolution != Resolution::Open || letter.purged {
        return Ok(None);
    }
    Ok(store
        .contact_message(&step_key(letter))
        .await?
        .filter(|m| m.status == ContactStatus::Sending)
        .map(|m| ContactDoubt { channel: m.channel, sent_at: m.sent_at }))
}

/// Records the person's answer about the letter's message, found in doubt by [`doubt_of`]. Returns `false` when
/// it is no longer in doubt (a receipt came, another person answered): the store changes only a `sending` message.
pub async fn settle(store: &Store, letter: &DeadLetter, arrived: bool, now: DateTime<Utc>) -> anyhow::Result<bool> {
    store.settle_contact_doubt(&step_key(letter), arrived, now).await
}
