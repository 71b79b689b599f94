//! The same case as an unprivileged user: run as root (as CI runs), a case runs again in a
//! copy of this test binary started as `nobody`, whose spawner then clones each worker into a
//! user + PID namespace, as an unprivileged broker's does. Run as any other user, a case
//! already is that run.

use std::os::unix::process::CommandExt;
use std::process::Command;

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
