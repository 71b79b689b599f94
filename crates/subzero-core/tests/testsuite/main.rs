//! subzero-core's test suite: one binary, one module per area (cargo's `testsuite` layout).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod capabilities;
mod decided;
mod lifecycle;
mod lifecycle_doc;
mod properties;
mod purity;
mod scenarios;
mod source_size;
mod support;
