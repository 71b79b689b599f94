//! Subzero's pure model of children and runs.
//!
//! Lifecycles are types: a `Child<Ready>` has no `steer`, a stop needs the active
//! `RunId`, a resume needs a `Checkpoint` that only verification can produce. Storage
//! and the wire are dynamic, so [`AnyChild`]-style values carry loaded state back up
//! into the typed world through one checked boundary.
//!
//! This crate depends on no async runtime, database, MCP, HTTP or process crate; a
//! test enforces that through `cargo metadata`.

pub mod error_code;
pub mod ids;

pub use error_code::{Coded, ErrorCode};
pub use ids::{ArtifactId, ChildId, EventSeq, IdParseError, RunId};
pub mod state;

pub use state::{ChildState, RunStatus};
