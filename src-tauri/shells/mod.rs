//! The shells: thin adapters that parse input, call one `api` function and serialise its answer — the API
//! itself and its HTTP adapter, the server process that assembles everything, and the desktop window. The
//! command line is `main.rs`.

pub mod api;
pub mod desk;
#[cfg(feature = "desktop")]
pub mod desktop;
pub mod server;
pub mod window;
