//! The closing line of `cargo test --workspace`: every test group that was skipped the last
//! time it ran, because something from outside the workspace was missing (a host, an outside
//! MCP client, a binding generator), and the command that runs them all.
//!
//! The groups record themselves in `target/tmp/skipped-groups/` (see
//! `crates/subzero/tests/testsuite/support/prereq.rs`). This is a plain program (`harness = false`), so
//! cargo shows what it prints; it is the workspace's last test binary (cargo runs test
//! binaries in package order, and `xtask` comes last), so the line closes the test output,
//! before only the doc-test summaries.

use std::path::Path;

fn main() {
    // `cargo test -- --list` asks every binary for its tests: this one has none.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-groups");
    println!("{}", xtask::test::skip_summary(&dir));
}
