//! Reading a webhook body whole — it is buffered before its signature can be checked — without letting slow
//! senders hold what others need.
//!
//! - **Small bodies need nothing shared.** A body of at most [`SMALL_BODY_BYTES`] (a lead is about 1 KiB) is read
//!   as its bytes come: one connection has one request at a time, so these buffers are bounded by
//!   `server.max_connections` × 16 KiB.
//! - **Larger bodies take a turn** of `server.max_ingest_in_flight` first (up front when `Content-Length`
//!   announces more, else once the buffer outgrows the small size), and keep it until the request is answered:
//!   the turns bound what large bodies hold to `max_ingest_in_flight` × the largest body. Waiting for a turn is
//!   not the sender's slowness: the rate clock stops meanwhile.
//! - **A minimum rate** ([`Pace`], `server.min_body_bytes_per_second` and `server.body_stall_seconds`): a body
//!   that stalls or trickles is refused (408) within seconds, and lets go of its turn, its sender's count and its
//!   connection — instead of holding them for the whole `body_timeout_seconds`.
//! - The whole body, turn included, still arrives within `server.body_timeout_seconds`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::IngestError;

/// Largest body read without a turn.
pub const SMALL_BODY_BYTES: usize = 16 * 1024;

/// The minimum-rate rule, over the time since the body's headers arrived (passed in: a pure state machine).
///
/// A body starts with `stall` of time; each byte received buys `1 / min_rate` s more, but its time never reaches
/// further than `stall` past its latest bytes. So a body that keeps up the rate is never behind, one that stops is
/// behind `stall` after its last bytes, and one that trickles slower than the rate falls behind soon after — a
/// fast start buys at most `stall` of silence.
///
/// Bytes are judged by when the server finds them, and only a look that finds none cuts a body off: bytes that were
/// waiting while a busy server did not look count as on time (the lateness was the server's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    min_rate: u64,
    stall: Duration,
    due: Duration,
}

impl Pace {
    pub fn new(min_rate: u64, stall: Duration) -> Pace {
        Pace { min_rate: min_rate.max(1), stall, due: stall }
    }

    /// When, after its headers, the body is behind unless more bytes come.
    pub fn due(&self) -> Duration {
        self.due
    }

    /// Whether the body's time has run out at `at` (the read's timer is set for [`Pace::due`]).
    pub fn is_behind(&self, at: Duration) -> bool {
        at > self.due
    }

    /// `bytes` more were found; `at` is now, after the headers.
    pub fn received(&mut self, bytes: usize, at: Duration) {
        let earned = Duration::from_secs_f64(bytes as f64 / self.min_rate as f64);
        self.due = (self.due.max(at) + earned).min(at + self.stall);
    }

    /// The body waited `waited` for a turn: not its slowness, so its time moves on by as much.
    pub fn waited(&mut self, waited: Duration) {
        self.due += waited;
    }
}

/// What a body must keep to.
#[derive(Debug, Clone, Copy)]
pub struct BodyRules {
    pub min_rate: u64,
    pub stall: Duration,
    pub timeout: Duration,
}

/// A body read whole, with the turn it holds (if it is large) until it is dropped.
pub struct Received {
    pub bytes: Bytes,
    _turn: Option<OwnedSemaphorePermit>,
}

/// Reads `body` whole: at most `limit` bytes, `announced` by its `Content-Length` (checked against the limit
/// before this is called), taking a turn of `turns` when it is larger than [`SMALL_BODY_BYTES`].
pub async fn read(
    mut body: Body,
    announced: Option<usize>,
    limit: usize,
    rules: BodyRules,
    turns: &Arc<Semaphore>,
) -> Result<Received, IngestError> {
    let started = Instant::now();
    let give_up = started + rules.timeout;
    let mut pace = Pace::new(rules.min_rate, rules.stall);
    let mut turn = None;
    if announced.is_some_and(|n| n > SMALL_BODY_BYTES) {
        turn = Some(take_turn(turns, give_up, &mut pace).await?);
    }
    let mut buffer = Vec::with_capacity(announced.unwrap_or(0).min(limit));
    loop {
        let due = (started + pace.due()).min(give_up);
        // When the time is up the frame is still asked first (`timeout_at` polls it before its timer): bytes
        // already here count, whenever this task got to look.
        let frame = match tokio::time::timeout_at(due, body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(IngestError::BadRequest(format!("could not read the body: {}", e.into_inner())));
            }
            Err(_) if due < give_up => return Err(IngestError::TooSlow(rules.min_rate)),
            Err(_) => return Err(IngestError::BodyTimeout(rules.timeout.as_secs())),
        };
        let Ok(data) = frame.into_data() else { continue };
        if buffer.len() + data.len() > limit {
            return Err(IngestError::TooLarge(limit));
        }
        if turn.is_none() && buffer.len() + data.len() > SMALL_BODY_BYTES {
            turn = Some(take_turn(turns, give_up, &mut pace).await?);
        }
        pace.received(data.len(), started.elapsed());
        buffer.extend_from_slice(&data);
    }
    Ok(Received { bytes: Bytes::from(buffer), _turn: turn })
}

