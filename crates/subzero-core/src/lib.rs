//! Subzero's pure model of children and runs.
//!
//! Lifecycles are types: a `Child<Ready>` has no `steer`, a stop needs the active
//! `RunId`, a resume needs a `Checkpoint` that only verification can produce. Storage
//! and the wire are dynamic, so [`AnyChild`] and [`AnyRun`] carry loaded state back up
//! into the typed world through one checked boundary, which needs the store's key; a
//! request on a loaded child returns a sealed `Decided` value, the only thing a store
//! writes.
//!
//! Modules: [`ids`], [`digest`], [`state`], [`error_code`], [`lifecycle`] (typestate
//! child/run, capability tokens, `AnyChild`/`AnyRun`, decided values, the storage key),
//! [`queue`] (bounded FIFO of follow-ups), [`events`] (the typed event body, and the
//! per-child event log with bounded retention and cursor gaps),
//! [`template`] (built-in and user templates, the immutable grant snapshot) and
//! [`limits`] (policy limits with the seed's defaults) and [`task`] (an MCP task as a view
//! of its run).
//!
//! This crate depends on no async runtime, database, MCP, HTTP or process crate; a
//! test enforces that through `cargo metadata`.

pub mod budget;
pub mod digest;
pub mod error_code;
pub mod events;
pub mod ids;
pub mod lifecycle;
pub mod limits;
pub mod queue;
pub mod state;
pub mod task;
pub mod template;

pub use budget::{BudgetName, BudgetReached, BudgetRequest, Budgets};
pub use digest::Sha256Digest;
pub use error_code::{Coded, Described, ErrorCode};
pub use ids::{ArtifactId, ChildId, EventSeq, IdParseError, RunId};
pub use lifecycle::{AnyChild, AnyRun, Checkpoint, Child, LifecycleError, Run};
pub use limits::{LimitExceeded, LimitName, Limits};
pub use state::{CheckoutState, ChildState, Ownership, Phase, RunStatus};

/// This crate's version (reported by `subzero_info` as `coreVersion`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The crate's test suite (`tests/testsuite/`, a module per area) is compiled into its
/// unit-test binary, so the crate links one test binary, not two; the suite names the crate
/// by its name, as an outside user would.
#[cfg(test)]
extern crate self as subzero_core;
#[cfg(test)]
#[path = "../tests/testsuite/mod.rs"]
mod testsuite;
