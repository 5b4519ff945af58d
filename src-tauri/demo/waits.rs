//! A ledger of the waits a mock announced: every `Retry-After` it gave, and the requests that arrived inside one.
//! Every mock (the generic CRM, the Graph API, HubSpot, Salesforce, Pipedrive) keeps one for its API, so a test can
//! prove that a connector honours a wait, and a benchmark can count what a target accepted and refused.
//!
//! A mock puts its API's routes behind [`WaitLedger::layer`]: each request is logged when it arrives and when it is
//! answered. An answer `429` or `503` with `Retry-After` — seconds or an HTTP date — **announces a wait**, from
//! the moment it was answered until the time it names (a mock may announce a wait in other words, HubSpot's
//! rate-limit window, with the [`Announced`] extension on its answer). A request that arrives inside a wait is
//! counted against it:
//!
//! - **on the wire** when it arrived within [`ON_THE_WIRE`] of that answer: the client had sent it before it could
//!   have read the answer (a connection's worth of requests in flight);
//! - **later** otherwise: the client sent it when it could have known. A connector that honours waits has none.
//!
//! [`WaitLedger::reopenings`] says how each wait ended: the first request after it, and whether the next request
//! waited for that one's answer (after a wait, one request tests the water before the rest).
//!
//! The counting itself is pure ([`WaitLedger::arrive_at`], [`WaitLedger::answer_at`] take the time); only the layer
//! reads the wall clock.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

/// A request that arrives this soon after the answer announcing a wait was on its way before the client could read
/// that answer.
pub const ON_THE_WIRE: TimeDelta = TimeDelta::milliseconds(50);

/// A wait a mock announced without `Retry-After` (HubSpot's secondly window: "none left for one interval"): put on an
/// answer's extensions, the ledger counts it like a `Retry-After`.
#[derive(Debug, Clone, Copy)]
pub struct Announced(pub DateTime<Utc>);

/// One request as the ledger saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Arrival {
    /// `METHOD /path`.
    pub what: String,
    pub arrived_at: DateTime<Utc>,
    /// When its answer left the mock (`None` while it is being answered).
    pub answered_at: Option<DateTime<Utc>>,
    pub status: Option<u16>,
}

/// One announced wait and the requests that arrived inside it.
#[derive(Debug, Clone, Serialize)]
pub struct Wait {
    /// When the answer announcing it left the mock.
    pub announced_at: DateTime<Utc>,
    /// The end it named.
    pub until: DateTime<Utc>,
    /// The status of the answer that announced it.
    pub status: u16,
    /// `Retry-After` as sent (`"2"`, `"Tue, 01 Dec 2026 10:00:03 GMT"`), or what else announced it.
    pub said: String,
    pub on_the_wire: u64,
    pub later: u64,
}

/// Requests that arrived inside announced waits, each request counted once: later if it was later for any wait it
/// arrived in, else on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Inside {
    /// Waits announced so far.
    pub waits: u64,
    pub on_the_wire: u64,
    pub later: u64,
}

impl Inside {
    /// Every request that arrived inside a wait.
    pub fn total(&self) -> u64 {
        self.on_the_wire + self.later
    }
}

/// Every wait honoured (see [`WaitLedger::verdict`]): the counts, for the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Honoured {
    pub inside: Inside,
    /// Waits (overlapping ones taken together) that ended with one request alone.
    pub reopenings: usize,
}

impl std::fmt::Display for Honoured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} waits announced; inside them {} requests already on the wire, {} later; {} ends of a wait, each \
             followed by one request alone",
            self.inside.waits, self.inside.on_the_wire, self.inside.later, self.reopenings
        )
    }
}

/// How a wait (overlapping waits taken together) ended: the first request after it and the one after that.
#[derive(Debug, Clone, Serialize)]
pub struct Reopening {
    /// The end of the wait (the latest end of the overlapping ones).
    pub ended: DateTime<Utc>,
    pub first: Arrival,
    pub next: Option<Arrival>,
}

