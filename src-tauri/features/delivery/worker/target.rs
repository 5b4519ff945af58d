//! A target as the worker sees it ([`TargetRuntime`]): its connector (held only through the
//! [`Connector`](crate::features::targets::Connector) trait), its breaker, its pacer and hold, its concurrency
//! slots, a person's pause; and the set of them in force ([`TargetSet`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, Utc};
use reqwest::header::HeaderMap;
use tokio::sync::Semaphore;

use crate::clock::Clock;
use crate::config::{Config, TargetConfig};
use crate::features::delivery::breaker::{Breaker, BreakerState, TeamBreaker};
use crate::features::delivery::pacing::Pacer;
use crate::features::targets::{connector_for, AnswerWatch, ConnectionCheck, Connector, RequestPreview};
use crate::model::{Failure, Hold, HoldReason, Job};
use crate::store::TargetControl;

/// A target as the worker sees it: how to reach it, its breaker, its concurrency slots.
pub struct TargetRuntime {
    name: String,
    /// How to reach it, with the credentials read at start or at the last reload of secrets.
    connector: RwLock<Arc<dyn Connector>>,
    /// The clock its connector reads the time on (kept for rebuilding it at a reload of secrets).
    pub(super) clock: Clock,
    config: TargetConfig,
    pub(super) breaker: Mutex<Breaker>,
    pub(super) slots: Arc<Semaphore>,
    /// An operator paused this target: nothing is claimed for it until resumed.
    paused: AtomicBool,
    /// Nothing is claimed for this target before the hold's time: every worker task respects it, so a target
    /// that said "come back at 10:42" gets no request before 10:42 from any lead. (The pacer holds too, from the
    /// answers' headers; this one carries the reason a person reads.)
    hold: Mutex<Option<Hold>>,
    /// The credential this target last refused, until a request with it succeeds again.
    pub(super) refused_credential: Mutex<Option<String>>,
    /// Why this target last refused its own setup (a first contact's template, region), until a lead goes
    /// through again.
    pub(super) refused_setup: Mutex<Option<String>>,
    /// When the credentials were last read again (a reload of secrets): a refusal of a request sent before then
    /// answered the credential that was replaced, and holds nothing.
    credentials_read_at: Mutex<Option<DateTime<Utc>>>,
    /// The target's request budget: the declared rate, what its answers say, its holds, and how many requests may
    /// be in flight (lowered on 429s).
    pub(super) pacer: Mutex<Pacer>,
    /// The latest request slot reserved from the pacer (slots are reserved in time order, up to
    /// `PACE_HORIZON` ahead).
    pub(super) pace_cursor: Mutex<Option<DateTime<Utc>>>,
    /// Requests claimed and not finished: sending, or waiting for their slot or a connection.
    pub(super) outstanding: AtomicU32,
    /// Team mode: the latest hold this process told the team about (a later one is told again).
    told_hold: Mutex<Option<DateTime<Utc>>>,
}

