//! `cargo install --locked --path crates/subzero` installs the three binaries side by side,
//! and they work from there: `cargo xtask test` installs them into `target/cargo-install`
//! after its build (`xtask::test::lanes::cargo_install`); this runs what it installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::cli::{DoctorReport, Status, parsed_of};
use crate::support::prereq;

const GROUP: &str = "cargo_install";

/// `target/cargo-install/bin`, when `cargo xtask test` filled it.
fn installed() -> Option<PathBuf> {
    let target = super::target_dir();
    let bin = target.join("cargo-install/bin");
    if bin.join("subzero").is_file() {
        prereq::present(GROUP);
        return Some(bin);
    }
    prereq::missing(
        GROUP,
        "the binaries `cargo install` put in target/cargo-install",
        "cargo install --locked --debug --path crates/subzero --root target/cargo-install",
    );
    None
}

fn version(exe: &Path) -> String {
    let out = Command::new(exe).arg("--version").output().expect("runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn cargo_install_puts_the_three_binaries_side_by_side_and_they_work_from_there() {
    let Some(bin) = installed() else { return };
    let built = Path::new(env!("CARGO_BIN_EXE_subzero"));
    // This build's binaries, not an older install.
    assert_eq!(version(&bin.join("subzero")), version(built));
    for name in ["subzero-worker", "subzero-hold"] {
        assert!(bin.join(name).is_file(), "cargo install left out {name}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::write(workspace.join("README.md"), "# A project\n").expect("readme");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").expect("config");
    let out = Command::new(bin.join("subzero"))
        .args(["doctor", "--json", "--state-dir"])
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .arg("--workspace")
        .arg(&workspace)
        .env_remove("SUBZERO_LOG")
        .output()
        .expect("doctor runs");
    let report: DoctorReport = parsed_of(&out);
    for name in ["worker", "build"] {
        let check = report
            .checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name} check"));
        assert_eq!(check.status, Status::Pass, "{name}: {}", check.detail);
    }
    let failed: Vec<_> = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .collect();
    assert!(
        failed.is_empty(),
        "doctor fails from the install: {failed:?}"
    );
    // The README's first command, from the install.
    let demo = Command::new(bin.join("subzero"))
        .args(["demo", "--workspace"])
        .arg(&workspace)
        .output()
        .expect("demo runs");
    assert!(
        demo.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&demo.stdout),
        String::from_utf8_lossy(&demo.stderr)
    );
}