impl Reopening {
    /// Whether the first request after the wait went alone: the next one arrived only after its answer.
    pub fn alone(&self) -> bool {
        match (&self.next, self.first.answered_at) {
            (None, _) => true,
            (Some(next), Some(answered)) => next.arrived_at >= answered,
            (Some(_), None) => false,
        }
    }
}

#[derive(Default)]
struct Book {
    requests: Vec<Arrival>,
    waits: Vec<Wait>,
    inside: Inside,
    /// Requests and waits forgotten by [`WaitLedger::forget_old`] (the demo's long runs).
    forgotten_requests: usize,
}

/// The ledger of one API's waits. Cloning shares it.
#[derive(Clone, Default)]
pub struct WaitLedger {
    book: Arc<Mutex<Book>>,
}

/// Which request of the ledger an answer belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Ticket(usize);

impl WaitLedger {
    /// Wraps a router's routes: every request is logged on arrival and answer (see the module documentation).
    pub fn layer<S: Clone + Send + Sync + 'static>(&self, router: axum::Router<S>) -> axum::Router<S> {
        router.layer(axum::middleware::from_fn_with_state(self.clone(), watch))
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().expect("wait ledger lock")
    }

    /// A request arrived at `at` (arrivals must be given in order): counted against every wait it is inside.
    pub fn arrive_at(&self, at: DateTime<Utc>, what: &str) -> Ticket {
        let mut book = self.book();
        let mut inside = false;
        let mut later = false;
        for wait in book.waits.iter_mut().filter(|w| w.announced_at <= at && at < w.until) {
            inside = true;
            if at - wait.announced_at <= ON_THE_WIRE {
                wait.on_the_wire += 1;
            } else {
                wait.later += 1;
                later = true;
            }
        }
        match (inside, later) {
            (true, true) => book.inside.later += 1,
            (true, false) => book.inside.on_the_wire += 1,
            _ => {}
        }
        book.requests.push(Arrival { what: what.to_string(), arrived_at: at, answered_at: None, status: None });
        Ticket(book.forgotten_requests + book.requests.len() - 1)
    }

    /// The request of `ticket` was answered at `at` with `status` and `headers`: a `429` or `503` with a readable
    /// `Retry-After`, or an `announced` end, starts a wait.
    pub fn answer_at(
        &self,
        ticket: Ticket,
        at: DateTime<Utc>,
        status: u16,
        headers: &HeaderMap,
        announced: Option<Announced>,
    ) {
        let mut book = self.book();
        if let Some(index) = ticket.0.checked_sub(book.forgotten_requests) {
            if let Some(request) = book.requests.get_mut(index) {
                request.answered_at = Some(at);
                request.status = Some(status);
            }
        }
        let said = headers.get("retry-after").and_then(|v| v.to_str().ok()).filter(|_| matches!(status, 429 | 503));
        let named = said.and_then(|s| named_end(s, at)).map(|until| (until, said.unwrap_or_default().to_string()));
        let wait = named.or(announced.map(|Announced(until)| (until, "(announced in other headers)".to_string())));
        if let Some((until, said)) = wait.filter(|(until, _)| *until > at) {
            book.inside.waits += 1;
            book.waits.push(Wait { announced_at: at, until, status, said, on_the_wire: 0, later: 0 });
        }
    }

    /// The requests inside announced waits so far.
    pub fn inside(&self) -> Inside {
        self.book().inside
    }

    /// Every wait announced (since the last [`WaitLedger::forget_old`]), in order.
    pub fn waits(&self) -> Vec<Wait> {
        self.book().waits.clone()
    }

    /// Every request (since the last [`WaitLedger::forget_old`]), in the order they arrived.
    pub fn requests(&self) -> Vec<Arrival> {
        self.book().requests.clone()
    }

    /// How each wait ended (overlapping waits taken as one): the first request that arrived at or after its end and
    /// the next one. A wait nothing arrived after has none yet.
    pub fn reopenings(&self) -> Vec<Reopening> {
        let book = self.book();
        let mut spans: Vec<(DateTime<Utc>, DateTime<Utc>)> =
            book.waits.iter().map(|w| (w.announced_at, w.until)).collect();
        spans.sort();
        let mut ends: Vec<DateTime<Utc>> = Vec::new();
        let mut current: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
        for (from, until) in spans {
            current = match current {
                Some((start, end)) if from <= end => Some((start, end.max(until))),
                Some((_, end)) => {
                    ends.push(end);
                    Some((from, until))
                }
                None => Some((from, until)),
            };
        }
        ends.extend(current.map(|(_, end)| end));
        ends.into_iter()
            .filter_map(|ended| {
                let i = book.requests.iter().position(|r| r.arrived_at >= ended)?;
                Some(Reopening { ended, first: book.requests[i].clone(), next: book.requests.get(i + 1).cloned() })
            })
            .collect()
    }

    /// Whether every wait was honoured: no request arrived later inside one, and after each, the first request went
    /// alone. The counts, or what went wrong: each wait with a request later inside it, each crowded reopening.
    pub fn verdict(&self) -> Result<Honoured, String> {
        let inside = self.inside();
        let reopenings = self.reopenings();
        let mut faults: Vec<String> = Vec::new();
        for wait in self.waits().iter().filter(|w| w.later > 0) {
            faults.push(format!("{} requests arrived later inside {wait:?}", wait.later));
        }
        for r in reopenings.iter().filter(|r| !r.alone()) {
            faults.push(format!(
                "after the wait that ended at {}, {:?} did not go alone: {:?}",
                r.ended, r.first, r.next
            ));
        }
        if inside.later > 0 && faults.is_empty() {
            faults.push(format!("{} requests arrived later inside waits forgotten since", inside.later));
        }
        match faults.is_empty() {
            true => Ok(Honoured { inside, reopenings: reopenings.len() }),
            false => Err(faults.join("\n")),
        }
    }

    /// For the demo, which runs for days: forgets all but the newest `keep` requests and the waits that ended before
    /// the oldest of them. The counts go on.
    pub fn forget_old(&self, keep: usize) {
        let mut book = self.book();
        let excess = book.requests.len().saturating_sub(keep);
        if excess == 0 {
            return;
        }
        book.requests.drain(..excess);
        book.forgotten_requests += excess;
        if let Some(oldest) = book.requests.first().map(|r| r.arrived_at) {
            book.waits.retain(|w| w.until > oldest);
        }
    }
}

