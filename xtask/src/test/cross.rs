//! The lane of the arm64 archive: install `qemu-user-static` when it is missing (Debian's
//! package; CI runs as root), build the archive as `cargo xtask dist --target aarch64
//! --profile dist-check` does, then run the broker suite's `install::arm64` tests, which
//! unpack it and run it under the emulator. Its build is the lane's cost: one job at the
//! lowest priority (`nice -n 19`, `--jobs 1`), on the processor time the test lanes leave
//! (two jobs, even at that priority, slowed timing-bound tests into failing). The tests themselves wait for
//! the broker suite to end: on a saturated machine qemu-user 7.2 now and then lost a worker
//! (docs/install.md), and the emulated demo is seconds, not minutes.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::Sender;

use super::lanes::{Job, Logged, TestBinary, run_job};

/// The broker suite's tests of the arm64 archive.
pub const ARM64_TESTS: &str = "install::arm64";

const QEMU: &str = "/usr/bin/qemu-aarch64-static";

/// Starts the lane, writing to `log`; its tests start once the returned sender is used
/// (or dropped).
pub fn spawn(
    root: &Path,
    broker: TestBinary,
    log: &Path,
) -> Result<(Logged, Sender<()>), Vec<String>> {
    let (go, wait) = std::sync::mpsc::channel();
    let file = File::create(log).map_err(|e| vec![format!("cannot create {log:?}: {e}")])?;
    let root = root.to_path_buf();
    let thread = std::thread::spawn(move || {
        let to_log = || {
            file.try_clone()
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null())
        };
        qemu(&to_log)?;
        let args = ["--target", "aarch64", "--profile", "dist-check"].map(str::to_owned);
        // The build's own output goes to the log too.
        let xtask = std::env::current_exe()
            .map_err(|e| vec![format!("cannot find the xtask executable: {e}")])?;
        // One job at the lowest priority: the build takes the processor time the lanes leave.
        let build = Command::new("nice")
            .args(["-n", "19"])
            .arg(xtask)
            .current_dir(&root)
            .arg("dist")
            .args(&args)
            .env("SUBZERO_DIST_JOBS", "1")
            .stdout(to_log())
            .stderr(to_log())
            .status()
            .map_err(|e| vec![format!("cannot run cargo xtask dist: {e}")])?;
        if !build.success() {
            return Err(vec![format!(
                "cargo xtask dist {} failed ({build})",
                args.join(" ")
            )]);
        }
        let _ = wait.recv();
        let job = Job {
            binary: broker,
            args: vec![ARM64_TESTS],
        };
        run_job(&job, to_log, to_log)
    });
    Ok((
        Logged {
            log: log.to_path_buf(),
            thread,
        },
        go,
    ))
}

/// `qemu-user-static` from Debian's packages unless its arm64 emulator is there.
fn qemu(to_log: &dyn Fn() -> Stdio) -> Result<(), Vec<String>> {
    if Path::new(QEMU).is_file() {
        return Ok(());
    }
    let install = |update: bool| {
        let mut command = Command::new("apt-get");
        if update {
            command.arg("update");
        } else {
            command.args([
                "install",
                "-y",
                "--no-install-recommends",
                "qemu-user-static",
            ]);
        }
        command
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(to_log())
            .stderr(to_log())
            .status()
            .is_ok_and(|s| s.success())
    };
    if install(false) || (install(true) && install(false)) {
        return Ok(());
    }
    Err(vec![format!(
        "the arm64 tests need {QEMU}: `apt-get install qemu-user-static` (as root) failed"
    )])
}
