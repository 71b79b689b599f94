//! subzero-soak's test suite beside its unit tests, compiled into the crate's unit-test
//! binary (see `src/lib.rs`): the fixed seeds against real brokers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fixed_seeds;
