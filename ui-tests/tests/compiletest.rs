//! Illegal lifecycles do not compile; legal ones do.
//!
//! Each `tests/ui/*.rs` case is one illegal step with a comment naming the rule, and
//! its committed `.stderr` is the compiler's explanation. Re-bless with
//! `TRYBUILD=overwrite cargo test -p subzero-ui-tests` on the pinned toolchain, then read
//! every changed `.stderr` to confirm it still fails for the reason its comment names.
//!
//! The legal cases (`tests/pass/*.rs`) are modules of this test binary, compiled as any
//! user's code is (from outside the crates), each run in a process of its own. Through trybuild they
//! made it `cargo build` the whole dependency tree of the cases (twice: its second build
//! adds a compiler flag); with only compile-fail cases it runs `cargo check`, which
//! generates no code.
#![allow(clippy::unwrap_used)]

#[test]
fn illegal_lifecycles_do_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}

#[path = "pass/legal_lifecycle.rs"]
mod legal_lifecycle;

#[path = "pass/any_child_round_trip.rs"]
mod any_child_round_trip;

/// Names the legal case a re-run of this binary plays (see [`legal_case`]).
const CASE: &str = "SUBZERO_UI_LEGAL_CASE";

/// One legal case, when this binary was re-run for it; otherwise nothing. Each case takes
/// the process's one minting authority, as a program does, so each needs a process.
#[test]
fn legal_case() {
    match std::env::var(CASE).as_deref() {
        Ok("legal_lifecycle") => legal_lifecycle::main(),
        Ok("any_child_round_trip") => any_child_round_trip::main(),
        Ok(other) => panic!("no legal case {other}"),
        Err(_) => {}
    }
}

#[test]
fn the_legal_cases_compile_and_run_each_in_a_process_of_its_own() {
    for case in ["legal_lifecycle", "any_child_round_trip"] {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "legal_case", "--test-threads=1", "--nocapture"])
            .env(CASE, case)
            .status()
            .unwrap();
        assert!(status.success(), "the legal case {case} failed ({status})");
    }
}
