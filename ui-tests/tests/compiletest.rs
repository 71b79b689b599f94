//! Illegal lifecycles do not compile; legal ones do.
//!
//! Each `tests/ui/*.rs` case is one illegal step with a comment naming the rule, and
//! its committed `.stderr` is the compiler's explanation. Re-bless with
//! `TRYBUILD=overwrite cargo test -p subzero-ui-tests` on the pinned toolchain, then read
//! every changed `.stderr` to confirm it still fails for the reason its comment names.
//!
//! The legal cases (`tests/pass/*.rs`) are modules of this test binary, compiled as any
//! user's code is (from outside the crates) and run by a test each. Through trybuild they
//! made it `cargo build` the whole dependency tree of the cases (twice: its second build
//! adds a compiler flag); with only compile-fail cases it runs `cargo check`, which
//! generates no code.

#[test]
fn illegal_lifecycles_do_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}

#[path = "pass/legal_lifecycle.rs"]
mod legal_lifecycle;

#[path = "pass/any_child_round_trip.rs"]
mod any_child_round_trip;

#[test]
fn the_legal_lifecycle_compiles_and_runs() {
    legal_lifecycle::main();
}

#[test]
fn any_child_round_trips_compile_and_run() {
    any_child_round_trip::main();
}