impl TargetRuntime {
    pub fn new(name: &str, config: &TargetConfig, all: &Config, clock: Clock) -> anyhow::Result<TargetRuntime> {
        Ok(TargetRuntime {
            name: name.to_string(),
            connector: RwLock::new(connector_for(name, config, all, clock.clone())?),
            clock,
            config: config.clone(),
            breaker: Mutex::new(Breaker::default()),
            slots: Arc::new(Semaphore::new(config.concurrency as usize)),
            paused: AtomicBool::new(false),
            hold: Mutex::new(None),
            refused_credential: Mutex::new(None),
            refused_setup: Mutex::new(None),
            credentials_read_at: Mutex::new(None),
            pacer: Mutex::new(Pacer::new(config.rate, config.concurrency)),
            pace_cursor: Mutex::new(None),
            outstanding: AtomicU32::new(0),
            told_hold: Mutex::new(None),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn config(&self) -> &TargetConfig {
        &self.config
    }

    /// How the target is spoken to now (a reload of secrets may replace it between two requests).
    pub fn connector(&self) -> Arc<dyn Connector> {
        self.connector.read().expect("connector lock").clone()
    }

    /// Reads this target's credentials again (secrets file, then environment) and uses them from the next request
    /// on. A target that was refusing its credential is let through at once (its hold ends, one lead probes the
    /// new credential). On error (a secret missing, not a valid header value) the target keeps what it had.
    /// Returns whether the target was refusing its credential.
    pub fn reload(&self, all: &Config) -> anyhow::Result<bool> {
        let connector = connector_for(&self.name, &self.config, all, self.clock.clone())?;
        *self.connector.write().expect("connector lock") = connector;
        *self.credentials_read_at.lock().expect("credentials lock") = Some(self.clock.now());
        let refusing = self.refused_credential().is_some();
        let mut hold = self.hold.lock().expect("hold lock");
        if matches!(hold.as_ref(), Some(Hold { reason: HoldReason::Credentials { .. }, .. })) {
            *hold = None;
            self.pacer.lock().expect("pacer lock").release_hold();
        }
        Ok(refusing)
    }

    /// The hold in force at `now`, if any: this target's own, what its answers' headers said (the pacer's), or
    /// one its connector shares beyond it (Graph's, for a `meta_lead` step).
    pub fn hold(&self, now: DateTime<Utc>) -> Option<Hold> {
        let own = self.hold.lock().expect("hold lock").clone().filter(|h| h.until > now);
        let paced = self.pacer.lock().expect("pacer lock").held_until(now);
        let shared = self.connector().held_until(now);
        let other = paced.max(shared);
        match (own, other) {
            (Some(h), Some(g))
                if g > h.until && !matches!(h.reason, HoldReason::Credentials { .. } | HoldReason::Setup { .. }) =>
            {
                Some(Hold { until: g, reason: HoldReason::RateLimited })
            }
            (Some(h), _) => Some(h),
            (None, Some(g)) => Some(Hold { until: g, reason: HoldReason::RateLimited }),
            (None, None) => None,
        }
    }

    /// Holds the target until `until` (a shorter hold never cuts a longer one short). The pacer holds with it, so
    /// that a request claimed before the hold is not sent after it, and one request tests the water when it ends.
    pub fn hold_until(&self, until: DateTime<Utc>, reason: HoldReason) {
        let mut hold = self.hold.lock().expect("hold lock");
        if hold.as_ref().is_none_or(|h| h.until < until) {
            *hold = Some(Hold { until, reason });
        }
        self.pacer.lock().expect("pacer lock").hold(self.clock.now(), until);
    }

    /// How many requests may be in flight now, and the rate paced to (for the Targets page).
    pub fn pace(&self) -> (u32, Option<String>) {
        let pacer = self.pacer.lock().expect("pacer lock");
        (pacer.concurrency(), pacer.effective_rate().map(|r| r.to_string()))
    }

    /// The daily allowance as the target last reported it: `(used, limit)`.
    pub fn daily_usage(&self) -> Option<(u64, u64)> {
        self.pacer.lock().expect("pacer lock").daily_usage()
    }

    /// Whether a request started at `started_at` may have gone out with credentials a reload of secrets has
    /// replaced since. A report's start is read before its connector, so a request started after the reload
    /// surely carried the new credentials; one started before may have carried either (at worst, a refusal of the
    /// new one is sent once more before it holds the target).
    pub(super) fn sent_with_replaced_credentials(&self, started_at: DateTime<Utc>) -> bool {
        self.credentials_read_at.lock().expect("credentials lock").is_some_and(|read_at| started_at < read_at)
    }

    /// The credential this target refused and that has not worked since.
    pub fn refused_credential(&self) -> Option<String> {
        self.refused_credential.lock().expect("credential lock").clone()
    }

    /// Why this target refused its own setup, if it has not sent a lead since.
    pub fn refused_setup(&self) -> Option<String> {
        self.refused_setup.lock().expect("setup lock").clone()
    }

    /// The request this target would send for `job` (a dry run: nothing is sent).
    pub fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        self.connector().preview(job)
    }

    /// Test connection: one harmless authenticated request, in plain words.
    pub async fn check(&self) -> ConnectionCheck {
        self.connector().check().await
    }

    /// Most leads one request to this target carries, for a connector that sends several at once (HubSpot's
    /// batch upsert); `None`: one lead per request.
    pub fn batch_capacity(&self) -> Option<usize> {
        Some(self.connector().batch_capacity()).filter(|n| *n > 1)
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    pub fn breaker_state(&self) -> (BreakerState, Option<DateTime<Utc>>) {
        let b = self.breaker.lock().expect("breaker lock");
        (b.state(), b.opened_at())
    }

    /// Team mode: takes the team's control state of this target — its pause, its hold, its breaker (see
    /// [`Breaker::adopt`]; `force` when this process's own move of the breaker lost). `stale_after`: how long a
    /// probe may be under way before its process is taken for dead.
    pub fn follow(
        &self,
        control: Option<&TargetControl>,
        paused: bool,
        now: DateTime<Utc>,
        stale_after: chrono::Duration,
        force: bool,
    ) {
        self.set_paused(paused);
        let Some(c) = control else { return };
        if let Some(until) = c.hold_until.filter(|u| *u > now) {
            let reason = match &c.hold_credential {
                Some(credential) => HoldReason::Credentials { credential: credential.clone() },
                None => HoldReason::RateLimited,
            };
            self.hold_until(until, reason);
            let mut told = self.told_hold.lock().expect("told hold lock");
            *told = (*told).max(Some(until));
        }
        let team = TeamBreaker {
            state: c.breaker,
            opened_at: c.opened_at,
            changed_at: c.changed_at,
            stale: c.breaker == BreakerState::HalfOpen && c.changed_at + stale_after < now,
        };
        self.breaker.lock().expect("breaker lock").adopt(team, now, &self.config.breaker, force);
    }

    /// Team mode: whether `until` is a hold the team has not heard of from this process (and notes it as told).
    pub(super) fn hold_to_tell(&self, until: DateTime<Utc>) -> bool {
        let mut told = self.told_hold.lock().expect("told hold lock");
        if told.is_some_and(|t| t >= until) {
            return false;
        }
        *told = Some(until);
        true
    }

    /// What this target's requests are claimed under now (see [`SendTerms`]).
    pub(super) fn send_terms(&self) -> SendTerms {
        let breaker = self.breaker.lock().expect("breaker lock").state();
        let pacer = self.pacer.lock().expect("pacer lock");
        SendTerms {
            paused: self.is_paused(),
            breaker,
            paced: pacer.effective_rate().is_some(),
            concurrency: pacer.concurrency(),
            holds: pacer.holds(),
        }
    }
}

impl TargetRuntime {
    /// The pacer's watch over one request let through now (see [`RequestWatch`]).
    pub(super) fn watch_request(&self) -> RequestWatch<'_> {
        RequestWatch { target: self, holds: self.pacer.lock().expect("pacer lock").holds() }
    }
}

/// The pacer's watch over one request (or the few requests of one attempt) after it was let through.
///
/// It hears each answer the moment its status and headers arrive, before the body is read: a `Retry-After` (on a
/// 429 or a 503), a used-up window or a daily allowance holds the whole target at once. And just before each
/// request leaves, it says whether the request still may: not if a hold came since it was let through (another
/// request's answer, while this one read a link from the store or waited for a session) or one is in force — the
/// request stays unsent and its lead waits for the hold without using an attempt, so nothing reaches the target
/// inside a wait it announced but what was already on its way.
pub(super) struct RequestWatch<'a> {
    target: &'a TargetRuntime,
    /// The pacer's count of holds when the request was let through.
    holds: u64,
}

impl RequestWatch<'_> {
    /// The pacer's count of holds when the request was let through.
    pub(super) fn holds(&self) -> u64 {
        self.holds
    }
}

