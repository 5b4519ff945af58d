//! What the first-contact steps (`whatsapp`, `sms`) share: one message per lead and step, never twice.
//!
//! Neither WhatsApp nor Twilio takes an idempotency key, so a send retried after a lost answer could greet a lead
//! twice. Leadline therefore records each step's message (`contact_message`, through [`ContactBook`]) *before*
//! the request leaves, and every later try of the step starts from that record ([`before_send`]):
//!
//! - a message the provider took (accepted, sent, delivered, read) is never sent again, by a retry or a replay;
//! - a message whose answer was lost is **in doubt**: it is not sent again until its receipt arrives (WhatsApp
//!   echoes the step's key in `biz_opaque_callback_data`) or the provider's list shows it (Twilio), and after
//!   `first_contact.in_doubt_minutes` without either a person decides ([`in_doubt_step`]);
//! - a refused request (a rate limit, an outage, a connection that failed) sent nothing: it may go again.
//!
//! Before a first send the number's opt-out, the lead's quiet hours ([`quiet_until`]) and its age are checked.
//! [`deliver`] is the flow both connectors run; they supply the wire ([`Channel`]).

use chrono::{DateTime, NaiveTime, TimeZone, Utc};
use serde_json::{Map, Value};

use super::connector::{AttemptReport, Exchange};
use super::vendor::VendorVerdict;
use crate::config::TargetConfig;
use crate::model::{ContactMessage, ContactStatus, ErrorClass, Failure, Job, Verdict};

/// A send whose answer was lost and that the provider's list does not show is sent again only once this long
/// has passed since it left: a request still being processed may not be listed yet.
pub const SETTLE: chrono::Duration = chrono::Duration::seconds(5);

/// How long after a send without an answer the step looks again (a receipt that arrives makes it due at once).
pub const RECHECK: chrono::Duration = chrono::Duration::seconds(30);

/// The step's own key, carried with its message: `source:source_ref:target`. Not suffixed by revision or
/// replay: one lead gets one message from a step, whatever happened to the lead since.
pub fn step_key(job: &Job) -> String {
    format!("{}:{}", job.external_id(), job.target)
}

/// What an earlier message of the step means for this try.
#[derive(Debug, Clone, PartialEq)]
pub enum Before {
    /// Nothing went out for this step (or a person replayed it after it failed or stayed in doubt): send.
    Send,
    /// The provider has the message: delivered, never sent again.
    WentOut(ContactMessage),
    /// Sent without an answer: wait for its receipt or look it up.
    InDoubt(ContactMessage),
    /// A receipt reported it failed; the step failed with it (a person's replay sends again).
    Failed(ContactMessage),
    /// The number opted out when this step tried it.
    OptedOut(ContactMessage),
}

/// Pure: what the step's earlier message (if any) allows now, for a try of replay generation `generation`.
pub fn before_send(existing: Option<&ContactMessage>, generation: i64) -> Before {
    let Some(m) = existing else { return Before::Send };
    let replayed = generation > m.generation;
    match m.status {
        s if s.went_out() => Before::WentOut(m.clone()),
        ContactStatus::Refused => Before::Send,
        ContactStatus::Sending if replayed => Before::Send,
        ContactStatus::Sending => Before::InDoubt(m.clone()),
        ContactStatus::Failed if replayed => Before::Send,
        ContactStatus::Failed => Before::Failed(m.clone()),
        ContactStatus::OptedOut => Before::OptedOut(m.clone()),
        _ => Before::Send,
    }
}

/// What an unconfirmed send comes to now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DoubtStep {
    /// Look again at this time (a receipt that arrives first makes the step due at once).
    WaitUntil(DateTime<Utc>),
    /// `in_doubt_minutes` passed without a receipt: a person decides ("did this lead get our message?").
    AskPerson,
}