/// Waits for a turn until `give_up` (then `503 busy`); the wait does not count against the body's rate.
async fn take_turn(
    turns: &Arc<Semaphore>,
    give_up: Instant,
    pace: &mut Pace,
) -> Result<OwnedSemaphorePermit, IngestError> {
    let asked = Instant::now();
    match tokio::time::timeout_at(give_up, turns.clone().acquire_owned()).await {
        // A turn that comes as the time runs out (a crowd of waiters started together gets the turns freed at
        // that moment, one after the other) is none: the body had no time left to arrive in.
        Ok(Ok(turn)) if Instant::now() < give_up => {
            pace.waited(asked.elapsed());
            Ok(turn)
        }
        _ => Err(IngestError::Busy),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Feeds `chunks` of (bytes, at ms) and returns the first time the body was found behind, if any.
    fn behind_at(pace: &mut Pace, chunks: impl IntoIterator<Item = (usize, u64)>) -> Option<Duration> {
        for (bytes, at) in chunks {
            if pace.is_behind(ms(at)) {
                return Some(ms(at));
            }
            pace.received(bytes, ms(at));
        }
        None
    }

    #[test]
    fn a_body_that_keeps_the_rate_is_never_behind() {
        // 1,000 bytes a second required, 5 s of slack; 100 bytes every 100 ms for ten minutes.
        let mut pace = Pace::new(1000, 5 * S);
        assert_eq!(behind_at(&mut pace, (1..=6000).map(|i| (100, i * 100))), None);
        // Its time runs 5 s past its latest bytes, no further.
        assert_eq!(pace.due(), ms(600_000) + 5 * S);
    }

    #[test]
    fn a_fast_start_buys_no_more_than_the_stall_time() {
        // 900 kB at once, then nothing: behind 5 s after those bytes, not 900 s.
        let mut pace = Pace::new(1024, 5 * S);
        pace.received(900_000, ms(20));
        assert_eq!(pace.due(), ms(5020));
        assert!(!pace.is_behind(ms(5020)));
        assert!(pace.is_behind(ms(5021)));
    }

    #[test]
    fn a_body_that_sends_nothing_is_behind_after_the_stall_time() {
        let pace = Pace::new(1024, 5 * S);
        assert!(!pace.is_behind(5 * S));
        assert!(pace.is_behind(5 * S + ms(1)));
    }

    #[test]
    fn a_trickle_slower_than_the_rate_falls_behind() {
        // 100 bytes a second against 1,000 required: each second earns 0.1 s, so 5 s of slack last about 5.6 s.
        let mut pace = Pace::new(1000, 5 * S);
        let at = behind_at(&mut pace, (1..=60).map(|i| (100, i * 1000))).expect("cut off");
        assert_eq!(at, ms(6000));
        // At half the rate it lasts longer, and still falls behind.
        let mut pace = Pace::new(1000, 5 * S);
        assert_eq!(behind_at(&mut pace, (1..=60).map(|i| (500, i * 1000))), Some(ms(10_000)));
    }

    #[test]
    fn bytes_found_late_by_a_busy_server_count_as_on_time() {
        // The server looked 3 s after the body's time ran out and found bytes: they earn from then, up to the stall.
        let mut pace = Pace::new(1000, 2 * S);
        pace.received(100, ms(5000));
        assert_eq!(pace.due(), ms(5100));
        pace.received(10_000, ms(5050));
        assert_eq!(pace.due(), ms(7050));
    }

    #[test]
    fn waiting_for_a_turn_does_not_count_against_the_body() {
        let mut pace = Pace::new(1000, 5 * S);
        pace.received(1000, ms(100));
        pace.waited(20 * S);
        assert!(!pace.is_behind(ms(25_000)));
        assert!(pace.is_behind(ms(25_101)));
        // After the wait it earns as before, up to 5 s past its latest bytes.
        pace.received(10_000, ms(21_000));
        assert_eq!(pace.due(), ms(26_000));
    }
}
