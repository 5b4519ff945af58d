//! Delivery: the worker and the pure decisions it applies (classification, backoff, circuit breaker, pacing,
//! fallbacks of time-sensitive steps).

pub mod backoff;
pub mod breaker;
pub mod fallback;
pub mod pacing;
pub mod worker;