/// Pure: a message sent at `sent_at` without an answer, at `now`.
pub fn in_doubt_step(sent_at: DateTime<Utc>, now: DateTime<Utc>, in_doubt_minutes: u64) -> DoubtStep {
    let limit = sent_at + chrono::Duration::minutes(i64::try_from(in_doubt_minutes).unwrap_or(i64::MAX / 60_000));
    if now >= limit {
        DoubtStep::AskPerson
    } else {
        DoubtStep::WaitUntil((now + RECHECK).min(limit))
    }
}

/// Pure: when quiet hours `quiet` (from, until: local times in `zone`) hold a message at `now`, the moment they
/// end; `None` when a message may go now. Quiet hours over midnight (`21:00`–`08:00`) end the next morning.
pub fn quiet_until(
    now: DateTime<Utc>,
    zone: chrono_tz::Tz,
    (from, until): (NaiveTime, NaiveTime),
) -> Option<DateTime<Utc>> {
    if from == until {
        return None;
    }
    let local = now.with_timezone(&zone);
    let t = local.time();
    let quiet = if from < until { t >= from && t < until } else { t >= from || t < until };
    if !quiet {
        return None;
    }
    let mut day = local.date_naive();
    if from > until && t >= from {
        day = day.succ_opt()?;
    }
    // The first instant at or after `until` that day (a DST gap moves it forward to the next valid minute).
    let mut at = day.and_time(until);
    for _ in 0..180 {
        if let Some(end) = zone.from_local_datetime(&at).earliest() {
            return Some(end.with_timezone(&Utc));
        }
        at += chrono::Duration::minutes(1);
    }
    None
}

/// Pure: from when a lead's age counts for the age guard: its birth, or — when it arrived during quiet hours
/// that have ended by `now` — the end of those quiet hours (a message held for the night is not too old in the
/// morning because of the night).
pub fn counts_from(
    born: DateTime<Utc>,
    now: DateTime<Utc>,
    zone: chrono_tz::Tz,
    quiet: Option<(NaiveTime, NaiveTime)>,
) -> DateTime<Utc> {
    match quiet.and_then(|q| quiet_until(born, zone, q)) {
        Some(end) if end <= now => end,
        _ => born,
    }
}

/// The lead's time zone: the step's `first_contact.time_zone` when set, else the one its number's country
/// code says (the country's most populous zone), else UTC.
pub fn zone_of(recipient: &str, configured: Option<&str>) -> chrono_tz::Tz {
    if let Some(tz) = configured.and_then(|c| c.parse::<chrono_tz::Tz>().ok()) {
        return tz;
    }
    let digits = recipient.trim_start_matches('+');
    // Longest prefix first: +351 before +35, +1 last.
    const ZONES: &[(&str, chrono_tz::Tz)] = &[
        ("351", chrono_tz::Europe::Lisbon),
        ("353", chrono_tz::Europe::Dublin),
        ("358", chrono_tz::Europe::Helsinki),
        ("420", chrono_tz::Europe::Prague),
        ("971", chrono_tz::Asia::Dubai),
        ("30", chrono_tz::Europe::Athens),
        ("31", chrono_tz::Europe::Amsterdam),
        ("32", chrono_tz::Europe::Brussels),
        ("33", chrono_tz::Europe::Paris),
        ("34", chrono_tz::Europe::Madrid),
        ("36", chrono_tz::Europe::Budapest),
        ("39", chrono_tz::Europe::Rome),
        ("40", chrono_tz::Europe::Bucharest),
        ("41", chrono_tz::Europe::Zurich),
        ("43", chrono_tz::Europe::Vienna),
        ("44", chrono_tz::Europe::London),
        ("45", chrono_tz::Europe::Copenhagen),
        ("46", chrono_tz::Europe::Stockholm),
        ("47", chrono_tz::Europe::Oslo),
        ("48", chrono_tz::Europe::Warsaw),
        ("49", chrono_tz::Europe::Berlin),
        ("52", chrono_tz::America::Mexico_City),
        ("55", chrono_tz::America::Sao_Paulo),
        ("61", chrono_tz::Australia::Sydney),
        ("65", chrono_tz::Asia::Singapore),
        ("81", chrono_tz::Asia::Tokyo),
        ("86", chrono_tz::Asia::Shanghai),
        ("90", chrono_tz::Europe::Istanbul),
        ("91", chrono_tz::Asia::Kolkata),
        ("27", chrono_tz::Africa::Johannesburg),
        ("7", chrono_tz::Europe::Moscow),
        ("1", chrono_tz::America::New_York),
    ];
    ZONES.iter().find(|(cc, _)| digits.starts_with(cc)).map_or(chrono_tz::UTC, |(_, tz)| *tz)
}

