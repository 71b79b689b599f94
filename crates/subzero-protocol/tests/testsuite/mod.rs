//! subzero-protocol's test suite: one module per area (cargo's `testsuite` layout), compiled
//! into the crate's unit-test binary (see `src/lib.rs`): the contract (schemas, fixtures,
//! round trips), the advertised input schemas and the fuzz seeds' smoke run.

mod advertised;
mod contract;
mod fuzz_smoke;