impl AnswerWatch for RequestWatch<'_> {
    fn answered(&self, status: u16, headers: &HeaderMap) {
        let target = self.target;
        let hints = target.connector().pacing_hints();
        let Ok(status) = reqwest::StatusCode::from_u16(status) else { return };
        target.pacer.lock().expect("pacer lock").learn(target.clock.now(), status, headers, &hints);
    }

    fn clear_to_send(&self) -> bool {
        let target = self.target;
        let holds = target.pacer.lock().expect("pacer lock").holds();
        holds == self.holds && target.hold(target.clock.now()).is_none()
    }
}

/// What a target's requests are claimed under, read again just before each is sent: a request claimed ahead (it
/// waited for its slot or a connection) goes out only if nothing that decides sending changed meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SendTerms {
    pub paused: bool,
    pub breaker: BreakerState,
    /// Whether a rate (declared, learned or a daily cap) paces the target.
    pub paced: bool,
    /// How many requests may be in flight (halved by a 429).
    pub concurrency: u32,
    /// How many holds the pacer has imposed so far: a request claimed before a hold is never sent after it (when
    /// the hold ends, one request tests the water first).
    pub holds: u64,
}

impl SendTerms {
    /// Whether a request claimed under `self` may be sent under `now`: not paused, the breaker where it was (a
    /// breaker that opened lets nothing through, and a probe goes alone), the same pacing, no fewer connections
    /// (a 429 halved them) and no hold since. More connections (a run of successes) change nothing.
    pub fn still_hold(self, now: SendTerms) -> bool {
        !now.paused
            && now.breaker == self.breaker
            && now.paced == self.paced
            && now.concurrency >= self.concurrency
            && now.holds == self.holds
    }
}

