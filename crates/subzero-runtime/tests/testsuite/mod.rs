//! subzero-runtime's test suite: one module per area (cargo's `testsuite` layout), compiled
//! into the crate's unit-test binary (see `src/lib.rs`), with the shared fixtures in `common`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod artifacts;
mod checkout;
mod common;
mod config_lenient;
mod config_limits;
mod config_tool_limits;
mod credentials;
mod cross_process;
mod no_json_macro;
mod no_key_on_disk;
mod schema;
mod sql_literals;
mod store_checkouts;
mod store_events;
mod store_faults;
mod store_lifecycle;
mod store_ops;
