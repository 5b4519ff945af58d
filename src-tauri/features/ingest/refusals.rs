//! Refusals an attack makes by the thousand (slow bodies, one sender's excess, no turn) are logged without
//! flooding the log: the first of a kind at once, then at most one line of that kind every [`EVERY`], which
//! says how many like it were not logged since the line before.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// At most one line per kind of refusal this often.
pub const EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct RefusalLog {
    kinds: Mutex<HashMap<&'static str, Tally>>,
}

#[derive(Debug)]
struct Tally {
    logged_at: Instant,
    unlogged: u64,
}

impl RefusalLog {
    /// One more refusal of `kind` at `now`: `Some(n)` when it is to be logged, `n` being how many of its kind were
    /// not logged since the last line; `None` when it is only counted.
    pub fn note(&self, kind: &'static str, now: Instant) -> Option<u64> {
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        match kinds.get_mut(kind) {
            Some(tally) if now.saturating_duration_since(tally.logged_at) < EVERY => {
                tally.unlogged += 1;
                None
            }
            Some(tally) => {
                let unlogged = std::mem::take(&mut tally.unlogged);
                tally.logged_at = now;
                Some(unlogged)
            }
            None => {
                kinds.insert(kind, Tally { logged_at: now, unlogged: 0 });
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_kind_every_ten_seconds_counting_the_rest() {
        let log = RefusalLog::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(log.note("too_slow", at(0)), Some(0), "the first is logged");
        // 1,000 more within the ten seconds: counted, not logged; another kind has its own line.
        for i in 0..1000 {
            assert_eq!(log.note("too_slow", at(1 + i)), None);
        }
        assert_eq!(log.note("too_many_bodies", at(500)), Some(0));
        assert_eq!(log.note("too_slow", at(9_999)), None);
        // The next line says how many were left out.
        assert_eq!(log.note("too_slow", at(10_000)), Some(1001));
        assert_eq!(log.note("too_slow", at(10_001)), None);
        assert_eq!(log.note("too_slow", at(60_000)), Some(1));
    }
}