/// The worker's targets, swapped whole when the configuration changes: each pass over the targets reads the set
/// in force, while a job already sent keeps the runtime it was sent with (its task holds it) and finishes there.
#[derive(Clone, Default)]
pub struct TargetSet(Arc<RwLock<Arc<TargetMap>>>);

/// Each configured target's runtime, by name.
pub type TargetMap = BTreeMap<String, Arc<TargetRuntime>>;

impl TargetSet {
    pub(super) fn new(targets: TargetMap) -> TargetSet {
        TargetSet(Arc::new(RwLock::new(Arc::new(targets))))
    }

    /// The targets in force now.
    pub fn current(&self) -> Arc<TargetMap> {
        self.0.read().expect("targets lock").clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<TargetRuntime>> {
        self.current().get(name).cloned()
    }

    pub(super) fn replace(&self, targets: TargetMap) {
        *self.0.write().expect("targets lock") = Arc::new(targets);
    }
}

/// Builds one runtime per configured target.
pub(super) fn build_targets(config: &Config, clock: &Clock) -> anyhow::Result<TargetMap> {
    let mut targets = BTreeMap::new();
    for (name, tc) in &config.targets {
        targets.insert(name.clone(), Arc::new(TargetRuntime::new(name, tc, config, clock.clone())?));
    }
    Ok(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAIMED: SendTerms =
        SendTerms { paused: false, breaker: BreakerState::Closed, paced: false, concurrency: 8, holds: 0 };

    #[test]
    fn a_request_claimed_ahead_goes_out_only_under_the_terms_it_was_claimed_under() {
        assert!(CLAIMED.still_hold(CLAIMED));
        // A run of successes raised the connections: nothing that stops sending.
        assert!(CLAIMED.still_hold(SendTerms { concurrency: 9, ..CLAIMED }));
        // Each of these sends it back to the queue unsent.
        assert!(!CLAIMED.still_hold(SendTerms { paused: true, ..CLAIMED }));
        assert!(!CLAIMED.still_hold(SendTerms { breaker: BreakerState::Open, ..CLAIMED }));
        assert!(!CLAIMED.still_hold(SendTerms { breaker: BreakerState::HalfOpen, ..CLAIMED }));
        assert!(!CLAIMED.still_hold(SendTerms { paced: true, ..CLAIMED }));
        assert!(!CLAIMED.still_hold(SendTerms { concurrency: 4, ..CLAIMED }));
        // A hold came (and maybe went) while it waited: it is not sent after it; the next claim probes.
        assert!(!CLAIMED.still_hold(SendTerms { holds: 1, ..CLAIMED }));
        // A probe (claimed half-open) goes while the breaker still waits for it.
        let probe = SendTerms { breaker: BreakerState::HalfOpen, ..CLAIMED };
        assert!(probe.still_hold(probe));
        assert!(!probe.still_hold(SendTerms { breaker: BreakerState::Closed, ..probe }));
    }
}
