//! Delivery: the worker and the pure decisions it applies (classification, backoff, circuit breaker).

pub mod backoff;
pub mod breaker;
pub mod classify;
pub mod pacing;
pub mod worker;
