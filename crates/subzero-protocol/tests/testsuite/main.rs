//! subzero-protocol's test suite: one binary, one module per area (cargo's `testsuite`
//! layout): the contract (schemas, fixtures, round trips) and the fuzz seeds' smoke run.

mod contract;
mod fuzz_smoke;
