//! The clock decisions are made with. [`Clock::system`] reads the system time; [`Clock::manual`] is set and
//! advanced by hand (tests), shared by every clone. Sleeps stay real (tokio); the clock only says what time it is.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

/// What time it is, as the runtime sees it. Cheap to clone; clones of a manual clock share its time.
#[derive(Clone, Debug, Default)]
pub struct Clock(Source);

#[derive(Clone, Debug, Default)]
enum Source {
    #[default]
    System,
    Manual(Arc<Mutex<DateTime<Utc>>>),
}

impl Clock {
    /// The system's time.
    pub fn system() -> Clock {
        Clock(Source::System)
    }

    /// A clock that stands at `at` until it is set or advanced.
    pub fn manual(at: DateTime<Utc>) -> Clock {
        Clock(Source::Manual(Arc::new(Mutex::new(at))))
    }

    pub fn now(&self) -> DateTime<Utc> {
        match &self.0 {
            Source::System => Utc::now(),
            Source::Manual(t) => *t.lock().expect("clock poisoned"),
        }
    }

    pub fn is_manual(&self) -> bool {
        matches!(self.0, Source::Manual(_))
    }

    /// Sets a manual clock to `at`. Panics on the system clock: nobody sets the time of the world.
    pub fn set(&self, at: DateTime<Utc>) {
        match &self.0 {
            Source::System => panic!("the system clock cannot be set"),
            Source::Manual(t) => *t.lock().expect("clock poisoned") = at,
        }
    }

    /// Moves a manual clock forward by `by`. Panics on the system clock.
    pub fn advance(&self, by: Duration) {
        match &self.0 {
            Source::System => panic!("the system clock cannot be advanced"),
            Source::Manual(t) => *t.lock().expect("clock poisoned") += by,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_is_shared_by_its_clones() {
        let t0 = "2026-03-02T10:00:00Z".parse().unwrap();
        let c = Clock::manual(t0);
        let d = c.clone();
        c.advance(Duration::minutes(5));
        assert_eq!(d.now(), t0 + Duration::minutes(5));
        d.set(t0);
        assert_eq!(c.now(), t0);
    }

    #[test]
    fn system_clock_moves() {
        let c = Clock::system();
        let a = c.now();
        assert!(c.now() >= a);
        assert!(!c.is_manual());
    }
}
