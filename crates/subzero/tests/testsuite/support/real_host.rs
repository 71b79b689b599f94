//! What every real-host test shares, whichever model API its host speaks (`support::hosts`
//! for Claude Code and Codex, `support::chat_hosts` for OpenCode and Pi): the host's npm
//! project and its executable, the demo workspace and the Subzero credential the children use,
//! a host command with a cleared environment whose outside origins are refused, bounded runs,
//! and the processes a test left behind.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use subzero_testkit::ScriptedServer;
use subzero_testkit::procs::{Proc, processes};

/// The credential reference the parent names in `subzero_spawn`.
pub const CRED: &str = "scripted";

/// The 9 Subzero tools, by their MCP names.
pub const TOOLS: [&str; 9] = [
    "subzero_spawn",
    "subzero_get",
    "subzero_send",
    "subzero_stop",
    "subzero_resume",
    "subzero_output",
    "subzero_list",
    "subzero_info",
    "subzero_apply",
];

/// `tests/hosts/<dir>`: a host's npm project.
pub fn host_project(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/hosts")
        .join(dir)
}

/// The host `dir`'s executable `bin` when it is installed, or `None` after saying loudly why
/// the host's test (group `host_<dir>`) is skipped and that `how` installs it. In strict mode
/// (`cargo xtask test`, CI) a missing host fails the test.
pub fn installed(dir: &str, bin: PathBuf, how: &str) -> Option<PathBuf> {
    let group = format!("host_{}", dir.replace('-', "_"));
    if bin.exists() {
        crate::support::prereq::present(&group);
        return Some(bin);
    }
    let what = format!("the host {dir} ({})", bin.display());
    crate::support::prereq::missing(&group, &what, how);
    None
}

/// The project a host works on: `workspace/README.md` and nothing else.
pub fn write_demo_workspace(workspace: &Path) {
    std::fs::write(
        workspace.join("README.md"),
        "# Demo project\n\nA small project for Subzero's host tests.\n",
    )
    .expect("readme");
}

/// A Subzero config whose [`CRED`] credential is read from `key_var` and may be sent only to
/// the children's model.
pub fn credential_config(key_var: &str, children: &ScriptedServer) -> String {
    let origin = children.base_url().trim_end_matches("/v1").to_owned();
    format!("[credentials.{CRED}]\nenv = \"{key_var}\"\norigins = [\"{origin}\"]\n")
}

/// `program` with nothing of the test runner's environment: HOME, `path`, a plain locale
/// and terminal, every outside origin sent to `proxy` (loopback stays direct), no stdin.
pub fn isolated_command(
    program: &Path,
    home: &Path,
    path: impl AsRef<OsStr>,
    proxy: &str,
) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", path)
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb")
        .env("HTTPS_PROXY", proxy)
        .env("HTTP_PROXY", proxy)
        .env("https_proxy", proxy)
        .env("http_proxy", proxy)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .stdin(Stdio::null());
    cmd
}

/// `child`'s output once it ends within `limit`; after that `kill` gets its pid and the error
/// holds whatever output there was, for the caller's failure message.
pub fn output_within(
    child: Child,
    limit: Duration,
    kill: impl FnOnce(u32),
) -> Result<Output, Option<Output>> {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(output) => Ok(output.expect("host output")),
        Err(_) => {
            kill(pid);
            Err(rx.recv().ok().and_then(Result::ok))
        }
    }
}

/// Processes whose command line names `needle` (e.g. the test's temp dir): brokers and
/// workers of this test wherever they were re-parented. The test process is left out.
pub fn processes_naming(needle: &str) -> Vec<Proc> {
    let me = std::process::id();
    processes()
        .into_iter()
        .filter(|p| p.pid != me && p.argv.iter().any(|a| a.contains(needle)))
        .collect()
}
