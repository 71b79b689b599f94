//! What a cross build needs beyond the toolchain: the target's standard library (rustup)
//! and Zig as the C compiler and linker (`cargo-zigbuild` and `ziglang`, both from PyPI,
//! pinned, in a venv of the target directory).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use super::Target;
use crate::bench::target_dir;

/// The PyPI packages of the cross build, pinned.
pub const ZIG_PACKAGES: &[&str] = &["ziglang==0.17.1", "cargo-zigbuild==0.24.1"];

/// Adds `target`'s standard library to the pinned toolchain unless it is there.
pub fn rust_target(target: Target) -> Result<(), Vec<String>> {
    let listed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| {
            vec![format!(
                "cannot run rustup (it installs the target's std): {e}"
            )]
        })?;
    let installed = String::from_utf8_lossy(&listed.stdout);
    if installed.lines().any(|l| l.trim() == target.triple()) {
        return Ok(());
    }
    crate::test::run(
        Command::new("rustup").args(["target", "add", target.triple()]),
        &format!("rustup target add {}", target.triple()),
    )
}

/// The venv with [`ZIG_PACKAGES`] (made or brought up to date); the `PATH` that puts its
/// `cargo-zigbuild` and `python3` (whose `-m ziglang` is Zig) first.
pub fn zig(root: &Path) -> Result<String, Vec<String>> {
    let venv = target_dir(root).join("dist-tools/venv");
    let python = venv.join("bin/python3");
    let stamp = venv.join("subzero-packages.txt");
    let wanted = ZIG_PACKAGES.join("\n") + "\n";
    if !(std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) && python.exists()) {
        let started = Instant::now();
        if !python.exists() {
            crate::test::run(
                Command::new("python3").args(["-m", "venv"]).arg(&venv),
                "python3 -m venv (for cargo-zigbuild)",
            )?;
        }
        crate::test::run(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(ZIG_PACKAGES),
            "pip install ziglang cargo-zigbuild",
        )?;
        std::fs::write(&stamp, wanted).map_err(|e| vec![format!("cannot write {stamp:?}: {e}")])?;
        eprintln!(
            "cargo xtask dist: {} installed ({:.0} s)",
            ZIG_PACKAGES.join(", "),
            started.elapsed().as_secs_f64()
        );
    }
    let path = std::env::var("PATH").unwrap_or_default();
    Ok(format!("{}:{path}", venv.join("bin").display()))
}
