//! The whole suite in three lanes at once, after one build.
//!
//! Most of the broker's suite (`subzero`'s `tests/testsuite`) waits: on brokers and workers
//! starting, scripted models streaming slowly, hosts and SDK clients in Node and Python.
//! The rest of the workspace is mostly the compiler (the compile-fail cases build their own
//! project) and the fault soak. Run one after the other, each leaves the machine half idle;
//! side by side they finish in about the time of the longer one. The broker suite's two
//! tests on a real model (llama.cpp, one at a time, minutes of the processor) start at once
//! in a third lane: in the suite's name order they came last.
//!
//! One `cargo test --workspace --no-run` builds every test binary and names each, while the
//! outside clients and hosts install beside it; the lanes then run those binaries
//! themselves, as cargo would (from the package's directory, with `CARGO_MANIFEST_DIR`). A second `cargo test` that selected fewer packages would resolve
//! other features and build much of the workspace again. The doc tests run last in the
//! lane of the rest (`cargo test --workspace --doc`, the same selection, so nothing is rebuilt).
//!
//! The broker's suite prints as it runs; the other lanes' output is kept in files and
//! printed whole when they end, so nothing interleaves.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{STRICT_VAR, cargo_test, run};

/// A test binary the build produced.
#[derive(Debug, Clone)]
pub(super) struct TestBinary {
    /// `tests/testsuite/main.rs`-style name cargo prints: the target and its kind.
    label: String,
    exe: PathBuf,
    /// The package's directory: cargo runs a test binary from there.
    package_dir: PathBuf,
}

/// The broker suite's tests on a real model (`model::llama_cpp…`): one server at a time,
/// most of the suite's processor time, so they start at once in a lane of their own.
const REAL_MODEL: &str = "model::llama_cpp";

/// One test binary with the arguments it runs with.
#[derive(Debug, Clone)]
pub(super) struct Job {
    pub(super) binary: TestBinary,
    pub(super) args: Vec<&'static str>,
}

impl Job {
    fn all(binary: TestBinary) -> Self {
        Job {
            binary,
            args: Vec::new(),
        }
    }
}

/// Build every test target, then run three lanes side by side (the broker's suite, printed
/// as it runs; its real-model tier; everything else); fails when the build or any test
/// binary does, naming each.
pub fn run_all(
    root: &Path,
    install: impl FnOnce() -> Result<(), Vec<String>> + Send,
) -> Result<(), Vec<String>> {
    // Decided before the build, which makes the suites: the install must build as it did.
    let fresh = first_build(root) && std::env::var_os("CARGO_INCREMENTAL").is_none();
    let binaries = build_beside(root, install)?;
    cargo_install(root, fresh)?;
    crate::dist::npm::lay_out_for_tests(root)?;
    let (broker, rest): (Vec<TestBinary>, Vec<TestBinary>) = binaries
        .into_iter()
        .partition(|b| b.package_dir.ends_with("crates/subzero") && b.label == "test testsuite");
    let [broker] = <[TestBinary; 1]>::try_from(broker).map_err(|found| {
        vec![format!(
            "expected one broker suite (crates/subzero, tests/testsuite) among the test binaries, found {}",
            found.len()
        )]
    })?;
    let real_model = vec![Job {
        binary: broker.clone(),
        args: vec![REAL_MODEL],
    }];
    let real_model = spawn_logged(None, fresh, real_model, &log_path(root, "real-model"))?;
    let (arm64, main_done) = super::cross::spawn(root, broker.clone(), &log_path(root, "arm64"))?;
    let rest = rest.into_iter().map(Job::all).collect();
    let rest = spawn_logged(Some(root), fresh, rest, &log_path(root, "rest"))?;
    let main = Job {
        binary: broker,
        args: vec!["--skip", REAL_MODEL, "--skip", super::cross::ARM64_TESTS],
    };
    eprintln!(
        "     Running {} ({}) {}",
        main.binary.label,
        main.binary.exe.display(),
        main.args.join(" ")
    );
    let main = run_job(&main, Stdio::inherit, Stdio::inherit);
    let _ = main_done.send(());
    let real_model = finish_logged(real_model, "the broker suite's real-model tier");
    let rest = finish_logged(rest, "the rest of the workspace");
    let arm64 = finish_logged(arm64, "the arm64 archive under qemu");
    let failures: Vec<String> = [main, real_model, rest, arm64]
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

/// `cargo install --locked --path crates/subzero` into `target/cargo-install`, as a user
/// installs from the checkout, for `install::cargo_install` to run the installed binaries.
/// `--debug` and this target directory reuse what the build just compiled (seconds, not the
/// minutes of a release build); `--offline` because the build fetched every crate.
fn cargo_install(root: &Path, fresh: bool) -> Result<(), Vec<String>> {
    let target = crate::bench::target_dir(root);
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .current_dir(root)
        .env("CARGO_TARGET_DIR", &target)
        .args([
            "install",
            "--locked",
            "--offline",
            "--debug",
            "--force",
            "--quiet",
        ])
        .args(["--path", "crates/subzero", "--root"])
        .arg(target.join("cargo-install"));
    if fresh {
        command.env("CARGO_INCREMENTAL", "0");
    }
    let status = command
        .status()
        .map_err(|e| vec![format!("cannot run cargo install: {e}")])?;
    if status.success() {
        Ok(())
    } else {
        Err(vec![format!(
            "cargo install --path crates/subzero failed ({status})"
        )])
    }
}

/// The build with `install` running beside it (one waits on the processor, the other on
/// the network and the disk); the test binaries, or every failure of either.
fn build_beside(
    root: &Path,
    install: impl FnOnce() -> Result<(), Vec<String>> + Send,
) -> Result<Vec<TestBinary>, Vec<String>> {
    let (built, installed) = std::thread::scope(|s| {
        let installing = s.spawn(install);
        let built = build(root);
        let installed = installing
            .join()
            .unwrap_or_else(|_| Err(vec!["the install panicked".to_owned()]));
        (built, installed)
    });
    match (built, installed) {
        (Ok(binaries), Ok(())) => Ok(binaries),
        (built, installed) => Err([built.err(), installed.err()]
            .into_iter()
            .flatten()
            .flatten()
            .collect()),
    }
}

/// `cargo test --workspace --no-run`, and the test binaries it names (diagnostics and
/// progress go to the terminal as usual).
fn build(root: &Path) -> Result<Vec<TestBinary>, Vec<String>> {
    let mut command = cargo_test(root);
    if first_build(root) && std::env::var_os("CARGO_INCREMENTAL").is_none() {
        // A build from nothing has nothing to reuse: writing the incremental caches of
        // every workspace crate is only cost (CI builds a clean clone every time).
        command.env("CARGO_INCREMENTAL", "0");
    }
    let mut child = command
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

/// Whether the test suites were never built in this target directory (xtask itself is:
/// `cargo xtask` built it there a moment ago).
fn first_build(root: &Path) -> bool {
    let deps = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("debug/deps");
    let Ok(entries) = std::fs::read_dir(deps) else {
        return true;
    };
    !entries
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("testsuite-"))
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
pub(super) fn run_job(
    job: &Job,
    out: impl Fn() -> Stdio,
    err: impl Fn() -> Stdio,
) -> Result<(), Vec<String>> {
    let binary = &job.binary;
    let status = Command::new(&binary.exe)
        .args(&job.args)
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
            "{} of {} {}failed ({status})",
            binary.label,
            binary.package_dir.display(),
            if job.args.is_empty() {
                String::new()
            } else {
                format!("({}) ", job.args.join(" "))
            }
        )])
    }
}

