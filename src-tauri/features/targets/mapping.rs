//! Field mapping, as the connectors use it: the rules, their checks and how a lead becomes a record live in
//! [`crate::model::mapping`] (pure, below the configuration that holds the rules).

pub use crate::model::mapping::*;
