//! Subzero's runtime adapters: the SQLite store, kernel-held locks, startup recovery,
//! credential resolution, configuration and artifact files.
//!
//! Everything here is driven by the broker (added later as `broker/`, `supervisor/`
//! and `mcp/`). Blocking work — SQLite, file I/O — never runs on the async reactor:
//! store mutations go to one writer thread, reads to tokio's blocking pool.

pub mod artifacts;
pub mod config;
pub mod credentials;
pub mod error;
pub mod locks;
pub mod paths;
pub mod recovery;
pub mod scope;
pub mod store;

pub use error::{RuntimeError, RuntimeResult};