/// `target/tmp/xtask-test-<lane>.log`, where a logged lane writes.
fn log_path(root: &Path, lane: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join(format!("tmp/xtask-test-{lane}.log"))
}

/// A lane whose output is kept in a file until it ends.
pub(super) struct Logged {
    pub(super) log: PathBuf,
    pub(super) thread: std::thread::JoinHandle<Result<(), Vec<String>>>,
}

/// A lane that runs `jobs` one after the other, then (given the workspace `root`) the doc
/// tests, writing to `log`. `fresh`: the build ran without incremental caches, so the doc
/// tests must too, or cargo builds every workspace crate again for them.
fn spawn_logged(
    root: Option<&Path>,
    fresh: bool,
    jobs: Vec<Job>,
    log: &Path,
) -> Result<Logged, Vec<String>> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| vec![format!("cannot create {dir:?}: {e}")])?;
    }
    let file =
        std::fs::File::create(log).map_err(|e| vec![format!("cannot create {log:?}: {e}")])?;
    let root = root.map(Path::to_path_buf);
    let thread = std::thread::spawn(move || {
        let to_log = || {
            file.try_clone()
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null())
        };
        let mut failures = Vec::new();
        for job in &jobs {
            use std::io::Write;
            if let Ok(mut header) = file.try_clone() {
                let _ = writeln!(
                    header,
                    "     Running {} ({}) {}",
                    job.binary.label,
                    job.binary.exe.display(),
                    job.args.join(" ")
                );
            }
            failures.extend(run_job(job, to_log, to_log).err().into_iter().flatten());
        }
        if let Some(root) = root {
            let mut doc = cargo_test(&root);
            if fresh {
                doc.env("CARGO_INCREMENTAL", "0");
            }
            doc.args(["--workspace", "--doc"])
                .stdin(Stdio::null())
                .stdout(to_log())
                .stderr(to_log());
            failures.extend(
                run(&mut doc, "cargo test --workspace --doc")
                    .err()
                    .into_iter()
                    .flatten(),
            );
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures)
        }
    });
    Ok(Logged {
        log: log.to_path_buf(),
        thread,
    })
}

/// Waits for a logged lane and prints what it wrote.
fn finish_logged(lane: Logged, what: &str) -> Result<(), Vec<String>> {
    let outcome = lane
        .thread
        .join()
        .unwrap_or_else(|_| Err(vec![format!("the lane of {what} panicked")]));
    match std::fs::read_to_string(&lane.log) {
        Ok(text) => {
            eprintln!("cargo xtask test: {what} ({})", lane.log.display());
            eprint!("{text}");
        }
        Err(e) => eprintln!("cargo xtask test: cannot read {}: {e}", lane.log.display()),
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