/// The recipient the mapping wrote to `to`: E.164 (`+` and 8 to 15 digits), or the data failure of the lead.
pub fn recipient(record: &Map<String, Value>) -> Result<String, Failure> {
    let to = record.get("to").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    let digits = to.strip_prefix('+').unwrap_or_default();
    if (8..=15).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit()) {
        Ok(to.to_string())
    } else {
        Err(Failure {
            class: ErrorClass::PermanentData,
            reason: if to.is_empty() {
                "not sent: the lead has no phone number".into()
            } else {
                "not sent: the lead's phone number is not a number in international form (+ and 8 to 15 digits)".into()
            },
            field: Some("to".into()),
        })
    }
}

/// A field of the mapped record as text (a template parameter, a `{field}` of an SMS body).
pub fn text_of(record: &Map<String, Value>, field: &str) -> Option<String> {
    match record.get(field)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `template` with each `{field}` replaced by the mapped record's field; a field without a value is a data
/// failure naming it (a message that says "Hi ," is worse than none). `{{` and `}}` are literal braces.
pub fn render(template: &str, record: &Map<String, Value>) -> Result<String, Failure> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        let Some(end) = tail.find('}').filter(|_| tail.starts_with('{')) else {
            out.push_str(&tail[..1]);
            rest = &tail[1..];
            continue;
        };
        let field = &tail[1..end];
        let value = text_of(record, field).ok_or_else(|| Failure {
            class: ErrorClass::PermanentData,
            reason: format!("not sent: the message needs `{field}`, which the lead does not have"),
            field: Some(field.to_string()),
        })?;
        out.push_str(&value);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A message ready to send.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub recipient: String,
    /// The request's body (JSON for WhatsApp, the form's fields for Twilio), as the preview shows it.
    pub body: Value,
}

/// What became of one send.
pub enum SendOutcome {
    /// The provider took the message: its id.
    Accepted { status: u16, provider_id: String, excerpt: Option<String> },
    /// The provider refused it: nothing went out. `opted_out`: the number unsubscribed (Twilio 21610).
    Refused {
        status: u16,
        verdict: VendorVerdict,
        error_code: Option<String>,
        opted_out: bool,
        excerpt: Option<String>,
    },
    /// The request never left (no connection).
    NotSent(String),
    /// Not sent: the provider's answer to another request held the target while this one was prepared.
    HeldBack,
    /// Sent, and no answer came back: the message may be out.
    NoAnswer(String),
}

/// What a look-up of an unconfirmed send found.
pub enum LookUp {
    /// The provider has it: its id and status.
    Found { provider_id: String, status: ContactStatus },
    /// The provider's own list does not show it: it never went out.
    NotFound,
    /// No way to tell (WhatsApp has no list of sent messages; the look-up failed): wait for the receipt.
    Unknown(String),
}

