//! `cargo xtask soak [--release] [SOAK ARGS…]`: builds the three binaries and the soak,
//! then runs `subzero-soak` against them. With no arguments it runs the fixed seeds the test
//! suite runs (`crates/subzero-soak/tests/testsuite/fixed_seeds.rs`); `--seed S [--steps N]` replays a
//! seed (a failing run prints that line), `--minutes N` runs fresh seeds for longer.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Build, then run the soak with `args` (`--release` picks the release build).
pub fn soak(root: &Path, args: &[String]) -> Result<(), Vec<String>> {
    let release = args.iter().any(|a| a == "--release");
    let rest: Vec<&String> = args.iter().filter(|a| *a != "--release").collect();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut build = Command::new(cargo);
    build
        .current_dir(root)
        .args(["build", "--quiet", "-p", "subzero", "-p", "subzero-soak"]);
    if release {
        build.arg("--release");
    }
    let built = build
        .status()
        .map_err(|e| vec![format!("cannot run cargo build: {e}")])?;
    if !built.success() {
        return Err(vec![format!("cargo build of the soak failed ({built})")]);
    }
    let bin = target_dir(root).join(if release { "release" } else { "debug" });
    let status = Command::new(bin.join("subzero-soak"))
        .args(rest)
        .arg("--bin-dir")
        .arg(&bin)
        .current_dir(root)
        .status()
        .map_err(|e| vec![format!("cannot run subzero-soak: {e}")])?;
    if status.success() {
        Ok(())
    } else {
        Err(vec![format!(
            "the fault soak found violations or could not run ({status}); its output names the seed and the replay command"
        )])
    }
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}
