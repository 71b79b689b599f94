//! `cargo xtask bench [--quick] [--only SECTION]`: install the peers it measures beside
//! Subzero (`npm ci` in [`PEER_PROJECTS`]), build the release `subzero` and the bench binary
//! (`crates/subzero/benches/subzero_bench`) and the broker without each piece of its start-up
//! machinery ([`VARIANTS`]), run it, and let it write `docs/benchmarks.md`.
//! Fails, naming them, when a figure misses its goal or a scenario fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The npm projects the bench measures, each pinned by its lockfile: the Node reference MCP
/// server, Pi (whose `--mode rpc` is the peer worker) and the Pi worker.
pub const PEER_PROJECTS: &[&str] = &[
    "crates/subzero/benches/peers",
    "crates/subzero/tests/hosts/pi",
    "workers/pi",
];

/// Install the peers, build, measure, write `docs/benchmarks.md`. `args`: `--quick`,
/// `--only SECTION`.
pub fn bench(root: &Path, args: &[String]) -> Result<(), Vec<String>> {
    let quick = args.iter().any(|a| a == "--quick");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .map(|i| {
            args.get(i + 1).cloned().ok_or_else(|| {
                vec![
                    "--only needs a section: lean, processes, store, real-model or machinery"
                        .to_string(),
                ]
            })
        })
        .transpose()?;
    for project in PEER_PROJECTS {
        crate::test::npm_ci(&root.join(project), project)?;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    // The bench target first: building it may relink `target/release/subzero` with the
    // package's dev-dependency features; the plain release build then restores the
    // shipped binary that the bench measures.
    let bench_exe = build_bench(root, &cargo)?;
    run(
        Command::new(&cargo)
            .current_dir(root)
            .args(["build", "--release", "-p", "subzero"]),
        "cargo build --release -p subzero",
    )?;
    let subzero = target_dir(root).join("release/subzero");
    // The start-up machinery's variants: a full run, or that section alone.
    let machinery = match only.as_deref() {
        Some(section) => section == "machinery",
        None => !quick,
    };
    let variants = if machinery {
        Some(build_variants(root, &cargo)?)
    } else {
        None
    };
    let mut command = Command::new(&bench_exe);
    command
        .current_dir(root)
        .arg("--subzero")
        .arg(&subzero)
        .arg("--out")
        .arg(root.join("docs/benchmarks.md"))
        .arg("--command")
        .arg(match (quick, &only) {
            (false, None) => "cargo xtask bench".to_owned(),
            (true, None) => "cargo xtask bench --quick".to_owned(),
            (false, Some(section)) => format!("cargo xtask bench --only {section}"),
            (true, Some(section)) => format!("cargo xtask bench --quick --only {section}"),
        });
    if quick {
        command.arg("--quick");
    }
    if let Some(section) = &only {
        command.arg("--only").arg(section);
    }
    if let Some(dir) = &variants {
        command.arg("--variants").arg(dir);
    }
    run(&mut command, "the bench binary")
}

/// The broker built without one piece of its start-up machinery each, as
/// `(file suffix, SUBZERO_BENCH_WITHOUT, without the rustc wrapper)`: what
/// `crates/subzero/build.rs` leaves out on request, and the static link of
/// `.cargo/rustc-wrapper`. The bench measures what each piece pays.
const VARIANTS: [(&str, &str, bool); 2] = [
    ("without-mcp-args", "mcp-args", false),
    // Last: without the wrapper every workspace crate of the variants' target is rebuilt.
    ("dynamic", "", true),
];

/// Builds [`VARIANTS`] in `target/bench-variants/target` and copies each broker to
/// `target/bench-variants/subzero-<suffix>`; returns that directory.
fn build_variants(root: &Path, cargo: &str) -> Result<PathBuf, Vec<String>> {
    let dir = target_dir(root).join("bench-variants");
    for (suffix, without, no_wrapper) in VARIANTS {
        let mut command = Command::new(cargo);
        command
            .current_dir(root)
            .args(["build", "--release", "-p", "subzero", "--bin", "subzero"])
            .env("CARGO_TARGET_DIR", dir.join("target"))
            .env("SUBZERO_BENCH_WITHOUT", without);
        if no_wrapper {
            // Empty overrides the configured wrapper (cargo's documented reset).
            command.env("RUSTC_WORKSPACE_WRAPPER", "");
        }
        run(
            &mut command,
            &format!("cargo build --release (subzero-{suffix})"),
        )?;
        let built = dir.join("target/release/subzero");
        let copy = dir.join(format!("subzero-{suffix}"));
        std::fs::copy(&built, &copy).map_err(|e| {
            vec![format!(
                "cannot copy {} to {}: {e}",
                built.display(),
                copy.display()
            )]
        })?;
    }
    Ok(dir)
}

/// Where cargo builds: `$CARGO_TARGET_DIR`, else `target/` in the workspace.
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// `cargo bench --no-run` for the bench target; returns its executable.
fn build_bench(root: &Path, cargo: &str) -> Result<PathBuf, Vec<String>> {
    let output = Command::new(cargo)
        .current_dir(root)
        .args([
            "bench",
            "-p",
            "subzero",
            "--bench",
            "subzero-bench",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| vec![format!("cannot run cargo: {e}")])?;
    if !output.status.success() {
        return Err(vec![
            "building the bench binary failed (see above)".to_string(),
        ]);
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "subzero-bench")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| vec!["cargo named no executable for the subzero-bench target".to_string()])
}

/// Run `command`; a failure names `what`.
pub fn run(command: &mut Command, what: &str) -> Result<(), Vec<String>> {
    let status = command
        .status()
        .map_err(|e| vec![format!("cannot run {what}: {e}")])?;
    if status.success() {
        Ok(())
    } else {
        Err(vec![format!("{what} failed ({status})")])
    }
}