/// One first-contact channel's wire: what a connector supplies to [`deliver`].
#[async_trait::async_trait]
pub trait Channel: Send + Sync {
    /// `whatsapp` or `sms`.
    fn channel(&self) -> &'static str;
    fn config(&self) -> &TargetConfig;
    /// The message for `job`, or the data or setup failure that keeps it from being sent.
    fn prepare(&self, job: &Job, step_key: &str) -> Result<Prepared, Failure>;
    /// Sends it.
    async fn send(&self, prepared: &Prepared, step_key: &str, cx: &Exchange<'_>) -> SendOutcome;
    /// Looks up a message sent at `message.sent_at` whose answer was lost.
    async fn look_up(&self, message: &ContactMessage, prepared: &Prepared, cx: &Exchange<'_>) -> LookUp;
    /// Fills the report of a refusal: verdict, hold, credentials.
    fn refused(&self, report: &mut AttemptReport, verdict: &VendorVerdict);
    /// The `time_zone` of the source a lead came from, if it has one.
    fn source_zone(&self, source: &str) -> Option<&str>;
}

/// Each source's `time_zone`, by source name: what [`Channel::source_zone`] answers.
pub fn source_zones(all: &crate::config::Config) -> std::collections::BTreeMap<String, String> {
    all.sources.iter().filter_map(|(name, s)| Some((name.clone(), s.time_zone.clone()?))).collect()
}

/// Pure: the time zone a lead's quiet hours are kept in — its source's `time_zone`, else the step's
/// `first_contact.time_zone`, else the one its number's country code says ([`zone_of`]).
pub fn lead_zone(recipient: &str, source_zone: Option<&str>, step_zone: Option<&str>) -> chrono_tz::Tz {
    zone_of(recipient, source_zone.filter(|z| z.parse::<chrono_tz::Tz>().is_ok()).or(step_zone))
}

/// A refusal of the step's own setup — the template is unknown or its parameters do not fit (WhatsApp 132000,
/// 132001), the region is not enabled (Twilio 21408), the sender is wrong — is no fault of the lead: every lead
/// would fail the same way. The report asks the worker to hold the step and alert a person (like a refused
/// credential), so the leads wait instead of each being dead-lettered.
pub fn hold_on_setup(report: &mut AttemptReport, v: &VendorVerdict) {
    if v.class == Some(ErrorClass::PermanentConfig) && v.alert && !v.credential_problem {
        report.setup_refused = Some(v.reason.clone());
    }
}

/// The flow of one first-contact try, the same for both channels. `None`: nothing happened and nothing was
/// decided (the contact record could not be read or written): the lead goes back to the queue unsent.
pub async fn deliver(step: &dyn Channel, job: &Job, cx: &Exchange<'_>) -> Option<AttemptReport> {
    let started = std::time::Instant::now();
    let mut report = AttemptReport::new(cx.now);
    let key = step_key(job);
    let prepared = match step.prepare(job, &key) {
        Ok(p) => p,
        Err(f) => return Some(AttemptReport::failed(cx.now, f)),
    };
    let existing = match cx.contacts.message(&key).await {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), delivery_id = job.id, "cannot read the contact record");
            return None;
        }
    };
    let config = step.config();
    match before_send(existing.as_ref(), job.replay_generation) {
        Before::WentOut(m) => {
            report.crm_id = m.provider_id.clone();
            report.note = Some(format!("already sent to this lead ({}): not sent again", m.status.as_str()));
            return Some(report);
        }
        Before::OptedOut(_) => {
            report.note = Some("not sent: the number opted out of messages".into());
            return Some(report);
        }
        Before::Failed(m) => {
            report.verdict = Verdict::Failed(Failure {
                class: ErrorClass::PermanentData,
                reason: format!(
                    "the message could not be delivered{}",
                    m.error_code.map(|c| format!(" (error {c})")).unwrap_or_default()
                ),
                field: Some("to".into()),
            });
            return Some(report);
        }
        Before::InDoubt(m) => match step.look_up(&m, &prepared, cx).await {
            LookUp::Found { provider_id, status } => {
                if let Err(e) = cx.contacts.answered(&key, status, Some(&provider_id), None, cx.now).await {
                    tracing::warn!(error = %format!("{e:#}"), "cannot record the message found by look-up");
                }
                report.crm_id = Some(provider_id);
                report.note = Some("sent before, its answer lost: found by look-up, not sent again".into());
                report.duration_ms = started.elapsed().as_millis() as i64;
                return Some(report);
            }
            LookUp::NotFound if cx.now >= m.sent_at + SETTLE => {
                tracing::info!(delivery_id = job.id, "in doubt: the provider's list does not show it; sending");
            }
            found => {
                let why = match found {
                    LookUp::Unknown(why) => why,
                    _ => "not in the provider's list yet; looked up again before anything is sent".into(),
                };
                report.in_doubt = true;
                let sent = m.sent_at.format("%H:%M:%S UTC");
                match in_doubt_step(m.sent_at, cx.now, config.first_contact.in_doubt_minutes) {
                    DoubtStep::WaitUntil(at) => {
                        // Not found yet in a list: look again once it has settled.
                        let at = if cx.now < m.sent_at + SETTLE { at.min(m.sent_at + SETTLE) } else { at };
                        report.not_before = Some(at);
                        report.note = Some(format!(
                            "in doubt: the message sent at {sent} got no answer; not sent again while its receipt is \
                             awaited ({why})"
                        ));
                    }
                    DoubtStep::AskPerson => {
                        report.verdict = Verdict::Failed(Failure {
                            class: ErrorClass::Ambiguous,
                            reason: format!(
                                "in doubt: did this lead get our message? It was sent at {sent}, its answer was lost \
                                 and no receipt came within {}. Answer on the dead letter: \"It arrived\" goes on \
                                 without sending, \"Send again\" sends it once more",
                                match config.first_contact.in_doubt_minutes {
                                    1 => "a minute".to_string(),
                                    n => format!("{n} minutes"),
                                }
                            ),
                            field: None,
                        });
                    }
                }
                report.duration_ms = started.elapsed().as_millis() as i64;
                return Some(report);
            }
        },
        Before::Send => {}
    }

    // A first send: the number, the lead's clock and its age first.
    match cx.contacts.opted_out(&prepared.recipient).await {
        Ok(true) => {
            report.note = Some("not sent: the number opted out of messages".into());
            return Some(report);
        }
        Ok(false) => {}
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), delivery_id = job.id, "cannot read the opt-out list");
            return None;
        }
    }
    let zone = lead_zone(&prepared.recipient, step.source_zone(&job.source), config.first_contact.time_zone.as_deref());
    if let Some(quiet) = &config.first_contact.quiet_hours {
        if let Some(until) = quiet.times().ok().and_then(|q| quiet_until(cx.now, zone, q)) {
            report.not_before = Some(until);
            report.note = Some(format!(
                "scheduled: quiet hours in the lead's time zone ({zone}); sent at {}",
                until.with_timezone(&zone).format("%H:%M %Z")
            ));
            return Some(report);
        }
    }
    if let Some(limit) = config.max_lead_age() {
        let born = crate::model::lead_time(job.received_at, &job.payload);
        let quiet = config.first_contact.quiet_hours.as_ref().and_then(|q| q.times().ok());
        let age = cx.now - counts_from(born, cx.now, zone, quiet);
        if age > chrono::Duration::minutes(i64::try_from(limit).unwrap_or(i64::MAX / 60_000)) {
            if let Some(to) = &config.fallback {
                report.run_fallback = true;
                report.note = Some(format!(
                    "not sent: the lead is {} minutes old, older than the {limit} minutes an automatic first contact \
                     may be; running {to} instead",
                    age.num_minutes()
                ));
                return Some(report);
            }
            {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::PermanentData,
                    reason: format!(
                        "not sent: the lead is {} minutes old, older than the {limit} minutes an automatic first \
                         contact may be (name a fallback, such as a call task, to have it called instead)",
                        age.num_minutes()
                    ),
                    field: None,
                });
                return Some(report);
            }
        }
    }

    let message = ContactMessage {
        step_key: key.clone(),
        delivery_id: job.id,
        target: job.target.clone(),
        channel: step.channel().to_string(),
        recipient: prepared.recipient.clone(),
        status: ContactStatus::Sending,
        provider_id: None,
        error_code: None,
        sent_at: cx.now,
        generation: job.replay_generation,
    };
    if let Err(e) = cx.contacts.sending(&message).await {
        tracing::error!(error = %format!("{e:#}"), delivery_id = job.id, "cannot record the message before sending");
        return None;
    }
    let outcome = step.send(&prepared, &key, cx).await;
    let at = cx.now + chrono::Duration::milliseconds(started.elapsed().as_millis() as i64);
    let key_ref = key.as_str();
    let record = |status, id: Option<String>, code: Option<String>| async move {
        if let Err(e) = cx.contacts.answered(key_ref, status, id.as_deref(), code.as_deref(), at).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot record the provider's answer");
        }
    };
    match outcome {
        SendOutcome::Accepted { status, provider_id, excerpt } => {
            record(ContactStatus::Accepted, Some(provider_id.clone()), None).await;
            report.http_status = Some(status);
            report.excerpt = excerpt;
            report.note = Some(format!("accepted by {}", if step.channel() == "sms" { "Twilio" } else { "WhatsApp" }));
            report.crm_id = Some(provider_id);
        }
        SendOutcome::Refused { status, verdict, error_code, opted_out, excerpt } => {
            if opted_out {
                if let Err(e) = cx.contacts.opt_out(&prepared.recipient, &verdict.reason, at).await {
                    tracing::warn!(error = %format!("{e:#}"), "cannot record the opt-out");
                }
                record(ContactStatus::OptedOut, None, error_code).await;
                report.http_status = Some(status);
                report.excerpt = excerpt;
                report.note = Some("not sent: the number opted out of messages (STOP)".into());
            } else {
                record(ContactStatus::Refused, None, error_code).await;
                report.http_status = Some(status);
                report.excerpt = excerpt;
                step.refused(&mut report, &verdict);
            }
        }
        SendOutcome::NotSent(why) => {
            record(ContactStatus::Refused, None, None).await;
            report.verdict = Verdict::Failed(Failure {
                class: ErrorClass::Transient,
                reason: format!("could not connect to send the message: {why}"),
                field: None,
            });
        }
        SendOutcome::HeldBack => {
            // Nothing went out: the step goes back to the queue without using an attempt.
            record(ContactStatus::Refused, None, None).await;
            report.held_back = true;
        }
        SendOutcome::NoAnswer(why) => {
            // Its receipt may already be in (it carries the step's key): then the message is known to be out.
            if let Ok(Some(m)) = cx.contacts.message(&key).await {
                if m.status.went_out() {
                    report.crm_id = m.provider_id.clone();
                    report.note =
                        Some(format!("sent; its answer was lost ({why}), its receipt says {}", m.status.as_str()));
                    report.duration_ms = started.elapsed().as_millis() as i64;
                    return Some(report);
                }
            }
            // The message may be out: the record stays `sending`, and the next try waits for its receipt.
            report.in_doubt = true;
            report.verdict = Verdict::Failed(Failure {
                class: ErrorClass::Transient,
                reason: format!(
                    "sent, no answer ({why}): in doubt, not sent again until its receipt or a look-up says whether \
                     it went out"
                ),
                field: None,
            });
        }
    }
    report.duration_ms = started.elapsed().as_millis() as i64;
    Some(report)
}

