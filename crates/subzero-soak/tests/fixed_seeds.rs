//! The fault soak's fixed seeds, in the test suite: one, two and three brokers sharing a
//! workspace, random work and random faults, every invariant checked after each fault.
//!
//! The soak runs as its own binary (`subzero-soak`, with the three binaries `cargo test`
//! built beside it) and prints every seed's line to the terminal, so a failure shows its
//! seed and the command that replays its shortest failing prefix. It needs root (a tmpfs
//! over the state directory, the workers' descriptors in `/proc`): CI runs as root; a plain
//! `cargo test` elsewhere skips it and says so, and `SUBZERO_TEST_STRICT=1` (what
//! `cargo xtask test` sets) or `CI` makes a missing prerequisite a failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn strict() -> bool {
    let on = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    on("SUBZERO_TEST_STRICT") || std::env::var_os("CI").is_some()
}

/// A missing prerequisite: a failure in strict mode, else a skip recorded where
/// `xtask/tests/skipped_groups.rs` names it.
fn missing(what: &str) {
    assert!(
        !strict(),
        "the fault soak needs {what}; CI runs the suite as root after building everything"
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-groups");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("fault_soak"),
        format!("{what}\trun the tests as root\n"),
    );
    let _ = writeln!(std::io::stderr(), "SKIPPED fault_soak: it needs {what}");
}

#[test]
fn the_fixed_seeds_hold_every_invariant() {
    let soak = PathBuf::from(env!("CARGO_BIN_EXE_subzero-soak"));
    let bin_dir = soak.parent().expect("the soak's directory").to_path_buf();
    if !nix::unistd::geteuid().is_root() {
        return missing("root (a tmpfs state directory, the workers' descriptors in /proc)");
    }
    let built = ["subzero", "subzero-worker", "subzero-hold"]
        .iter()
        .all(|b| bin_dir.join(b).is_file());
    if !built {
        return missing("the three binaries beside it (cargo test --workspace builds them)");
    }
    let _ = std::fs::remove_file(
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-groups/fault_soak"),
    );
    let status = Command::new(&soak)
        .arg("--strict")
        .arg("--bin-dir")
        .arg(&bin_dir)
        .status()
        .expect("subzero-soak runs");
    assert!(
        status.success(),
        "the fault soak found violations (its output above names each seed and the command \
         that replays its shortest failing prefix)"
    );
}
