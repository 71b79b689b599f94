//! The same case as an unprivileged user: run as root (as CI runs), a case runs again in a
//! copy of this test binary started as `nobody`, whose spawner then clones each worker into a
//! user + PID namespace, as an unprivileged broker's does. Run as any other user, a case
//! already is that run. Where `nobody` cannot reach the test binary, `subzero` or the Pi
//! worker (a checkout under a private home), the copy is not started and the skip is said
//! and recorded (group `worker_conformance_nobody`).

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::prereq;

/// The skipped-group name of the runs as `nobody`.
const GROUP: &str = "worker_conformance_nobody";

/// Set in the copy started as `nobody`, so it does not start another.
const AS_NOBODY: &str = "SUBZERO_CONFORMANCE_AS_NOBODY";
const NOBODY: u32 = 65534;

/// Whether this process is the copy started as `nobody`.
pub fn is_copy() -> bool {
    std::env::var_os(AS_NOBODY).is_some()
}

/// Runs the current test again as `nobody` when this process runs as root; fails with the
/// copy's output when the copy fails or did not run exactly that test.
pub fn again() {
    if is_copy() || !nix::unistd::geteuid().is_root() {
        return;
    }
    let current = std::thread::current();
    let name = match current.name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => panic!("a conformance case must run on libtest's thread named after it"),
    };
    let exe = std::env::current_exe().expect("the test binary");
    if let Some(closed) = closed_to_others(&exe) {
        let why = format!("{} is not reachable by other users", closed.display());
        let _ = std::fs::create_dir_all(prereq::records_dir());
        let _ = std::fs::write(
            prereq::records_dir().join(GROUP),
            format!("{why}\ta checkout every user can read (chmod o+rx on its path)\n"),
        );
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "SKIPPED {GROUP} for {name}: {why}");
        return;
    }
    prereq::present(GROUP);
    let mut cmd = Command::new(exe);
    cmd.args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env(AS_NOBODY, "1")
        .env("HOME", "/tmp")
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY);
    for passed in ["SUBZERO_TEST_STRICT", "CI", "RUST_BACKTRACE"] {
        if let Some(value) = std::env::var_os(passed) {
            cmd.env(passed, value);
        }
    }
    let out = cmd.output().expect("start the test binary as nobody");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} as nobody: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    for line in stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| l.contains("process containment"))
    {
        eprintln!("  as nobody: {line}");
    }
    eprintln!("{name} passed again as nobody");
}

/// The first path `nobody` cannot reach among what the copy runs: the test binary, `subzero`
/// and, when installed, the Pi worker (its Node and its sources).
fn closed_to_others(test_binary: &Path) -> Option<PathBuf> {
    let mut needed = vec![
        (test_binary.to_path_buf(), 0o001),
        (PathBuf::from(env!("CARGO_BIN_EXE_subzero")), 0o001),
        (super::conn::worker_exe(), 0o001),
    ];
    if super::pi_node().is_file() {
        needed.push((super::pi_node(), 0o001));
        needed.push((super::pi_dir().join("src/main.js"), 0o004));
    }
    for (path, mode) in needed {
        let file_ok = std::fs::metadata(&path).is_ok_and(|m| m.mode() & mode != 0);
        if !file_ok {
            return Some(path);
        }
        if let Some(dir) = path
            .ancestors()
            .skip(1)
            .find(|dir| !std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 != 0))
        {
            return Some(dir.to_path_buf());
        }
    }
    None
}