/// What every first-contact step's settings must be, after its own section (`whatsapp::check`, `sms::check`): a
/// mapping that writes the recipient `to`, quiet hours and a time zone that read, a wait above zero.
pub fn check(key: &str, target: &TargetConfig) -> Result<(), crate::config::ConfigError> {
    fn invalid(key: impl Into<String>, message: impl Into<String>) -> crate::config::ConfigError {
        crate::config::ConfigError::invalid(key, message)
    }
    let writes_to = target.mapping.iter().any(|r| r.to == "to" || r.to == "/to");
    if !writes_to {
        return Err(invalid(
            format!("{key}.mapping"),
            "must write `to`, the lead's phone number (with phone_e164, so national numbers get a country)",
        ));
    }
    if let Some(q) = &target.first_contact.quiet_hours {
        q.times().map_err(|m| invalid(format!("{key}.first_contact.quiet_hours"), m))?;
    }
    if let Some(tz) = &target.first_contact.time_zone {
        if tz.parse::<chrono_tz::Tz>().is_err() {
            return Err(invalid(format!("{key}.first_contact.time_zone"), format!("`{tz}` is not a time zone")));
        }
    }
    if target.first_contact.in_doubt_minutes == 0 {
        return Err(invalid(format!("{key}.first_contact.in_doubt_minutes"), "must be greater than 0"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(status: ContactStatus, generation: i64) -> ContactMessage {
        ContactMessage {
            step_key: "web:1:hello".into(),
            delivery_id: 1,
            target: "hello".into(),
            channel: "whatsapp".into(),
            recipient: "+4915112345678".into(),
            status,
            provider_id: Some("wamid.1".into()),
            error_code: None,
            sent_at: Utc.with_ymd_and_hms(2026, 12, 5, 10, 0, 0).unwrap(),
            generation,
        }
    }

    #[test]
    fn a_message_that_went_out_is_never_sent_again_not_even_by_a_replay() {
        for status in [ContactStatus::Accepted, ContactStatus::Sent, ContactStatus::Delivered, ContactStatus::Read] {
            assert!(matches!(before_send(Some(&msg(status, 0)), 0), Before::WentOut(_)));
            assert!(matches!(before_send(Some(&msg(status, 0)), 3), Before::WentOut(_)), "replayed");
        }
        assert_eq!(before_send(None, 0), Before::Send);
        assert_eq!(before_send(Some(&msg(ContactStatus::Refused, 0)), 0), Before::Send);
    }

    #[test]
    fn a_send_in_doubt_waits_until_a_person_replays_it() {
        assert!(matches!(before_send(Some(&msg(ContactStatus::Sending, 0)), 0), Before::InDoubt(_)));
        assert_eq!(before_send(Some(&msg(ContactStatus::Sending, 0)), 1), Before::Send);
        assert!(matches!(before_send(Some(&msg(ContactStatus::Failed, 1)), 1), Before::Failed(_)));
        assert_eq!(before_send(Some(&msg(ContactStatus::Failed, 1)), 2), Before::Send);
        assert!(matches!(before_send(Some(&msg(ContactStatus::OptedOut, 0)), 5), Before::OptedOut(_)));
    }

    #[test]
    fn in_doubt_looks_again_until_the_limit_then_asks_a_person() {
        let sent = Utc.with_ymd_and_hms(2026, 12, 5, 10, 0, 0).unwrap();
        let m = chrono::Duration::minutes;
        assert_eq!(in_doubt_step(sent, sent + m(1), 30), DoubtStep::WaitUntil(sent + m(1) + RECHECK));
        assert_eq!(
            in_doubt_step(sent, sent + m(30) - chrono::Duration::seconds(10), 30),
            DoubtStep::WaitUntil(sent + m(30))
        );
        assert_eq!(in_doubt_step(sent, sent + m(30), 30), DoubtStep::AskPerson);
    }

    #[test]
    fn quiet_hours_hold_until_the_morning_in_the_leads_zone() {
        let q = (NaiveTime::from_hms_opt(21, 0, 0).unwrap(), NaiveTime::from_hms_opt(8, 0, 0).unwrap());
        let berlin = chrono_tz::Europe::Berlin;
        // 22:30 UTC on 5 Dec is 23:30 in Berlin: held until 08:00 Berlin the next day (07:00 UTC).
        let late = Utc.with_ymd_and_hms(2026, 12, 5, 22, 30, 0).unwrap();
        assert_eq!(quiet_until(late, berlin, q), Some(Utc.with_ymd_and_hms(2026, 12, 6, 7, 0, 0).unwrap()));
        // 05:00 UTC is 06:00 in Berlin: held until 08:00 the same day.
        let early = Utc.with_ymd_and_hms(2026, 12, 6, 5, 0, 0).unwrap();
        assert_eq!(quiet_until(early, berlin, q), Some(Utc.with_ymd_and_hms(2026, 12, 6, 7, 0, 0).unwrap()));
        // 12:00 is fine; so is 20:59.
        assert_eq!(quiet_until(Utc.with_ymd_and_hms(2026, 12, 6, 11, 0, 0).unwrap(), berlin, q), None);
        assert_eq!(quiet_until(Utc.with_ymd_and_hms(2026, 12, 6, 19, 59, 0).unwrap(), berlin, q), None);
        // The same instant is daytime in New York.
        assert_eq!(quiet_until(late, chrono_tz::America::New_York, q), None);
        // Quiet hours within a day (12:00–13:00).
        let lunch = (NaiveTime::from_hms_opt(12, 0, 0).unwrap(), NaiveTime::from_hms_opt(13, 0, 0).unwrap());
        let noon = Utc.with_ymd_and_hms(2026, 12, 6, 11, 30, 0).unwrap();
        assert_eq!(quiet_until(noon, berlin, lunch), Some(Utc.with_ymd_and_hms(2026, 12, 6, 12, 0, 0).unwrap()));
    }

    #[test]
    fn a_lead_held_by_quiet_hours_ages_from_the_morning() {
        let q = (NaiveTime::from_hms_opt(21, 0, 0).unwrap(), NaiveTime::from_hms_opt(8, 0, 0).unwrap());
        let berlin = chrono_tz::Europe::Berlin;
        let night = Utc.with_ymd_and_hms(2026, 12, 5, 22, 30, 0).unwrap();
        let morning = Utc.with_ymd_and_hms(2026, 12, 6, 7, 0, 0).unwrap();
        assert_eq!(counts_from(night, morning + chrono::Duration::minutes(5), berlin, Some(q)), morning);
        assert_eq!(counts_from(night, morning - chrono::Duration::minutes(5), berlin, Some(q)), night);
        assert_eq!(counts_from(night, morning, berlin, None), night);
        let noon = Utc.with_ymd_and_hms(2026, 12, 6, 11, 0, 0).unwrap();
        assert_eq!(counts_from(noon, noon + chrono::Duration::hours(2), berlin, Some(q)), noon);
    }

    #[test]
    fn the_zone_comes_from_the_setting_or_the_country_code() {
        assert_eq!(zone_of("+4915112345678", None), chrono_tz::Europe::Berlin);
        assert_eq!(zone_of("+35121000000", None), chrono_tz::Europe::Lisbon);
        assert_eq!(zone_of("+12125550100", None), chrono_tz::America::New_York);
        assert_eq!(zone_of("+4915112345678", Some("America/Chicago")), chrono_tz::America::Chicago);
        assert_eq!(zone_of("+99912345678", None), chrono_tz::UTC);
    }

    #[test]
    fn the_sources_zone_comes_before_the_steps_and_the_country_codes() {
        assert_eq!(
            lead_zone("+4915112345678", Some("Europe/Madrid"), Some("America/Chicago")),
            chrono_tz::Europe::Madrid
        );
        assert_eq!(lead_zone("+4915112345678", None, Some("America/Chicago")), chrono_tz::America::Chicago);
        assert_eq!(lead_zone("+4915112345678", None, None), chrono_tz::Europe::Berlin);
        assert_eq!(lead_zone("+4915112345678", Some("Mars/Olympus"), None), chrono_tz::Europe::Berlin);
    }

    #[test]
    fn bodies_are_rendered_from_the_record_and_a_missing_field_is_the_leads() {
        let record: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"first_name": "Ada", "n": 3, "blank": " "})).unwrap();
        assert_eq!(render("Hi {first_name}, {n} {{ok}}", &record).unwrap(), "Hi Ada, 3 {ok}");
        let f = render("Hi {blank}", &record).unwrap_err();
        assert_eq!((f.class, f.field.as_deref()), (ErrorClass::PermanentData, Some("blank")));
        assert!(!f.reason.contains("Ada"));
    }

    #[test]
    fn the_recipient_must_be_international() {
        let rec = |to: &str| -> Map<String, Value> { serde_json::from_value(serde_json::json!({"to": to})).unwrap() };
        assert_eq!(recipient(&rec("+4915112345678")).unwrap(), "+4915112345678");
        for bad in ["015112345678", "+49 151", "+49abc12345678", ""] {
            let f = recipient(&rec(bad)).unwrap_err();
            assert_eq!(f.class, ErrorClass::PermanentData, "{bad}");
        }
    }
}
