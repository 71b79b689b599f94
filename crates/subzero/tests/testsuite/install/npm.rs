//! `npx -y subzero-mcp …` without a Rust toolchain. `cargo xtask test` lays the npm packages
//! out from its build in `target/npm-test` (`xtask::dist::npm::lay_out_for_tests`): the launcher
//! `subzero-mcp` and this machine's platform package. Here they are packed with `npm pack` and
//! installed from the tarballs alone into a fresh project — offline, with an empty npm cache
//! and a registry nobody answers at — and run as hosts run them:
//! - the launcher's `--version` is this build's, and the three binaries sit side by side,
//!   executable, in the installed platform package;
//! - MCP `initialize` and `tools/list` pass through the launcher's stdio untouched;
//! - SIGTERM to the launcher reaches the broker, which shuts down and leaves nothing, and the
//!   launcher exits as the broker did; a broker ended by a signal ends it by the same signal;
//! - without the platform package it says which package it looked for and what to do, exit 1;
//! - OpenCode, set up by `subzero hosts install opencode --npx`, runs `npx -y
//!   subzero-mcp@<version>` in the project, which resolves the launcher installed there with
//!   npm offline, and its model delegates to a child through it.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::json;
use subzero_testkit::mcp_client::McpSession;

use crate::support::chat_hosts::{delegate_and_follow_up, text};
use crate::support::faults::{RawBroker, descendants, eventually, read_proc, wait_for};
use crate::support::mcp::Env;
use crate::support::prereq;

const GROUP: &str = "npm_install";
/// Where npm would fetch from if it tried: a loopback port nothing listens on.
const DEAD_REGISTRY: &str = "http://127.0.0.1:9/";

/// The package directories `cargo xtask test` laid out.
struct Layout {
    launcher: PathBuf,
    platform: PathBuf,
    /// `@subzero-mcp/linux-x64`.
    platform_name: String,
}

/// Node's name for this processor, as the platform packages are named.
fn node_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `target/npm-test`, when `cargo xtask test` filled it and npm runs.
fn laid_out() -> Option<Layout> {
    let target = super::target_dir().join("npm-test");
    let layout = Layout {
        launcher: target.join("subzero-mcp"),
        platform: target.join(format!("subzero-mcp-linux-{}", node_arch())),
        platform_name: format!("@subzero-mcp/linux-{}", node_arch()),
    };
    let npm_runs = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if npm_runs
        && layout.launcher.join("package.json").is_file()
        && layout.platform.join("package.json").is_file()
    {
        prereq::present(GROUP);
        return Some(layout);
    }
    prereq::missing(
        GROUP,
        "npm and the npm packages `cargo xtask test` lays out in target/npm-test after its build",
        "cargo xtask test install::npm",
    );
    None
}

/// `npm` in `dir` that can reach nothing: offline, the registry a dead port, the cache and
/// user config `scratch`'s own (empty).
fn npm(dir: &Path, scratch: &Path) -> Command {
    let mut command = Command::new("npm");
    command
        .current_dir(dir)
        .env("npm_config_cache", scratch.join("npm-cache"))
        .env("npm_config_userconfig", scratch.join("npmrc"))
        .env("npm_config_offline", "true")
        .env("npm_config_registry", DEAD_REGISTRY)
        .env("npm_config_update_notifier", "false");
    command
}

fn succeeded(out: Output, what: &str) -> Output {
    assert!(out.status.success(), "{what} failed: {}", text(&out));
    out
}

/// `npm pack` of every laid-out package into `scratch/packs`, then a fresh npm project at
/// `project` (which may exist) with the tarballs installed, nothing else.
fn pack_and_install(layout: &Layout, scratch: &Path, project: &Path) {
    let packs = scratch.join("packs");
    std::fs::create_dir_all(&packs).expect("packs dir");
    let packed = npm(scratch, scratch)
        .arg("pack")
        .args([&layout.launcher, &layout.platform])
        .arg("--pack-destination")
        .arg(&packs)
        .arg("--json")
        .output()
        .expect("npm pack runs");
    let packed = succeeded(packed, "npm pack");
    let listed: serde_json::Value = serde_json::from_slice(&packed.stdout).expect("pack --json");
    let tarballs: Vec<PathBuf> = listed
        .as_array()
        .expect("one entry per package")
        .iter()
        .map(|p| packs.join(p["filename"].as_str().expect("filename")))
        .collect();
    assert_eq!(tarballs.len(), 2, "{listed}");
    std::fs::create_dir_all(project).expect("project");
    let manifest = json!({"name": "npm-install-test", "private": true, "version": "1.0.0"});
    std::fs::write(project.join("package.json"), manifest.to_string()).expect("package.json");
    let installed = npm(project, scratch)
        .args(["install", "--offline", "--no-audit", "--no-fund"])
        .args(&tarballs)
        .output()
        .expect("npm install runs");
    succeeded(installed, "npm install of the tarballs");
}

