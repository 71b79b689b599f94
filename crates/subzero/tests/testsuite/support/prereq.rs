//! Test groups that need something from outside the workspace — a real host, an outside MCP
//! client, a binding generator — and what a test does when that thing is missing.
//!
//! `cargo xtask test` installs every prerequisite into the checkout (a Python venv at
//! `.venv/`, `npm ci` in each test project) and runs the suite with `SUBZERO_TEST_STRICT=1`:
//! there, and under CI (`CI` set), a missing prerequisite fails the test. Elsewhere (a plain
//! `cargo test`) the test is skipped, and says so where a newcomer sees it:
//! - one line straight to the terminal's stderr (libtest captures only `eprintln!`), and
//! - a record in `target/tmp/skipped-groups/<group>`, which `cargo xtask test` turns into
//!   one closing line naming every skipped group and the command that runs it. A group that
//!   runs removes its record, so the line names what was skipped the last time each group ran.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The command that installs every prerequisite and runs every group.
pub const RUN_ALL: &str = "cargo xtask test";

/// Whether a missing prerequisite fails the test: `SUBZERO_TEST_STRICT` set to anything but
/// `0` or empty (what `cargo xtask test` sets), or `CI` set (what CI sets).
pub fn strict() -> bool {
    let on = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    on("SUBZERO_TEST_STRICT") || std::env::var_os("CI").is_some()
}

/// Where skipped groups are recorded (read by `xtask::test::skip_summary`).
pub fn records_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-groups")
}

/// `group` cannot run because `what` is missing; `install` installs it by hand. In strict
/// mode this fails the test; otherwise it records the skip and says so on the terminal.
/// The caller returns without running the group.
pub fn missing(group: &str, what: &str, install: &str) {
    assert!(
        !strict(),
        "test group {group} needs {what}, which is missing: `{RUN_ALL}` installs it into the \
         checkout (by hand: {install})"
    );
    let dir = records_dir();
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(group), format!("{what}\t{install}\n"));
    // Straight to the terminal: libtest captures `eprintln!`, not writes to the handle.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {group}: {what} is missing; `{RUN_ALL}` runs it (by hand: {install})"
    );
}

/// `group`'s prerequisites are there and it runs: forget an earlier skip.
pub fn present(group: &str) {
    let _ = std::fs::remove_file(records_dir().join(group));
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python that has the pinned outside packages: the checkout's venv (`.venv/`, made by
/// `cargo xtask test`) when there is one, else `python3` from PATH.
pub fn python() -> PathBuf {
    let venv = workspace_root().join(".venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// Whether [`python`] runs `probe` (e.g. `import mcp`) successfully.
pub fn python_runs(probe: &str) -> bool {
    std::process::Command::new(python())
        .args(["-c", probe])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `dir`, an npm project of the checkout, with its `node_modules` installed from its lockfile
/// and holding each of `needed` (paths below `node_modules`): `npm ci` runs when they are not
/// (`cargo xtask test` installs them before the tests). One install at a time: tests of
/// several areas use the same project (`tests/clients/ts`), and `npm ci` begins by removing
/// `node_modules`, under any other test reading it.
pub fn npm_installed(dir: &Path, needed: &[&str]) {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let modified = |p: PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    // npm writes `node_modules/.package-lock.json` at the end of an install.
    let fresh = match (
        modified(dir.join("node_modules/.package-lock.json")),
        modified(dir.join("package-lock.json")),
    ) {
        (Some(installed), Some(locked)) => installed >= locked,
        _ => false,
    } && needed
        .iter()
        .all(|n| dir.join("node_modules").join(n).exists());
    if fresh {
        return;
    }
    let started = std::time::Instant::now();
    let output = std::process::Command::new("npm")
        .args(["ci", "--prefer-offline", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .output()
        .expect("npm runs");
    assert!(
        output.status.success(),
        "npm ci in {} failed ({}):\n{}\n{}",
        dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = writeln!(
        std::io::stderr(),
        "npm ci in {} took {:?}",
        dir.display(),
        started.elapsed()
    );
}

/// Whether `node` runs.
pub fn node_available() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