/// The end a `Retry-After` names for an answer given at `at`: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
fn named_end(value: &str, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u32>() {
        return Some(at + TimeDelta::seconds(i64::from(seconds)));
    }
    httpdate::parse_http_date(value).ok().map(DateTime::<Utc>::from)
}

/// The ledger's middleware: logs the request on arrival and its answer when it leaves.
async fn watch(State(ledger): State<WaitLedger>, request: Request, next: Next) -> Response {
    let what = format!("{} {}", request.method(), request.uri().path());
    let ticket = ledger.arrive_at(Utc::now(), &what);
    let response = next.run(request).await;
    let announced = response.extensions().get::<Announced>().copied();
    ledger.answer_at(ticket, Utc::now(), response.status().as_u16(), response.headers(), announced);
    response
}

/// A mock refusing every request for a while: `status` (`429` or `503`) with `Retry-After` until `until`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub until: DateTime<Utc>,
    pub form: RetryAfterForm,
}

/// How a [`Refusal`] says when to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfterForm {
    /// `Retry-After: <n>`, the same on every answer (a wait shorter than the refusal is met by another refusal).
    Seconds(u32),
    /// `Retry-After: <HTTP date>`: the end of the refusal, rounded up to the next whole second (a date has whole
    /// seconds).
    Date,
}

