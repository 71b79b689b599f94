//! Illegal lifecycles do not compile; legal ones do.
//!
//! Each `tests/ui/*.rs` case is one illegal step with a comment naming the rule, and
//! its committed `.stderr` is the compiler's explanation ([`harness`]: `rustc` against the
//! workspace's own build). Re-bless with `SUBZERO_BLESS=1 cargo test -p subzero-ui-tests` on
//! the pinned toolchain, then read every changed `.stderr` to confirm it still fails for the
//! reason its comment names.
//!
//! The legal cases (`tests/pass/*.rs`) are modules of this test binary, compiled as any
//! user's code is (from outside the crates), each run in a process of its own.
#![allow(clippy::unwrap_used)]

#[path = "support/harness.rs"]
mod harness;

#[test]
fn illegal_lifecycles_do_not_compile() {
    let package = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let workspace = package.parent().unwrap();
    let checker = harness::Checker::for_this_build(workspace).unwrap_or_else(|e| panic!("{e}"));
    let bless = std::env::var_os("SUBZERO_BLESS").is_some();
    let case_dir = "ui-tests/tests/ui/";
    let mut cases: Vec<_> = std::fs::read_dir(package.join("tests/ui"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no compile-fail cases in tests/ui");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_stem().unwrap().to_string_lossy().into_owned();
        let relative = format!("{case_dir}{name}.rs");
        let (compiled, said) = checker
            .check(std::path::Path::new(&relative), &name)
            .unwrap();
        if compiled {
            failures.push(format!("{name}: compiled, but it is an illegal step"));
            continue;
        }
        let actual = harness::normalize(&said, case_dir);
        let expected_path = case.with_extension("stderr");
        if bless {
            std::fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{name}: the compiler's explanation changed (SUBZERO_BLESS=1 rewrites it)\n--- expected\n{expected}\n--- actual\n{actual}"
            )),
            Err(_) => failures.push(format!(
                "{name}: no {expected_path:?} (SUBZERO_BLESS=1 writes it); the compiler said:\n{actual}"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
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
