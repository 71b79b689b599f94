//! Illegal lifecycles do not compile; legal ones do.
//!
//! Each `tests/ui/*.rs` case is one illegal step with a comment naming the rule, and
//! its committed `.stderr` is the compiler's explanation. Re-bless with
//! `TRYBUILD=overwrite cargo test -p subzero-ui-tests` on the pinned toolchain, then read
//! every changed `.stderr` to confirm it still fails for the reason its comment names.
//!
//! One `TestCases` holds both kinds: trybuild builds the cases' dependencies once per
//! `TestCases` (`check` for compile-fail alone, `build` once a pass case is among them),
//! so two would build the runtime and its dependency tree twice.

#[test]
fn illegal_lifecycles_do_not_compile_and_the_legal_lifecycle_does() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.pass("tests/pass/*.rs");
}
