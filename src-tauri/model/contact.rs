//! A first contact (a WhatsApp or SMS message to a lead) as Leadline records it: which step sent what to whom,
//! and what the provider said about it since. Neither provider de-duplicates a send, so this record is what keeps
//! a lead's "hello" to one: it is written *before* the request leaves, and a step finds it on every later try.

use chrono::{DateTime, Utc};

/// Where a step's message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContactStatus {
    /// The request is leaving or left, and no answer came back (yet): the message may be out. Never repeated
    /// blindly (in doubt).
    Sending,
    /// The provider refused the request or it never left: nothing went out, sending again is safe.
    Refused,
    /// The provider took the message (WhatsApp's `wamid`, Twilio's `SM…` sid).
    Accepted,
    /// Receipts: handed to the network, on the phone, read.
    Sent,
    Delivered,
    Read,
    /// The provider reported that the message could not be delivered (a receipt with an error).
    Failed,
    /// Not sent: the number said STOP, or is on the opt-out list.
    OptedOut,
}

impl ContactStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ContactStatus::Sending => "sending",
            ContactStatus::Refused => "refused",
            ContactStatus::Accepted => "accepted",
            ContactStatus::Sent => "sent",
            ContactStatus::Delivered => "delivered",
            ContactStatus::Read => "read",
            ContactStatus::Failed => "failed",
            ContactStatus::OptedOut => "opted_out",
        }
    }

    pub fn parse(s: &str) -> Option<ContactStatus> {
        Some(match s {
            "sending" => ContactStatus::Sending,
            "refused" => ContactStatus::Refused,
            "accepted" => ContactStatus::Accepted,
            "sent" => ContactStatus::Sent,
            "delivered" => ContactStatus::Delivered,
            "read" => ContactStatus::Read,
            "failed" => ContactStatus::Failed,
            "opted_out" => ContactStatus::OptedOut,
            _ => return None,
        })
    }

    /// The provider has the message: it is never sent again for this step, replay or not.
    pub fn went_out(self) -> bool {
        matches!(self, ContactStatus::Accepted | ContactStatus::Sent | ContactStatus::Delivered | ContactStatus::Read)
    }

    /// How far along a message is; a receipt never moves it back (`delivered` arriving after `read`).
    pub fn rank(self) -> u8 {
        match self {
            ContactStatus::Refused | ContactStatus::OptedOut => 0,
            ContactStatus::Sending => 1,
            ContactStatus::Accepted => 2,
            ContactStatus::Sent => 3,
            ContactStatus::Delivered => 4,
            ContactStatus::Read => 5,
            ContactStatus::Failed => 6,
        }
    }
}

/// One step's message.
#[derive(Debug, Clone, PartialEq)]
pub struct ContactMessage {
    /// The step's own key (`source:source_ref:target`): carried to WhatsApp as `biz_opaque_callback_data`, so a
    /// receipt names the step even when the send's answer was lost.
    pub step_key: String,
    pub delivery_id: i64,
    pub target: String,
    /// `whatsapp` or `sms`.
    pub channel: String,
    /// E.164.
    pub recipient: String,
    pub status: ContactStatus,
    /// The provider's id of the message, once known.
    pub provider_id: Option<String>,
    /// The provider's error code of a refusal or a failed receipt (`131026`, `30003`).
    pub error_code: Option<String>,
    /// When the request left.
    pub sent_at: DateTime<Utc>,
    /// The step's replay generation when it left: a person's replay (a later generation) may send a message
    /// that was in doubt or failed; nothing sends one that went out.
    pub generation: i64,
}

/// A delivery receipt, as either provider's webhook says it (`statuses[]` of a WhatsApp webhook; a Twilio status
/// callback).
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    /// The provider's id of the message (`wamid…`, `SM…`).
    pub provider_id: String,
    /// The step's key, when the receipt carries it (WhatsApp's `biz_opaque_callback_data`; the `step` of the
    /// status callback address Leadline gave Twilio).
    pub step_key: Option<String>,
    pub status: ContactStatus,
    /// The provider's error code of a failure (`131026`, `30003`).
    pub error_code: Option<String>,
    /// The provider's words for it (never the lead's data).
    pub error_title: Option<String>,
    /// When the provider says it happened (Twilio's callbacks carry no time: when it arrived).
    pub at: DateTime<Utc>,
}
