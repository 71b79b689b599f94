//! The arm64 release archive, cross-built here (`cargo xtask dist --target aarch64`), runs
//! under `qemu-user-static`: what it holds, that its binaries are static arm64, and that the
//! README's demo and `doctor` run from it. `cargo xtask test` builds the archive in the
//! `dist-check` profile (the release's sources and linking, unoptimised) and installs qemu.
//!
//! The emulator runs in a user and mount namespace of the test's own, with a `binfmt_misc`
//! of that namespace (Linux 6.7+) sending arm64 executables to qemu: the broker starts its
//! worker, the worker its tools, exactly as on an arm64 machine, and nothing of the host's
//! binfmt setup changes. What qemu-user does not emulate is asserted as such: Landlock
//! (`ENOSYS`) and `PR_SET_CHILD_SUBREAPER` (`EINVAL`), so `doctor` does not pass those, and
//! a worker outside a cgroup reports `process-group` containment (docs/install.md).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::cli::{DoctorReport, Status, parsed_of};
use crate::support::prereq;

const GROUP: &str = "arm64_qemu";
const QEMU: &str = "/usr/bin/qemu-aarch64-static";
const TRIPLE: &str = "aarch64-unknown-linux-musl";

/// Registers qemu for arm64 ELF executables in a `binfmt_misc` of a new user namespace, then
/// runs the arguments there (`F`: qemu is opened now, so it works from any mount view).
const UNDER_QEMU: &str = r#"set -e
mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F' > /proc/sys/fs/binfmt_misc/register
exec "$@""#;

/// The archive `cargo xtask test` built, unpacked into `dir`; the unpacked directory.
fn unpacked(dir: &Path) -> Option<PathBuf> {
    let target = super::target_dir();
    let out = target.join("dist/dist-check");
    let stem = format!("subzero-{}-aarch64-linux-musl", env!("CARGO_PKG_VERSION"));
    let archive = out.join(format!("{stem}.tar.gz"));
    if !(archive.is_file() && Path::new(QEMU).is_file()) {
        prereq::missing(
            GROUP,
            "the arm64 archive (target/dist/dist-check) and qemu-user-static",
            "cargo xtask dist --target aarch64 --profile dist-check; apt-get install qemu-user-static",
        );
        return None;
    }
    prereq::present(GROUP);
    let check = Command::new("sha256sum")
        .args(["--check", "--ignore-missing", "SHA256SUMS"])
        .current_dir(&out)
        .output()
        .expect("sha256sum runs");
    assert!(check.status.success(), "SHA256SUMS: {check:?}");
    let listed = Command::new("tar")
        .arg("-tzf")
        .arg(&archive)
        .output()
        .expect("tar runs");
    let mut names: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    names.sort();
    let expected: Vec<String> = [
        "",
        "LICENSE-APACHE",
        "LICENSE-MIT",
        "README.md",
        "subzero",
        "subzero-hold",
        "subzero-worker",
    ]
    .iter()
    .map(|n| format!("{stem}/{n}"))
    .collect();
    assert_eq!(names, expected, "what the archive holds");
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .current_dir(dir)
        .status()
        .expect("tar runs");
    assert!(untar.success());
    Some(dir.join(stem))
}

/// Whether `exe` is a static (no interpreter) 64-bit little-endian arm64 ELF executable.
fn static_arm64(exe: &Path) -> bool {
    let bytes = std::fs::read(exe).expect("read the binary");
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let elf64_le = bytes.starts_with(b"\x7fELF\x02\x01");
    let machine = u16_at(18);
    let (phoff, phentsize, phnum) = (u64_at(32) as usize, u16_at(54) as usize, u16_at(56));
    let interpreter = (0..usize::from(phnum)).any(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) == 3 // PT_INTERP
    });
    elf64_le && machine == 0xB7 && !interpreter
}

/// Runs `exe ARGS…` as an arm64 machine would, under qemu in a namespace of its own.
fn under_qemu(exe: &Path, args: &[&str]) -> Output {
    Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "--propagation",
            "private",
        ])
        .args(["sh", "-c", UNDER_QEMU, "under-qemu"])
        .arg(exe)
        .args(args)
        .env_remove("SUBZERO_LOG")
        .output()
        .expect("unshare runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_arm64_archive_holds_static_binaries_whose_demo_runs_under_qemu() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some(bin) = unpacked(dir.path()) else {
        return;
    };
    for name in ["subzero", "subzero-worker", "subzero-hold"] {
        assert!(
            static_arm64(&bin.join(name)),
            "{name} is not a static arm64 executable"
        );
    }
    let version = under_qemu(&bin.join("subzero"), &["--version"]);
    assert!(version.status.success(), "{}", text(&version));
    assert!(text(&version).contains(TRIPLE), "{}", text(&version));

    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::write(
        workspace.join("README.md"),
        "# A project\n\nThe demo reads this.\n",
    )
    .expect("readme");
    let ws = workspace.to_str().expect("utf-8");
    let demo = under_qemu(&bin.join("subzero"), &["demo", "--workspace", ws]);
    let said = text(&demo);
    assert!(demo.status.success(), "the demo failed under qemu:\n{said}");
    for step in [
        "3. subzero_spawn researcher",
        "confirmed true, status stopped",
        "8. subzero_output",
        "the steer reached the model: yes",
    ] {
        assert!(
            said.contains(step),
            "the demo's output lacks {step:?}:\n{said}"
        );
    }
}

#[test]
fn doctor_under_qemu_says_what_the_emulator_cannot_do() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some(bin) = unpacked(dir.path()) else {
        return;
    };
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").expect("config");
    let state = dir.path().join("state");
    let args = [
        "doctor",
        "--json",
        "--state-dir",
        state.to_str().expect("utf-8"),
        "--config",
        config.to_str().expect("utf-8"),
        "--workspace",
        workspace.to_str().expect("utf-8"),
    ];
    let out = under_qemu(&bin.join("subzero"), &args);
    let report: DoctorReport = parsed_of(&out);
    let status = |name: &str| {
        report
            .checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name} check: {report:#?}"))
            .status
    };
    // What works emulated: the three binaries found each other, pdeathsig.
    for name in ["worker", "build", "parent-death signal"] {
        assert_eq!(status(name), Status::Pass, "{name}: {report:#?}");
    }
    // What qemu-user does not emulate is not claimed.
    for name in ["landlock", "subreaper"] {
        assert_ne!(status(name), Status::Pass, "{name} under qemu: {report:#?}");
    }
    // Without a cgroup, a worker that cannot be a subreaper says it has process groups only.
    std::fs::write(&config, "[containment]\nprocess = \"subreaper\"\n").expect("config");
    let out = under_qemu(&bin.join("subzero"), &args);
    let report: DoctorReport = parsed_of(&out);
    let process = report
        .checks
        .iter()
        .find(|c| c.name == "process containment")
        .unwrap_or_else(|| panic!("no process containment check: {report:#?}"));
    assert_eq!(process.status, Status::Warn, "{process:#?}");
    assert!(
        process.detail.starts_with("process groups only"),
        "{process:#?}"
    );
}