impl Refusal {
    /// Refuses for `lasting` from now, saying `Retry-After: <seconds>`.
    pub fn seconds(status: u16, seconds: u32, lasting: std::time::Duration) -> Refusal {
        let lasting = TimeDelta::from_std(lasting).unwrap_or(TimeDelta::zero());
        Refusal { status, until: Utc::now() + lasting, form: RetryAfterForm::Seconds(seconds) }
    }

    /// Refuses until `until`, saying so as an HTTP date.
    pub fn until_date(status: u16, until: DateTime<Utc>) -> Refusal {
        Refusal { status, until, form: RetryAfterForm::Date }
    }

    /// The `Retry-After` to answer with at `now`, while the refusal lasts.
    pub fn retry_after(&self, now: DateTime<Utc>) -> Option<String> {
        if now >= self.until {
            return None;
        }
        Some(match self.form {
            RetryAfterForm::Seconds(n) => n.to_string(),
            RetryAfterForm::Date => {
                let next_second = self.until + TimeDelta::seconds(1);
                httpdate::fmt_http_date(std::time::SystemTime::from(next_second))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z").unwrap().to_utc() + TimeDelta::milliseconds(ms)
    }

    fn retry_after(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("retry-after", value.parse().unwrap());
        h
    }

    /// A request and its answer.
    fn exchange(ledger: &WaitLedger, arrived: i64, answered: i64, status: u16, headers: &HeaderMap) {
        let ticket = ledger.arrive_at(t(arrived), "POST /x");
        ledger.answer_at(ticket, t(answered), status, headers, None);
    }

    #[test]
    fn requests_inside_a_wait_are_on_the_wire_or_later() {
        let ledger = WaitLedger::default();
        let none = HeaderMap::new();
        exchange(&ledger, 0, 10, 503, &retry_after("1"));
        // Sent before its client could read the 503: on the wire.
        exchange(&ledger, 40, 45, 503, &retry_after("1"));
        // Sent 300 ms after the first 503 (inside both waits, on the wire of neither): later, counted once.
        exchange(&ledger, 310, 320, 200, &none);
        // After both waits.
        exchange(&ledger, 1_100, 1_110, 200, &none);
        assert_eq!(ledger.inside(), Inside { waits: 2, on_the_wire: 1, later: 1 });
        let waits = ledger.waits();
        assert_eq!((waits[0].until, waits[0].on_the_wire, waits[0].later), (t(1_010), 1, 1));
        assert_eq!((waits[1].until, waits[1].on_the_wire, waits[1].later), (t(1_045), 0, 1));
    }

    #[test]
    fn a_retry_after_date_names_the_end_and_only_429_and_503_announce() {
        let ledger = WaitLedger::default();
        exchange(&ledger, 0, 0, 429, &retry_after("Tue, 01 Dec 2026 10:00:02 GMT"));
        exchange(&ledger, 1_500, 1_500, 200, &HeaderMap::new());
        // A Retry-After on another status, an unreadable one, a date already past: no wait.
        exchange(&ledger, 2_500, 2_500, 301, &retry_after("5"));
        exchange(&ledger, 2_600, 2_600, 503, &retry_after("soon"));
        exchange(&ledger, 2_700, 2_700, 503, &retry_after("Tue, 01 Dec 2026 09:00:00 GMT"));
        exchange(&ledger, 2_800, 2_800, 200, &HeaderMap::new());
        assert_eq!(ledger.inside(), Inside { waits: 1, on_the_wire: 0, later: 1 });
        assert_eq!(ledger.waits()[0].until, t(2_000));
        // Another announcement counts like a Retry-After.
        let ticket = ledger.arrive_at(t(3_000), "POST /x");
        ledger.answer_at(ticket, t(3_000), 429, &HeaderMap::new(), Some(Announced(t(3_700))));
        exchange(&ledger, 3_020, 3_020, 429, &HeaderMap::new());
        assert_eq!(ledger.inside(), Inside { waits: 2, on_the_wire: 1, later: 1 });
    }

    #[test]
    fn a_reopening_is_alone_when_the_next_request_waits_for_the_first_answer() {
        let ledger = WaitLedger::default();
        let none = HeaderMap::new();
        // Two overlapping waits end at 1,005 as one.
        exchange(&ledger, 0, 0, 503, &retry_after("1"));
        exchange(&ledger, 3, 5, 503, &retry_after("1"));
        // The first request after them is answered 503 again at 1,020; the next one comes after it, alone too.
        exchange(&ledger, 1_010, 1_020, 503, &retry_after("1"));
        exchange(&ledger, 2_030, 2_040, 200, &none);
        exchange(&ledger, 2_041, 2_050, 200, &none);
        // A third wait, after which two requests leave together.
        exchange(&ledger, 3_000, 3_000, 503, &retry_after("1"));
        exchange(&ledger, 4_000, 4_020, 200, &none);
        exchange(&ledger, 4_001, 4_021, 200, &none);
        let reopenings = ledger.reopenings();
        let ends: Vec<_> = reopenings.iter().map(|r| (r.ended, r.alone())).collect();
        assert_eq!(ends, vec![(t(1_005), true), (t(2_020), true), (t(4_000), false)]);
        assert_eq!(ledger.inside().later, 0);
        let fault = ledger.verdict().unwrap_err();
        assert!(fault.contains("did not go alone") && !fault.contains("later inside"), "{fault}");
    }

    #[test]
    fn the_verdict_counts_what_was_honoured_and_names_what_was_not() {
        let ledger = WaitLedger::default();
        exchange(&ledger, 0, 0, 503, &retry_after("1"));
        exchange(&ledger, 20, 20, 503, &retry_after("1"));
        exchange(&ledger, 1_030, 1_040, 200, &HeaderMap::new());
        let honoured = ledger.verdict().unwrap();
        assert_eq!(honoured, Honoured { inside: Inside { waits: 2, on_the_wire: 1, later: 0 }, reopenings: 1 });
        exchange(&ledger, 1_050, 1_050, 503, &retry_after("1"));
        exchange(&ledger, 1_200, 1_210, 200, &HeaderMap::new());
        let fault = ledger.verdict().unwrap_err();
        assert!(fault.contains("1 requests arrived later inside"), "{fault}");
    }

    #[test]
    fn forgetting_keeps_the_counts() {
        let ledger = WaitLedger::default();
        exchange(&ledger, 0, 0, 503, &retry_after("1"));
        exchange(&ledger, 500, 500, 200, &HeaderMap::new());
        for n in 0..10 {
            exchange(&ledger, 2_000 + n, 2_000 + n, 200, &HeaderMap::new());
        }
        ledger.forget_old(4);
        assert_eq!(ledger.requests().len(), 4);
        assert!(ledger.waits().is_empty());
        assert_eq!(ledger.inside(), Inside { waits: 1, on_the_wire: 0, later: 1 });
        // A ticket given before the forgetting still finds its request.
        let ticket = ledger.arrive_at(t(3_000), "POST /x");
        ledger.forget_old(2);
        ledger.answer_at(ticket, t(3_010), 201, &HeaderMap::new(), None);
        assert_eq!(ledger.requests().last().unwrap().status, Some(201));
    }

    #[test]
    fn a_refusal_says_when_to_come_back_until_it_ends() {
        let seconds = Refusal { status: 503, until: t(2_500), form: RetryAfterForm::Seconds(1) };
        assert_eq!(seconds.retry_after(t(0)).as_deref(), Some("1"));
        assert_eq!(seconds.retry_after(t(2_500)), None);
        let date = Refusal::until_date(429, t(2_500));
        assert_eq!(date.retry_after(t(100)).as_deref(), Some("Tue, 01 Dec 2026 10:00:03 GMT"));
        assert_eq!(named_end("Tue, 01 Dec 2026 10:00:03 GMT", t(100)), Some(t(3_000)));
    }
}
