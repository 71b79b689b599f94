//! `cargo xtask test`: the whole suite with nothing skipped.
//!
//! Installs the pinned outside clients and hosts into the checkout — a Python venv at
//! `.venv/` with [`PYTHON_PACKAGES`], `npm ci` in each of [`NODE_PROJECTS`] (pip's and npm's
//! own caches serve reruns; a project whose `node_modules` was installed from its current
//! lockfile is left alone; each in its own thread, beside the build) — then runs the
//! workspace's tests with [`STRICT_VAR`] set, so a test whose prerequisite is missing fails
//! instead of skipping: all of them in three lanes ([`lanes`]), or one `cargo test` with the
//! arguments given. `.ci/run` runs exactly this.

mod cross;
mod lanes;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

/// The Python packages the tests drive, pinned: the official MCP SDK (`outside_clients`) and
/// the binding generator with its models (`contract_bindings`).
pub const PYTHON_PACKAGES: &[&str] = &[
    "mcp==2.3.0",
    "datamodel-code-generator==0.89.0",
    "pydantic==2.13.4",
];

/// The npm projects the tests run from, each pinned by its `package-lock.json`: the Pi
/// worker (the conformance suite's second worker), the TypeScript SDKs, Ajv and the binding
/// generators, then the four real hosts.
pub const NODE_PROJECTS: &[&str] = &[
    "workers/pi",
    "crates/subzero/tests/clients/ts",
    "crates/subzero/tests/hosts/opencode",
    "crates/subzero/tests/hosts/pi",
    "crates/subzero/tests/hosts/codex",
    "crates/subzero/tests/hosts/claude-code",
];

/// Set for the tests: a missing prerequisite fails the test (`support::prereq::strict`).
pub const STRICT_VAR: &str = "SUBZERO_TEST_STRICT";

/// The checkout's venv, relative to the workspace root (the tests look for it there).
pub const VENV: &str = ".venv";

/// Install what the tests need, then run every test in strict mode (three lanes, the install
/// beside the build), or `cargo test ARGS…` (`--workspace` unless a package is named) when
/// arguments are given.
pub fn test(root: &Path, args: &[String]) -> Result<(), Vec<String>> {
    let started = Instant::now();
    require(
        "node",
        "Node 20 or later (node and npm on PATH) runs the TypeScript clients and the hosts",
    )?;
    require(
        "python3",
        "Python 3.10 or later (python3 on PATH) makes the test venv",
    )?;
    // Every group runs now: an earlier plain run's skip records no longer hold.
    let _ = std::fs::remove_dir_all(records_dir(root));
    let (installed, outcome) = if args.is_empty() {
        let mut took = Duration::ZERO;
        let outcome = lanes::run_all(root, || install(root).map(|d| took = d));
        (took, outcome)
    } else {
        let took = install(root)?;
        (took, cargo_test_args(root, args))
    };
    eprintln!(
        "cargo xtask test: installing took {}, everything {}; {}",
        minutes(installed),
        minutes(started.elapsed()),
        skip_summary(&records_dir(root))
    );
    outcome
}

/// The venv and every npm project, each in its own thread (they wait on the network and
/// the disk, not the processor); how long that took, or every failure.
fn install(root: &Path) -> Result<Duration, Vec<String>> {
    let started = Instant::now();
    let failures: Vec<String> = std::thread::scope(|s| {
        let venv = s.spawn(|| python_venv(root).map(drop));
        let projects: Vec<_> = NODE_PROJECTS
            .iter()
            .map(|project| s.spawn(move || npm_ci(&root.join(project), project)))
            .collect();
        std::iter::once(venv)
            .chain(projects)
            .filter_map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(vec!["an install thread panicked".to_owned()]))
                    .err()
            })
            .flatten()
            .collect()
    });
    if failures.is_empty() {
        Ok(started.elapsed())
    } else {
        Err(failures)
    }
}

/// `cargo test ARGS…` (`--workspace` unless a package is named), built first with the very
/// same selection (`--no-run`, so nothing is built twice) and the npm packages laid out from
/// that build for `install::npm`, as the whole suite does after its build.
fn cargo_test_args(root: &Path, args: &[String]) -> Result<(), Vec<String>> {
    let command = || {
        let mut command = cargo_test(root);
        if !args.iter().any(|a| a == "-p" || a.starts_with("--package")) {
            command.arg("--workspace");
        }
        command
    };
    // Cargo's own arguments only: those after `--` are the test binaries'.
    let cargo_args = &args[..args.iter().position(|a| a == "--").unwrap_or(args.len())];
    run(
        command().args(cargo_args).arg("--no-run"),
        "cargo test --no-run",
    )?;
    // A selection that built no broker has nothing to lay out (and no test that needs it).
    if crate::bench::target_dir(root)
        .join("debug/subzero")
        .is_file()
    {
        crate::dist::npm::lay_out_for_tests(root)?;
    }
    run(command().args(args), "cargo test")
}

