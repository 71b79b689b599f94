//! The fault soak's fixed seeds, in the test suite: one, two and three brokers sharing a
//! workspace, random work and random faults, every invariant checked after each fault; and
//! a short seed that certainly spawns isolated coders and lands their changes.
//!
//! The soak runs in-process ([`subzero_soak::cli::soak`]) against the three binaries
//! `cargo test --workspace` builds (`subzero`, `subzero-worker`, `subzero-hold`, in the
//! target's profile directory, above this test binary's `deps/`). Its lines (each seed's,
//! and for a failing seed the command that replays its shortest failing prefix) are shown
//! when it fails. It needs root (a tmpfs over the state directory, the workers' descriptors
//! in `/proc`): CI runs as root; a plain `cargo test` elsewhere skips it and says so, and
//! `SUBZERO_TEST_STRICT=1` (what `cargo xtask test` sets) or `CI` makes a missing
//! prerequisite a failure.

use std::io::Write;
use std::path::{Path, PathBuf};

use subzero_soak::cli::{self, Args};
use subzero_soak::run::{self, Options};
use subzero_soak::schedule::{Schedule, Shape};

fn strict() -> bool {
    let on = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    on("SUBZERO_TEST_STRICT") || std::env::var_os("CI").is_some()
}

/// The target's profile directory (`target/debug`): this test binary is in its `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary is in <profile>/deps")
        .to_path_buf()
}

/// Where skipped groups are recorded: `target/tmp/skipped-groups`, as the broker's suite
/// records them (`CARGO_TARGET_TMPDIR` is set for integration tests only).
fn skip_record() -> PathBuf {
    profile_dir()
        .parent()
        .expect("the target directory")
        .join("tmp/skipped-groups/fault_soak")
}

/// A missing prerequisite: a failure in strict mode, else a skip recorded where
/// `cargo xtask test`'s closing line names it.
fn missing(what: &str) {
    assert!(
        !strict(),
        "the fault soak needs {what}; CI runs the suite as root after building everything"
    );
    let record = skip_record();
    let _ = std::fs::create_dir_all(record.parent().expect("the records' directory"));
    let _ = std::fs::write(&record, format!("{what}\trun the tests as root\n"));
    let _ = writeln!(std::io::stderr(), "SKIPPED fault_soak: it needs {what}");
}

/// The directory of the three binaries, or `None` (a skip recorded, or a failure in strict
/// mode) when the soak cannot run here.
fn soak_can_run() -> Option<PathBuf> {
    let bin_dir = profile_dir();
    if !nix::unistd::geteuid().is_root() {
        missing("root (a tmpfs state directory, the workers' descriptors in /proc)");
        return None;
    }
    let built = ["subzero", "subzero-worker", "subzero-hold"]
        .iter()
        .all(|b| bin_dir.join(b).is_file());
    if !built {
        missing("the three binaries beside it (cargo test --workspace builds them)");
        return None;
    }
    let _ = std::fs::remove_file(skip_record());
    Some(bin_dir)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn the_fixed_seeds_hold_every_invariant() {
    let Some(bin_dir) = soak_can_run() else {
        return;
    };
    let args = Args {
        strict: true,
        bin_dir,
        ..cli::parse(Vec::new()).expect("no arguments: the fixed seeds")
    };
    assert!(
        runtime().block_on(cli::soak(args)),
        "the fault soak found violations (its lines above name each seed and the command \
         that replays its shortest failing prefix)"
    );
}

#[test]
fn isolated_coders_land_their_changes_once_under_faults() {
    let Some(bin_dir) = soak_can_run() else {
        return;
    };
    let shape = Shape {
        epochs: cli::ISOLATED_EPOCHS,
        ..Shape::default()
    };
    let schedule = Schedule::generate(cli::ISOLATED_SEED, shape);
    let options = Options {
        bin_dir,
        settle_bound: std::time::Duration::from_secs(120),
        stop_on_violation: true,
        verbose: true,
        keep_failed: true,
        keep_all: false,
    };
    let outcome = runtime()
        .block_on(run::run(&schedule, &options))
        .expect("the soak runs");
    let shown: Vec<String> = outcome.violations.iter().map(|v| v.to_string()).collect();
    assert!(
        shown.is_empty(),
        "seed {} over {} epochs (cargo xtask soak --seed {} --epochs {}; kept in {:?}):\n{}",
        cli::ISOLATED_SEED,
        cli::ISOLATED_EPOCHS,
        cli::ISOLATED_SEED,
        cli::ISOLATED_EPOCHS,
        outcome.kept,
        shown.join("\n")
    );
    let stats = &outcome.stats;
    let applies = stats
        .calls
        .get("subzero_apply")
        .cloned()
        .unwrap_or_default();
    let applied = stats.checkouts.get("applied").copied().unwrap_or(0);
    assert!(
        applies.get("ok").copied().unwrap_or(0) >= 2 && applied >= 1 && stats.landed_lines >= 1,
        "the seed is meant to land an isolated change and discard another: apply answers \
         {applies:?}, checkouts {:?}, {} landed lines checked",
        stats.checkouts,
        stats.landed_lines
    );
}
