//! Delivery: the worker and the pure decisions it applies (classification, backoff, circuit breaker, pacing,
//! fallbacks of time-sensitive steps, leads written without a refused field).

pub mod backoff;
pub mod breaker;
pub mod fallback;
pub mod missing_data;
pub mod pacing;
pub mod worker;
