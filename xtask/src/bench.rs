//! `cargo xtask bench [--quick] [--only SECTION]`: install the peers it measures beside
//! Subzero (`npm ci` in [`PEER_PROJECTS`]), build the release `subzero` and the bench binary
//! (`crates/subzero/benches/subzero_bench`), run it, and let it write `docs/benchmarks.md`.
//! Fails, naming them, when a figure misses its goal or a scenario fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The npm projects the bench measures, each pinned by its lockfile: the Node reference MCP
/// server, Pi (whose `--mode rpc` is the peer worker), Claude Code (the host whose requests
/// the `host` section measures) and the Pi worker.
pub const PEER_PROJECTS: &[&str] = &[
    "crates/subzero/benches/peers",
    "crates/subzero/tests/hosts/pi",
    "crates/subzero/tests/hosts/claude-code",
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
                    "--only needs a section: lean, processes, store, isolation, real-model, install or host"
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
    let host_cost = match only.as_deref() {
        None | Some("host") => Some(host_cost(root, &cargo)?),
        Some(_) => None,
    };
    // The archives the `install` section weighs and starts: both targets, release.
    let dist = match only.as_deref() {
        None | Some("install") if !quick => {
            crate::dist::dist(root, &[])?;
            Some(crate::dist::out_dir(root, "release"))
        }
        _ => None,
    };
    let mut command = Command::new(&bench_exe);
    if let Some(dir) = &dist {
        command.arg("--dist").arg(dir);
    }
    if let Some(figures) = &host_cost {
        command.arg("--host-cost").arg(figures);
    }
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
    run(&mut command, "the bench binary")
}

/// Where cargo builds: `$CARGO_TARGET_DIR`, else `target/` in the workspace.
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// The scenario test that drives Claude Code runs once and writes its figures (JSON) for
/// the bench's `host` section; returns where.
fn host_cost(root: &Path, cargo: &str) -> Result<PathBuf, Vec<String>> {
    let out = target_dir(root).join("bench-host-cost.json");
    let _ = std::fs::remove_file(&out);
    run(
        Command::new(cargo)
            .current_dir(root)
            .env("SUBZERO_HOST_COST_OUT", &out)
            .env("SUBZERO_TEST_STRICT", "1")
            .args(["test", "-p", "subzero", "--test", "testsuite", "--"])
            .args(["--exact", "--ignored", HOST_COST_TEST]),
        "the Claude Code cost scenarios",
    )?;
    if out.is_file() {
        Ok(out)
    } else {
        Err(vec![format!(
            "{HOST_COST_TEST} wrote no figures to {}",
            out.display()
        )])
    }
}

/// The test whose figures the `host` section reports.
const HOST_COST_TEST: &str =
    "hosts::claude_code_cost::tasks_spare_a_claude_code_parent_the_polling_turns";

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