fn version(exe: &Path) -> String {
    let out = Command::new(exe).arg("--version").output().expect("runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The binaries in the installed platform package are this build's, side by side and
/// executable; the launcher is this build.
fn assert_installed_binaries(project: &Path, layout: &Layout) {
    let built = Path::new(env!("CARGO_BIN_EXE_subzero"))
        .parent()
        .expect("built dir");
    let bin = project
        .join("node_modules")
        .join(&layout.platform_name)
        .join("bin");
    for name in ["subzero", "subzero-worker", "subzero-hold"] {
        let exe = bin.join(name);
        let mode = std::fs::metadata(&exe)
            .unwrap_or_else(|e| panic!("{} is not installed: {e}", exe.display()))
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "{name} is not executable: {mode:o}");
        assert_eq!(version(&exe), version(&built.join(name)), "{name}");
    }
    let launcher = project.join("node_modules/.bin/subzero-mcp");
    assert_eq!(version(&launcher), version(&built.join("subzero")));
}

/// `initialize` and `tools/list` through the launcher, with the suite's MCP client.
fn tools_through(launcher: &Path, env: &Env) -> Vec<String> {
    let mut command = env.command("tools");
    command.exe = launcher.to_path_buf();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let session = McpSession::start(&command)
            .await
            .expect("the launcher answers initialize");
        let tools = session.list_tools().await.expect("tools/list");
        session.close().await.expect("close");
        let mut names: Vec<String> = tools.into_iter().map(|t| t.name.to_string()).collect();
        names.sort();
        names
    })
}

/// The broker the launcher `pid` started.
fn broker_of(pid: u32) -> u32 {
    wait_for(Duration::from_secs(10), || {
        descendants(pid)
            .into_iter()
            .find(|p| p.argv.get(1).is_some_and(|a| a == "mcp"))
    })
    .expect("the launcher started a broker")
    .pid
}

fn signal(pid: u32, signal: Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid fits"));
    nix::sys::signal::kill(pid, signal).expect("signal sent");
}

/// SIGTERM to the launcher (its stdin still open): the broker gets it, shuts down cleanly
/// (its log says which signal) and is gone, and the launcher exits 0 as the broker did.
fn assert_sigterm_reaches_the_broker(launcher: &Path, env: &Env) {
    let mut command = env.command("sigterm");
    command.exe = launcher.to_path_buf();
    let mut launched = RawBroker::start(&command);
    let broker = broker_of(launched.pid());
    assert!(
        launched.ping().is_some(),
        "the broker answers through the launcher"
    );
    signal(launched.pid(), Signal::SIGTERM);
    let status = launched
        .wait_exit(Duration::from_secs(30))
        .expect("the launcher exits after SIGTERM");
    assert!(
        eventually(Duration::from_secs(10), || read_proc(broker).is_none()),
        "the broker {broker} outlived its launcher"
    );
    assert_eq!(
        status.code(),
        Some(0),
        "the broker's clean shutdown: {status:?}"
    );
    let log = std::fs::read_to_string(env.log("sigterm")).expect("broker log");
    assert!(log.contains("SIGTERM: shutting down"), "{log}");
}

/// A broker killed by a signal: the launcher ends by that signal too.
fn assert_a_killed_broker_ends_the_launcher_alike(launcher: &Path, env: &Env) {
    let mut command = env.command("sigkill");
    command.exe = launcher.to_path_buf();
    let mut launched = RawBroker::start(&command);
    signal(broker_of(launched.pid()), Signal::SIGKILL);
    let status = launched
        .wait_exit(Duration::from_secs(30))
        .expect("the launcher exits with its broker");
    assert_eq!(status.signal(), Some(Signal::SIGKILL as i32), "{status:?}");
}