/// `cargo test` in `root`, in strict mode.
fn cargo_test(root: &Path) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut command = Command::new(cargo);
    command.current_dir(root).arg("test").env(STRICT_VAR, "1");
    command
}

/// The one line that names every skipped group (records in `dir`, one file per group) and
/// the command that runs them.
pub fn skip_summary(dir: &Path) -> String {
    let mut groups: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    groups.sort();
    match groups.len() {
        0 => "no test group was skipped".to_string(),
        n => format!(
            "SKIPPED {n} test group{} for missing outside tools (hosts, MCP clients, binding \
             generators): {} — `cargo xtask test` installs them into this checkout and runs \
             everything",
            if n == 1 { "" } else { "s" },
            groups.join(", ")
        ),
    }
}

/// `target/tmp/skipped-groups`, where skipped groups record themselves.
fn records_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("tmp/skipped-groups")
}

fn require(program: &str, why: &str) -> Result<(), Vec<String>> {
    let runs = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if runs {
        Ok(())
    } else {
        Err(vec![format!("cargo xtask test needs {why}")])
    }
}

/// `.venv/` with [`PYTHON_PACKAGES`] installed; returns its directory.
fn python_venv(root: &Path) -> Result<PathBuf, Vec<String>> {
    let venv = root.join(VENV);
    pinned_venv(&venv, PYTHON_PACKAGES, &format!("{VENV}/"))?;
    Ok(venv)
}

/// A Python venv at `venv` with `packages` (pins) installed, made or brought up to date;
/// `label` names it in messages. A stamp file holds the pins last installed, so an
/// unchanged venv costs nothing.
pub(crate) fn pinned_venv(venv: &Path, packages: &[&str], label: &str) -> Result<(), Vec<String>> {
    let python = venv.join("bin/python3");
    let stamp = venv.join("subzero-packages.txt");
    let wanted = packages.join("\n") + "\n";
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) && python.exists() {
        return Ok(());
    }
    let started = Instant::now();
    if !python.exists() {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(venv),
            &format!("python3 -m venv {label}"),
        )?;
    }
    run(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet"])
            .args(["--disable-pip-version-check", "--no-input"])
            .args(packages),
        &format!("pip install (into {label})"),
    )?;
    std::fs::write(&stamp, wanted).map_err(|e| vec![format!("cannot write {stamp:?}: {e}")])?;
    eprintln!(
        "cargo xtask: {label} has {} ({})",
        packages.join(", "),
        minutes(started.elapsed())
    );
    Ok(())
}

/// `npm ci` in `dir` unless its `node_modules` was installed from the current lockfile
/// (npm writes `node_modules/.package-lock.json` last).
pub(crate) fn npm_ci(dir: &Path, name: &str) -> Result<(), Vec<String>> {
    let modified = |p: PathBuf| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    };
    let installed = modified(dir.join("node_modules/.package-lock.json"));
    if installed > SystemTime::UNIX_EPOCH && installed >= modified(dir.join("package-lock.json")) {
        return Ok(());
    }
    let started = Instant::now();
    run(
        Command::new("npm")
            .args(["ci", "--prefer-offline", "--no-audit", "--no-fund"])
            .current_dir(dir),
        &format!("npm ci in {name}"),
    )?;
    eprintln!(
        "cargo xtask test: npm ci in {name} ({})",
        minutes(started.elapsed())
    );
    Ok(())
}

pub(crate) fn run(command: &mut Command, what: &str) -> Result<(), Vec<String>> {
    let status = command
        .status()
        .map_err(|e| vec![format!("cannot run {what}: {e}")])?;
    if status.success() {
        Ok(())
    } else {
        Err(vec![format!("{what} failed ({status})")])
    }
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_recorded_group_and_the_command() {
        let dir = std::env::temp_dir().join(format!("xtask-skips-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(skip_summary(&dir), "no test group was skipped");
        std::fs::create_dir_all(&dir).expect("dir");
        for group in ["host_pi", "contract_bindings:pydantic"] {
            std::fs::write(dir.join(group), "x\ty\n").expect("record");
        }
        let line = skip_summary(&dir);
        assert!(line.starts_with("SKIPPED 2 test groups"), "{line}");
        assert!(
            line.contains("contract_bindings:pydantic, host_pi"),
            "{line}"
        );
        assert!(line.contains("`cargo xtask test`"), "{line}");
        assert!(!line.contains('\n'), "{line}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
