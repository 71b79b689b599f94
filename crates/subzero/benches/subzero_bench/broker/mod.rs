//! Figures measured against the release `subzero mcp` binary over stdio, with a scripted
//! model on loopback; one module a scenario.

use std::time::Duration;

mod busy;
mod list_get;
mod network;
mod parent_cost;
mod run_start;
mod startup;
mod trees;

pub use busy::four_children;
pub use list_get::list_and_get;
pub use network::first_connect;
pub use parent_cost::parent_cost;
pub use run_start::run_start;
pub use startup::{cold_start, worker_start};
pub use trees::{broker_kill, stop_with_tree};

/// How long a scenario waits for what it needs to happen before it calls it a failure.
const LONG: Duration = Duration::from_secs(20);
