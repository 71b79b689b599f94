//! Illegal lifecycles do not compile; legal ones do.
//!
//! Each `tests/ui/*.rs` case is one illegal step with a comment naming the rule, and
//! its committed `.stderr` is the compiler's explanation. Re-bless with
//! `TRYBUILD=overwrite cargo test -p subzero-ui-tests` on the pinned toolchain, then read
//! every changed `.stderr` to confirm it still fails for the reason its comment names.

#[test]
fn illegal_lifecycles_do_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}

#[test]
fn the_legal_lifecycle_compiles() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/pass/*.rs");
}
