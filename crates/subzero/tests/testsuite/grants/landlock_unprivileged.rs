//! Landlock on the unprivileged path, end to end: CI runs as root, so here the broker
//! runs as `nobody` (as the user running the tests when that is not root) — its workers
//! then run inside a user + PID namespace — and a read-only template's `bash` and its MCP
//! server try to write. Every write fails with `EACCES`, although `nobody` owns the
//! workspace (so nothing but Landlock refuses them), and the child's receipts say what
//! was in force. The hostile escapes as `nobody` are `containment/pidns.rs`'s
//! `unprivileged_*` cases.
//!
//! These need a kernel with Landlock and unprivileged user namespaces.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::containment::{Case, NOBODY};
use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::RunAs;

/// A minimal MCP stdio server with one tool, `write_file`, which opens `path` for
/// writing and answers what happened, with the errno name on failure.
const WRITER_SERVER: &str = r#"
import errno, json, sys

TOOL = {"name": "write_file", "description": "write a file",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "writer", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        path = msg["params"]["arguments"]["path"]
        try:
            with open(path, "w") as f:
                f.write("written by the MCP server\n")
            text = "wrote " + path
        except OSError as e:
            text = "write failed: " + errno.errorcode.get(e.errno, str(e.errno))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"#;

/// A real Python interpreter (MCP servers get a cleared environment) that `user` can
/// run: not one under root's 0700 home, as a pyenv one is.
fn python_for(user: Option<RunAs>) -> PathBuf {
    let own = std::process::Command::new("python3")
        .args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable))",
        ])
        .output()
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        .ok();
    let candidates = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .chain(own);
    let runnable = |path: &Path| {
        path.canonicalize().is_ok_and(|real| {
            user.is_none()
                || real
                    .ancestors()
                    .all(|p| std::fs::metadata(p).is_ok_and(|m| m.mode() & 0o001 != 0))
        })
    };
    candidates
        .filter(|p| runnable(p))
        .find_map(|p| p.canonicalize().ok())
        .unwrap_or_else(|| panic!("this test needs a python3 that {user:?} can run"))
}

#[tokio::test(flavor = "multi_thread")]
async fn as_nobody_a_read_only_templates_bash_and_mcp_server_get_eacces_on_every_write() {
    let root = nix::unistd::geteuid().is_root();
    let user = root.then_some(NOBODY);
    let env = Env::new(Vec::new());
    let script = env.dir.path().join("writer.py");
    std::fs::write(&script, WRITER_SERVER).expect("server script");
    std::fs::write(env.workspace().join("notes.txt"), "readable text\n").expect("seed");
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(
        env.config(),
        format!(
            "{config}\n[templates.auditor]\ndescription = \"Reads; its tools may not write\"\ninstructions = \"Audit.\"\ntools = [\"read\", \"bash\"]\nread_only = true\n\n[[templates.auditor.mcp_servers]]\nname = \"writer\"\ncommand = \"{python}\"\nargs = [\"{script}\"]\nallowed_tools = [\"write_file\"]\n",
            python = python_for(user).display(),
            script = script.display(),
        ),
    )
    .expect("config");
    let ws = env.workspace();
    let tmp_target = env.dir.path().join("outside.txt");
    let command = format!(
        "cat notes.txt; echo \"uid=$(id -u)\"; \
         echo x > inside.txt; echo \"inside=$?\"; \
         echo x > {outside}; echo \"outside=$?\"; \
         mkdir newdir; echo \"mkdir=$?\"; rm notes.txt; echo \"rm=$?\"; \
         : > notes.txt; echo \"truncate=$?\"",
        outside = tmp_target.display(),
    );
    let bash = json!({"command": command}).to_string();
    let mcp = json!({"path": ws.join("by-mcp.txt")}).to_string();
    env.server.push(Reply::tool_calls(&[
        ("c1", "bash", &bash),
        ("c2", "writer__write_file", &mcp),
    ]));
    env.server.push(Reply::text("done"));

    let case = Case::with_user(env, user);
    let env = &case.env;
    let mut reaper = Reaper::new(env.dir.path());
    let s = case.broker("broker").await;
    reaper.broker(s.pid());
    let (child, _) = spawn(&s, env, "auditor", "Try to write").await;
    let snap = settled(&s, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );

    let seen = env.server.requests()[1].body.clone();
    let uid = user.map_or_else(|| nix::unistd::geteuid().as_raw(), |u| u.uid);
    assert!(
        seen.contains(&format!("uid={uid}")),
        "bash ran as {uid}: {seen}"
    );
    assert!(seen.contains("readable text"), "reads keep working: {seen}");
    for step in ["inside=1", "outside=1", "mkdir=1", "rm=1", "truncate=1"] {
        assert!(seen.contains(step), "{step} expected in {seen}");
    }
    assert!(seen.contains("Permission denied"), "EACCES: {seen}");
    assert!(
        seen.contains("write failed: EACCES"),
        "the MCP server's write: {seen}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("notes"),
        "readable text\n",
        "neither removed nor truncated"
    );
    for made in [
        ws.join("inside.txt"),
        ws.join("newdir"),
        ws.join("by-mcp.txt"),
        tmp_target,
    ] {
        assert!(!made.exists(), "{} was written", made.display());
    }

    // What was in force: the child's filesystem receipt, and the process containment a
    // worker of this broker gets (the handshake worker's, as `info` reports it).
    let snap = receipts(&s, &child).await;
    let filesystem = snap
        .containment
        .as_ref()
        .and_then(|c| c.filesystem.as_ref())
        .unwrap_or_else(|| panic!("no filesystem receipt: {snap:#?}"));
    assert!(filesystem.enforced, "{filesystem:#?}");
    assert!(filesystem.summary.ends_with("read-only"), "{filesystem:#?}");
    let info = broker_info(&s).await;
    let process = info
        .enforcement
        .containment
        .as_ref()
        .and_then(|c| c.process.as_ref())
        .unwrap_or_else(|| panic!("no process containment: {info:#?}"));
    assert_eq!(
        process.mode,
        p::ProcessContainmentMode::PidNamespace,
        "{process:#?}"
    );
    s.close().await.expect("close");
}
