//! subzero-core's test suite: one module per area (cargo's `testsuite` layout), compiled
//! into the crate's unit-test binary (see `src/lib.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod capabilities;
mod checkout_traces;
mod checkouts;
mod decided;
mod lifecycle;
mod lifecycle_doc;
mod properties;
mod purity;
mod scenarios;
mod source_size;
mod support;
