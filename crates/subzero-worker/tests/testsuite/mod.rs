//! subzero-worker's test suite beside its unit tests, compiled into the crate's unit-test
//! binary (see `src/lib.rs`): the fuzz seeds' smoke run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fuzz_smoke;
