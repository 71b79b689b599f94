//! Subzero's seeded fault soak (`cargo xtask soak`).
//!
//! A seed names a schedule ([`schedule`]): epochs of MCP calls on 1–3 real `subzero mcp`
//! brokers sharing one workspace and state directory, each epoch with a fault at a random
//! point, against a model whose behaviour each prompt carries ([`plan`], [`model`]). After
//! every epoch the faults are undone and the invariants of [`verdict::Invariant`] are
//! checked ([`checks`]); two of them are watched all the time from the process table
//! ([`monitor`]). A failing seed is shrunk to the shortest failing prefix of its schedule
//! ([`run::shrink`]) and replayed with `cargo xtask soak --seed S --steps N`.

pub mod args;
pub mod checkouts;
pub mod checks;
pub mod cli;
pub mod exec;
pub mod faults;
pub mod kernel;
pub mod ledger;
pub mod model;
pub mod monitor;
pub mod plan;
pub mod repo;
pub mod report;
pub mod rng;
pub mod run;
pub mod schedule;
pub mod stats;
pub mod verdict;
pub mod world;

/// The crate's test suite (`tests/testsuite/`) is compiled into its unit-test binary, so the
/// crate links one test binary, not two; the suite names the crate by its name.
#[cfg(test)]
extern crate self as subzero_soak;
#[cfg(test)]
#[path = "../tests/testsuite/mod.rs"]
mod testsuite;