#[test]
fn the_packed_packages_install_offline_and_the_launcher_is_the_broker() {
    let Some(layout) = laid_out() else { return };
    let env = Env::new(Vec::new());
    let scratch = env.dir.path().join("npm");
    let project = scratch.join("project");
    pack_and_install(&layout, &scratch, &project);
    assert_installed_binaries(&project, &layout);

    let launcher = project.join("node_modules/.bin/subzero-mcp");
    let tools = tools_through(&launcher, &env);
    let mut wanted: Vec<&str> = subzero_runtime::mcp::TOOL_NAMES.to_vec();
    wanted.sort_unstable();
    assert_eq!(tools, wanted, "tools/list through the launcher");
    assert_sigterm_reaches_the_broker(&launcher, &env);
    assert_a_killed_broker_ends_the_launcher_alike(&launcher, &env);

    // As after `npm install --omit=optional`: the launcher alone.
    let platform = project.join("node_modules").join(&layout.platform_name);
    std::fs::remove_dir_all(&platform).expect("remove the platform package");
    let out = Command::new(&launcher)
        .args(["mcp", "--workspace", "."])
        .current_dir(&project)
        .output()
        .expect("the launcher runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    for part in [
        layout.platform_name.as_str(),
        "is not installed",
        "prebuilt platforms: linux-x64, linux-arm64",
        "--omit=optional",
        "reinstall subzero-mcp",
        "cargo install --locked subzero",
        "SUBZERO_BINARY",
    ] {
        assert!(said.contains(part), "the message lacks {part:?}: {said}");
    }
    assert_eq!(
        said.lines().next().map(|l| l.starts_with("subzero-mcp: ")),
        Some(true)
    );
    // SUBZERO_BINARY stands in for the missing package.
    let chosen = Command::new(&launcher)
        .arg("--version")
        .env("SUBZERO_BINARY", env!("CARGO_BIN_EXE_subzero"))
        .output()
        .expect("the launcher runs");
    let built = version(Path::new(env!("CARGO_BIN_EXE_subzero")));
    assert_eq!(String::from_utf8_lossy(&chosen.stdout).trim(), built);
}

#[test]
fn opencode_installed_with_npx_delegates_through_the_launcher_in_the_project() {
    let Some(layout) = laid_out() else { return };
    let Some(rig) = crate::hosts::opencode::configured() else {
        return;
    };
    pack_and_install(&layout, &rig.dir.path().join("npm"), &rig.workspace);
    let workspace = rig.workspace.to_str().expect("utf-8 workspace");
    let installed = rig.install_subzero_with(&["--npx", "--workspace", workspace]);
    assert!(installed.contains("created"), "{installed}");
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(rig.workspace.join("opencode.json")).expect("opencode.json"),
    )
    .expect("JSON");
    let package = format!("subzero-mcp@{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        config["mcp"]["subzero"]["command"],
        json!(["npx", "-y", package, "mcp", "--workspace", workspace])
    );

    // npm may fetch nothing (offline, a dead registry, no update check); its logs go where
    // only this environment says, so finding them there proves the host passed it to npx.
    let logs = rig.dir.path().join("npm-logs");
    let logs_dir = logs.to_str().expect("utf-8 temp dir");
    let mut env = crate::hosts::opencode::QUIET.to_vec();
    env.extend([
        ("npm_config_offline", "true"),
        ("npm_config_registry", DEAD_REGISTRY),
        ("npm_config_update_notifier", "false"),
        ("npm_config_logs_dir", logs_dir),
    ]);
    let run = |prompt: &str| rig.run(&["run", prompt], &env, crate::hosts::opencode::RUN_LIMIT);
    delegate_and_follow_up(&rig, &run);
    assert_npx_ran_offline(&logs, &package);
}

/// npm's debug logs in `logs`: `npm exec <package> mcp …` ran, and nothing went over HTTP.
fn assert_npx_ran_offline(logs: &Path, package: &str) {
    let texts: Vec<String> = std::fs::read_dir(logs)
        .unwrap_or_else(|e| panic!("npx wrote no log to {} ({e})", logs.display()))
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    let title = format!("verbose title npm exec {package} mcp");
    assert!(
        texts.iter().any(|t| t.contains(&title)),
        "no npx run of {package}: {texts:#?}"
    );
    let fetched: Vec<&str> = texts
        .iter()
        .flat_map(|t| t.lines())
        .filter(|l| l.contains("http fetch"))
        .collect();
    assert!(fetched.is_empty(), "npx fetched: {fetched:#?}");
}
