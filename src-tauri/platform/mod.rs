//! The desk's platform parts: what Leadline asks of the operating system, each behind one small interface in one
//! file, so that a port to another OS replaces these files and nothing else (docs/architecture.md, "Platform
//! parts", lists them and what a macOS or Windows port would use).
//!
//! - [`keyring`]: secrets entered in the app's settings, in the OS keyring (Secret Service over D-Bus here).
//!
//! The folder sits at the bottom of the layers, beside `model/` and the clock: the keyring is read by
//! `Config::secret` and the settings feature, below the shells. It imports nothing of the app — its interfaces
//! take and give plain text, pixels and callbacks (`tests/architecture.rs` checks both).

pub mod keyring;
