//! The whole suite in two lanes at once, after one build.
//!
//! Most of the broker's suite (`subzero`'s `tests/testsuite`) waits: on brokers and workers
//! starting, scripted models streaming slowly, hosts and SDK clients in Node and Python.
//! The rest of the workspace is mostly the compiler (the compile-fail cases build their own
//! project) and the fault soak. Run one after the other, each leaves the machine half idle;
//! side by side they finish in about the time of the longer one. The build comes first and
//! alone, so both lanes only run what is already built (cargo holds its build lock while
//! it compiles, not while tests run).
//!
//! The broker's suite prints as it runs; the other lane's output is kept in a file and
//! printed whole when it ends, so the two never interleave.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{cargo_test, run};

/// The lane that prints as it runs: the broker's integration suite.
const BROKER_SUITE: &[&str] = &["-p", "subzero", "--test", "testsuite"];

/// The other lane, one `cargo test` after the other: every other crate, then the
/// `subzero` binary's unit tests.
const THE_REST: &[&[&str]] = &[
    &["--workspace", "--exclude", "subzero"],
    &["-p", "subzero", "--bin", "subzero"],
];

/// Build every test target, then run the two lanes side by side; fails when the build or
/// either lane does, naming which.
pub fn run_all(root: &Path) -> Result<(), Vec<String>> {
    run(
        cargo_test(root).args(["--workspace", "--no-run"]),
        "cargo test --workspace --no-run (the build)",
    )?;
    let log = log_path(root);
    let rest = spawn_rest(root, &log)?;
    let broker = run(cargo_test(root).args(BROKER_SUITE), "the broker's suite");
    let rest = finish_rest(rest, &log);
    let failures: Vec<String> = [broker, rest]
        .into_iter()
        .filter_map(Result::err)
        .flatten()
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures)
    }
}

/// `target/tmp/xtask-test-rest.log`, where the second lane writes.
fn log_path(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("tmp/xtask-test-rest.log")
}

/// The second lane as one shell-free thread of `cargo test` runs writing to `log`.
fn spawn_rest(
    root: &Path,
    log: &Path,
) -> Result<std::thread::JoinHandle<Result<(), Vec<String>>>, Vec<String>> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| vec![format!("cannot create {dir:?}: {e}")])?;
    }
    let file =
        std::fs::File::create(log).map_err(|e| vec![format!("cannot create {log:?}: {e}")])?;
    let root = root.to_path_buf();
    Ok(std::thread::spawn(move || {
        for args in THE_REST {
            let out = file
                .try_clone()
                .map_err(|e| vec![format!("cannot share the lane's log: {e}")])?;
            let err = file
                .try_clone()
                .map_err(|e| vec![format!("cannot share the lane's log: {e}")])?;
            let mut command: Command = cargo_test(&root);
            command
                .args(*args)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            run(&mut command, &format!("cargo test {}", args.join(" ")))?;
        }
        Ok(())
    }))
}

/// Waits for the second lane and prints what it wrote.
fn finish_rest(
    rest: std::thread::JoinHandle<Result<(), Vec<String>>>,
    log: &Path,
) -> Result<(), Vec<String>> {
    let outcome = rest
        .join()
        .unwrap_or_else(|_| Err(vec!["the second test lane panicked".to_string()]));
    match std::fs::read_to_string(log) {
        Ok(text) => {
            eprintln!(
                "cargo xtask test: the rest of the workspace ({})",
                log.display()
            );
            eprint!("{text}");
        }
        Err(e) => eprintln!("cargo xtask test: cannot read {}: {e}", log.display()),
    }
    outcome
}
