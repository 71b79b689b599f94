//! The `subzero` crate's integration tests: one binary (cargo links it once), an area per
//! module, each former test file a module of its area, the helpers they share in `support`.
//!
//! Every test runs in this one process, on libtest's threads, beside the others: a test looks
//! only at its own processes (by its temporary directory, a marker in their environment, the
//! process tree of its own broker) and changes nothing process-wide (environment, current
//! directory, umask, signal dispositions, limits). A group that needs the machine to itself
//! holds its lock from `support`.

mod support;

mod broker_embedded;
mod cli;
mod config;
mod containment;
mod contract;
mod faults;
mod grants;
mod hosts;
mod install;
mod isolation;
mod mcp;
mod model;
mod outside_clients;
mod security;
mod watch;
mod worker;
