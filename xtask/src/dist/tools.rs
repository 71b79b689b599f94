//! What a cross build needs beyond the toolchain: the target's standard library (rustup)
//! and Zig as the C compiler and linker (`cargo-zigbuild` and `ziglang`, both from PyPI,
//! pinned, in a venv of the target directory).

use std::path::Path;
use std::process::Command;

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
    crate::test::pinned_venv(&venv, ZIG_PACKAGES, "target/dist-tools/venv")?;
    let path = std::env::var("PATH").unwrap_or_default();
    Ok(format!("{}:{path}", venv.join("bin").display()))
}
