//! The whole suite in two lanes at once, after one build.
//!
//! Most of the broker's suite (`subzero`'s `tests/testsuite`) waits: on brokers and workers
//! starting, scripted models streaming slowly, hosts and SDK clients in Node and Python.
//! The rest of the workspace is mostly the compiler (the compile-fail cases build their own
//! project) and the fault soak. Run one after the other, each leaves the machine half idle;
//! side by side they finish in about the time of the longer one.
//!
//! One `cargo test --workspace --no-run` builds every test binary and names each; the lanes
//! then run those binaries themselves, as cargo would (from the package's directory, with
//! `CARGO_MANIFEST_DIR`). A second `cargo test` that selected fewer packages would resolve
//! other features and build much of the workspace again. The doc tests run last in the
//! second lane (`cargo test --workspace --doc`, the same selection, so nothing is rebuilt).
//!
//! The broker's suite prints as it runs; the other lane's output is kept in a file and
//! printed whole when it ends, so the two never interleave.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{STRICT_VAR, cargo_test, run};

/// A test binary the build produced.
#[derive(Debug, Clone)]
struct TestBinary {
    /// `tests/testsuite/main.rs`-style name cargo prints: the target and its kind.
    label: String,
    exe: PathBuf,
    /// The package's directory: cargo runs a test binary from there.
    package_dir: PathBuf,
}

/// Build every test target, then run the two lanes side by side; fails when the build or
/// any test binary does, naming each.
pub fn run_all(root: &Path) -> Result<(), Vec<String>> {
    let binaries = build(root)?;
    let (broker, rest): (Vec<TestBinary>, Vec<TestBinary>) = binaries
        .into_iter()
        .partition(|b| b.package_dir.ends_with("crates/subzero") && b.label == "test testsuite");
    if broker.len() != 1 {
        return Err(vec![format!(
            "expected one broker suite (crates/subzero, tests/testsuite) among the test binaries, found {}",
            broker.len()
        )]);
    }
    let log = log_path(root);
    let rest = spawn_rest(root, rest, &log)?;
    eprintln!(
        "     Running {} ({})",
        broker[0].label,
        broker[0].exe.display()
    );
    let broker = run_binary(&broker[0], Stdio::inherit, Stdio::inherit);
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

/// `cargo test --workspace --no-run`, and the test binaries it names (diagnostics and
/// progress go to the terminal as usual).
fn build(root: &Path) -> Result<Vec<TestBinary>, Vec<String>> {
    let mut child = cargo_test(root)
        .args([
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| vec![format!("cannot run cargo test --no-run: {e}")])?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut binaries = Vec::new();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        if let Some(binary) = test_binary(&line) {
            binaries.push(binary);
        }
    }
    let status = child
        .wait()
        .map_err(|e| vec![format!("cargo test --no-run: {e}")])?;
    if !status.success() {
        return Err(vec![format!(
            "cargo test --workspace --no-run (the build) failed ({status})"
        )]);
    }
    Ok(binaries)
}

/// The test binary one line of cargo's JSON messages announces, if it announces one.
fn test_binary(line: &str) -> Option<TestBinary> {
    let message: Value = serde_json::from_str(line).ok()?;
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let exe = PathBuf::from(message["executable"].as_str()?);
    let kind = message["target"]["kind"][0].as_str()?;
    let name = message["target"]["name"].as_str()?;
    let package_dir = Path::new(message["manifest_path"].as_str()?)
        .parent()?
        .to_path_buf();
    Some(TestBinary {
        label: format!("{kind} {name}"),
        exe,
        package_dir,
    })
}

/// Runs one test binary as cargo would; `Err` names it when it fails.
fn run_binary(
    binary: &TestBinary,
    out: impl Fn() -> Stdio,
    err: impl Fn() -> Stdio,
) -> Result<(), Vec<String>> {
    let status = Command::new(&binary.exe)
        .current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env(STRICT_VAR, "1")
        .stdin(Stdio::null())
        .stdout(out())
        .stderr(err())
        .status()
        .map_err(|e| vec![format!("cannot run {}: {e}", binary.exe.display())])?;
    if status.success() {
        Ok(())
    } else {
        Err(vec![format!(
            "{} of {} failed ({status})",
            binary.label,
            binary.package_dir.display()
        )])
    }
}

/// `target/tmp/xtask-test-rest.log`, where the second lane writes.
fn log_path(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("tmp/xtask-test-rest.log")
}

/// The second lane: every other test binary, then the doc tests, writing to `log`.
fn spawn_rest(
    root: &Path,
    binaries: Vec<TestBinary>,
    log: &Path,
) -> Result<std::thread::JoinHandle<Result<(), Vec<String>>>, Vec<String>> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| vec![format!("cannot create {dir:?}: {e}")])?;
    }
    let file =
        std::fs::File::create(log).map_err(|e| vec![format!("cannot create {log:?}: {e}")])?;
    let root = root.to_path_buf();
    Ok(std::thread::spawn(move || {
        let to_log = || {
            file.try_clone()
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null())
        };
        let mut failures = Vec::new();
        for binary in &binaries {
            use std::io::Write;
            let mut header = file.try_clone().ok();
            if let Some(h) = header.as_mut() {
                let _ = writeln!(
                    h,
                    "     Running {} ({})",
                    binary.label,
                    binary.exe.display()
                );
            }
            if let Err(e) = run_binary(binary, to_log, to_log) {
                failures.extend(e);
            }
        }
        let mut doc = cargo_test(&root);
        doc.args(["--workspace", "--doc"])
            .stdin(Stdio::null())
            .stdout(to_log())
            .stderr(to_log());
        if let Err(e) = run(&mut doc, "cargo test --workspace --doc") {
            failures.extend(e);
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures)
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_artifact_names_its_binary_and_package_and_others_name_none() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/subzero#0.1.0","manifest_path":"/w/crates/subzero/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"testsuite","src_path":"/w/crates/subzero/tests/testsuite/main.rs"},"profile":{"test":true},"executable":"/w/target/debug/deps/testsuite-1"}"#;
        let binary = test_binary(line).expect("a test binary");
        assert_eq!(binary.label, "test testsuite");
        assert_eq!(
            binary.exe,
            PathBuf::from("/w/target/debug/deps/testsuite-1")
        );
        assert_eq!(binary.package_dir, PathBuf::from("/w/crates/subzero"));
        let library = line.replace(r#""test":true"#, r#""test":false"#).replace(
            r#""executable":"/w/target/debug/deps/testsuite-1""#,
            r#""executable":null"#,
        );
        assert!(test_binary(&library).is_none());
        assert!(test_binary(r#"{"reason":"build-finished","success":true}"#).is_none());
    }
}
