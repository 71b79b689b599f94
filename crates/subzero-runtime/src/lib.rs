//! Subzero's runtime adapters: the SQLite store, kernel-held locks, startup recovery,
//! credential resolution, configuration and artifact files.
//!
//! The broker (`broker/`) drives everything else: it starts workers through the
//! supervisor (`supervisor/`) and is served to hosts by the MCP server (`mcp/`).
//! Blocking work — SQLite, file I/O — never runs on the async reactor:
//! store mutations go to one writer thread, reads to tokio's blocking pool.

pub mod artifacts;
pub mod broker;
pub mod checkout;
pub mod config;
pub mod credentials;
pub mod error;
pub mod locks;
pub mod mcp;
pub mod paths;
pub mod recovery;
pub mod scope;
pub mod secret_env;
pub mod store;
pub mod supervisor;
pub mod workers;

pub use error::{RuntimeError, RuntimeResult};

/// The crate's test suite (`tests/testsuite/`, a module per area) is compiled into its
/// unit-test binary, so the crate links one test binary, not two; the suite names the crate
/// by its name, as an outside user would.
#[cfg(test)]
extern crate self as subzero_runtime;
#[cfg(test)]
#[path = "../tests/testsuite/mod.rs"]
mod testsuite;
