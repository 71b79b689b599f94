//! Kernel-enforced filesystem grants (Landlock) on real worker, `bash` and MCP server
//! processes: a read-only grant makes every write of a tool process fail with `EACCES` — an
//! MCP server's, its children's, a read-only template's `bash`'s — while reads keep working;
//! a coder's writes land only in the workspace, its scratch space and its listed paths; a
//! grant that requires enforcement fails before any model call where the kernel cannot give
//! it. "The kernel cannot" is simulated with `subzero-worker worker --landlock off`, what the broker
//! passes for `[containment] filesystem = "off"`; the same switch, used on a grant that does
//! not require enforcement, shows that the writes refused here succeed without Landlock.
//!
//! These tests need a kernel with Landlock (Linux ≥ 5.13 with the landlock LSM enabled);
//! they fail, saying so, on one without it. Landlock restricts root too, so they hold in CI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support;
use crate::support::control::{hello_containment, is_hello, run_settled};
use crate::support::worker::{RunSpec, WorkerProc, coder, researcher, snapshot, tool_messages};
use serde_json::{Value, json};
use subzero_protocol as p;
use subzero_testkit::{Reply, ScriptedServer};

/// A minimal MCP stdio server (newline-delimited JSON-RPC) with two tools: `write_file`
/// opens `path` for writing itself, `spawn_write` has a child shell write it. Each answers
/// what happened, with the errno name on failure.
const WRITER_SERVER: &str = r#"
import errno, json, subprocess, sys

TOOLS = [
    {"name": "write_file", "description": "write a file",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "spawn_write", "description": "write a file from a child shell",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}},
]

def call(name, args):
    path = args["path"]
    if name == "write_file":
        try:
            with open(path, "w") as f:
                f.write("written by the MCP server\n")
            return "wrote " + path
        except OSError as e:
            return "write failed: " + errno.errorcode.get(e.errno, str(e.errno))
    done = subprocess.run(["/bin/sh", "-c", 'echo child > "$1"', "sh", path],
                          capture_output=True, text=True)
    return "child exit %d: %s" % (done.returncode, done.stderr.strip())

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
        result = {"tools": TOOLS}
    elif method == "tools/call":
        text = call(msg["params"]["name"], msg["params"].get("arguments") or {})
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"#;

/// The real Python interpreter (not a shim that needs the caller's environment: MCP
/// servers get a cleared one).
fn python() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("these tests need python3 for their MCP server");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

fn with_writer_server(mut snapshot: Value, script: &Path) -> Value {
    snapshot["mcpServers"] = json!([{
        "name": "writer",
        "command": python(),
        "args": [script],
        "envRefs": {},
        "allowedTools": ["write_file", "spawn_write"],
    }]);
    snapshot
}

fn filesystem(mut snapshot: Value, access: &str, writable: &[&Path], require: bool) -> Value {
    snapshot["filesystem"] = json!({
        "access": access,
        "writablePaths": writable,
        "requireEnforcement": require,
    });
    snapshot
}

/// A worker that says it enforces filesystem grants with Landlock.
fn landlocked_worker() -> WorkerProc {
    let mut worker = WorkerProc::spawn();
    let hello = worker.expect("hello", is_hello);
    let fs = hello_containment(&hello).filesystem.expect("filesystem");
    let abi = fs
        .landlock_abi
        .expect("these tests need a kernel with Landlock")
        .get();
    assert_eq!(
        fs.summary.as_str(),
        format!("landlock-abi-{abi}"),
        "{fs:#?}"
    );
    worker
}

/// Runs one model turn of `calls`, then a final answer; returns the tool results in order.
/// The run completing is the model endpoint reached from the worker.
pub(super) fn run_tools(
    worker: &mut WorkerProc,
    run_id: &str,
    snapshot: Value,
    workspace: &Path,
    calls: &[(&str, &str, String)],
) -> Vec<String> {
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, name, args)| (*id, *name, args.as_str()))
        .collect();
    let model = ScriptedServer::start(vec![Reply::tool_calls(&calls), Reply::text("done")])
        .expect("model server");
    worker
        .send(&RunSpec::new(run_id, model.base_url(), snapshot, workspace, &transcript).message());
    let settled = run_settled(&worker.settled(run_id));
    assert_eq!(
        settled.status,
        p::RunSettledStatus::Completed,
        "{settled:#?}"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one tool turn and the answer");
    tool_messages(&requests[1].json().expect("json"))
}

fn bash(command: &str) -> String {
    json!({ "command": command }).to_string()
}

fn path_arg(path: &Path) -> String {
    json!({ "path": path }).to_string()
}

#[test]
fn a_read_only_childs_mcp_server_and_its_children_get_eacces_on_every_write() {
    let ws = tempfile::tempdir().expect("tempdir");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let server_dir = tempfile::tempdir().expect("tempdir");
    let script = server_dir.path().join("writer.py");
    std::fs::write(&script, WRITER_SERVER).expect("server script");
    let inside = ws.path().join("inside.txt");
    let outside = elsewhere.path().join("outside.txt");
    let by_child = ws.path().join("by-child.txt");
    let mut worker = landlocked_worker();

    // The researcher's grant as a snapshot without a filesystem member (frozen before it
    // existed) derives it: read-only, since it is not write-capable.
    let results = run_tools(
        &mut worker,
        "run_0000000000000000000000KA01",
        with_writer_server(researcher(), &script),
        ws.path(),
        &[
            ("c1", "writer__write_file", path_arg(&inside)),
            ("c2", "writer__write_file", path_arg(&outside)),
            ("c3", "writer__spawn_write", path_arg(&by_child)),
        ],
    );
    assert!(results[0].contains("write failed: EACCES"), "{results:?}");
    assert!(results[1].contains("write failed: EACCES"), "{results:?}");
    assert!(
        results[2].contains("child exit") && results[2].contains("Permission denied"),
        "{results:?}"
    );
    for path in [&inside, &outside, &by_child] {
        assert!(!path.exists(), "{} was written", path.display());
    }
}

#[test]
fn a_read_only_templates_bash_reads_but_every_write_fails_with_eacces() {
    let ws = tempfile::tempdir().expect("tempdir");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    std::fs::write(ws.path().join("notes.txt"), "readable text\n").expect("seed");
    let outside = elsewhere.path().join("outside.txt");
    let mut worker = landlocked_worker();
    // A template with `read_only = true` and `bash`: not write-capable, read-only grant.
    let snapshot = filesystem(
        snapshot("reader", &["read", "bash"], false),
        "read-only",
        &[],
        false,
    );
    let command = format!(
        "cat notes.txt; echo sink > /dev/null && echo sink-ok; \
         echo x > inside.txt; echo \"inside=$?\"; \
         echo x > {outside}; echo \"outside=$?\"; \
         mkdir newdir; echo \"mkdir=$?\"; rm notes.txt; echo \"rm=$?\"; \
         : > notes.txt; echo \"truncate=$?\"; \
         {python} -c 'import errno; open(\"py.txt\", \"w\")' 2>&1 | grep -o PermissionError.*",
        outside = outside.display(),
        python = python().display(),
    );
    let results = run_tools(
        &mut worker,
        "run_0000000000000000000000KA02",
        snapshot,
        ws.path(),
        &[("c1", "bash", bash(&command))],
    );
    let out = &results[0];
    assert!(out.contains("readable text"), "reads keep working: {out}");
    assert!(
        out.contains("sink-ok"),
        "the device sinks stay writable: {out}"
    );
    for step in ["inside=1", "outside=1", "mkdir=1", "rm=1", "truncate=1"] {
        assert!(out.contains(step), "{step} expected in {out}");
    }
    assert!(out.contains("Permission denied"), "{out}");
    assert!(
        out.contains("PermissionError: [Errno 13]"),
        "EACCES, not another error: {out}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).expect("notes"),
        "readable text\n",
        "neither removed nor truncated"
    );
    assert!(!ws.path().join("inside.txt").exists());
    assert!(!ws.path().join("newdir").exists());
    assert!(!outside.exists());
}

#[test]
fn a_coders_writes_land_in_the_workspace_scratch_and_listed_paths_and_nowhere_else() {
    let ws = tempfile::tempdir().expect("tempdir");
    let listed = tempfile::tempdir().expect("tempdir");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let outside = elsewhere.path().join("outside.txt");
    let mut worker = landlocked_worker();
    let snapshot = filesystem(coder(), "workspace", &[listed.path()], false);
    let command = format!(
        "echo ws > inside.txt && mkdir -p sub/dir && mv inside.txt sub/dir/moved.txt && echo ws-ok; \
         echo tmp > \"$TMPDIR/scratch.txt\" && echo \"scratch-ok $TMPDIR\"; \
         echo listed > {listed}/cache.txt && echo listed-ok; \
         echo x > {outside}; echo \"outside=$?\"; \
         echo x > /tmp/subzero-landlock-probe-$$; echo \"tmp=$?\"",
        listed = listed.path().display(),
        outside = outside.display(),
    );
    let results = run_tools(
        &mut worker,
        "run_0000000000000000000000KA03",
        snapshot,
        ws.path(),
        &[("c1", "bash", bash(&command))],
    );
    let out = &results[0];
    assert!(out.contains("ws-ok"), "{out}");
    assert!(out.contains("scratch-ok"), "{out}");
    assert!(out.contains("listed-ok"), "{out}");
    assert!(out.contains("outside=1"), "{out}");
    assert!(out.contains("tmp=1"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(ws.path().join("sub/dir/moved.txt").exists());
    assert_eq!(
        std::fs::read_to_string(listed.path().join("cache.txt")).expect("listed"),
        "listed\n"
    );
    assert!(!outside.exists());
    // The scratch space is the worker's own, below the state directory's scratch parent or
    // the system temp directory, and not the workspace.
    let scratch = out
        .lines()
        .find_map(|l| l.strip_prefix("scratch-ok "))
        .expect("scratch path");
    assert!(!Path::new(scratch).starts_with(ws.path()), "{scratch}");
}

#[test]
fn a_coders_write_outside_succeeds_only_where_landlock_is_off() {
    // The control for the tests above: the same writes with Landlock turned off land.
    let ws = tempfile::tempdir().expect("tempdir");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let outside = elsewhere.path().join("outside.txt");
    let mut worker = WorkerProc::spawn_with_args(&["--landlock", "off"]);
    let hello = worker.expect("hello", is_hello);
    let fs = hello_containment(&hello).filesystem.expect("filesystem");
    assert_eq!(fs.landlock_abi, None, "{fs:#?}");
    assert!(
        fs.summary.starts_with("none: ") && fs.summary.contains("filesystem = \"off\""),
        "{fs:#?}"
    );
    let results = run_tools(
        &mut worker,
        "run_0000000000000000000000KA04",
        filesystem(coder(), "workspace", &[], false),
        ws.path(),
        &[(
            "c1",
            "bash",
            bash(&format!(
                "echo x > {}; echo \"outside=$?\"",
                outside.display()
            )),
        )],
    );
    assert!(results[0].contains("outside=0"), "{results:?}");
    assert!(outside.exists());
}

#[test]
fn a_grant_that_needs_the_kernel_fails_before_any_model_call_where_landlock_is_off() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let model = ScriptedServer::start(vec![]).expect("model server");
    let mut worker = WorkerProc::spawn_with_args(&["--landlock", "off"]);
    let cases = [
        // `require_enforcement = true` on a coder.
        (
            "run_0000000000000000000000KA05",
            filesystem(coder(), "workspace", &[], true),
        ),
        // `require_enforcement = true` on a researcher.
        (
            "run_0000000000000000000000KA06",
            filesystem(researcher(), "read-only", &[], true),
        ),
        // A read-only template's `bash` is only read-only by the kernel.
        (
            "run_0000000000000000000000KA07",
            filesystem(
                snapshot("reader", &["read", "bash"], false),
                "read-only",
                &[],
                false,
            ),
        ),
    ];
    for (run_id, snapshot) in cases {
        worker.send(
            &RunSpec::new(run_id, model.base_url(), snapshot, ws.path(), &transcript).message(),
        );
        let settled = run_settled(&worker.settled(run_id));
        assert_eq!(settled.status, p::RunSettledStatus::Failed, "{settled:#?}");
        let error = settled.error.expect("error");
        assert_eq!(error.code, p::ErrorCode::UnsupportedGrant, "{error:#?}");
        let message = error.message.as_str();
        assert!(
            message.contains("kernel-enforced") && message.contains("filesystem = \"off\""),
            "{message}"
        );
    }
    assert!(model.requests().is_empty(), "no model call was made");
    assert!(!transcript.exists(), "no transcript was started");
}

/// A config with a template that requires enforcement, and optionally Landlock turned off.
fn broker_env(landlock_off: bool) -> support::mcp::Env {
    let env = support::mcp::Env::new(vec![Reply::text("done"), Reply::text("done")]);
    let mut config = std::fs::read_to_string(env.config()).expect("config");
    config.push_str(
        "\n[templates.strict]\ndescription = \"Reads, enforced by the kernel\"\ninstructions = \"Read.\"\ntools = [\"read\"]\nrequire_enforcement = true\n",
    );
    if landlock_off {
        config.push_str("\n[containment]\nfilesystem = \"off\"\n");
    }
    std::fs::write(env.config(), config).expect("config");
    env
}

#[tokio::test(flavor = "multi_thread")]
async fn a_template_requiring_enforcement_is_refused_at_spawn_where_landlock_is_off() {
    use crate::support::mcp::*;
    let env = broker_env(true);
    let mut reaper = support::faults::Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());

    let info = broker_info(&s).await;
    let fs = enforced_filesystem(&info);
    assert_eq!(fs.landlock_abi, None, "{info:#?}");
    assert!(
        fs.summary.starts_with("none: ") && fs.summary.contains("filesystem = \"off\""),
        "{fs:#?}"
    );
    assert_eq!(info.enforcement.landlock, None, "{info:#?}");

    let code = err(
        &s,
        "subzero_spawn",
        json!({"prompt": "read", "templateId": "strict", "model": env.model()}),
    )
    .await;
    assert_eq!(code, "unsupported_grant");
    assert!(env.server.requests().is_empty(), "no model call was made");

    // A template that does not require it still runs, and its snapshot says it is not
    // enforced and why.
    let (child, _run) = spawn(&s, &env, "researcher", "read").await;
    settled(&s, &child, std::time::Duration::from_secs(20)).await;
    let snap = get(&s, json!({"childId": child, "containment": true})).await;
    let fs = child_filesystem(&snap);
    assert_eq!(fs.access, p::FilesystemAccess::ReadOnly, "{snap:#?}");
    assert!(!fs.enforced, "{snap:#?}");
    assert!(
        fs.summary.starts_with("none: ") && fs.summary.ends_with("writes are not restricted"),
        "{fs:#?}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn info_and_snapshots_name_the_landlock_enforcement_in_force() {
    use crate::support::mcp::*;
    let env = broker_env(false);
    let mut reaper = support::faults::Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());

    let info = broker_info(&s).await;
    let abi = info
        .enforcement
        .landlock
        .expect("this test needs a kernel with Landlock");
    let fs = enforced_filesystem(&info);
    assert_eq!(fs.landlock_abi, Some(abi), "{info:#?}");
    assert_eq!(
        fs.summary.as_str(),
        format!("landlock-abi-{abi}"),
        "{info:#?}"
    );

    for (template, access) in [("strict", "read-only"), ("coder", "workspace")] {
        let (child, _run) = spawn(&s, &env, template, "go").await;
        settled(&s, &child, std::time::Duration::from_secs(20)).await;
        let snap = get(&s, json!({"childId": child, "containment": true})).await;
        let fs = child_filesystem(&snap);
        assert_eq!(fs.access.to_string(), access, "{snap:#?}");
        assert!(fs.enforced, "{snap:#?}");
        assert_eq!(fs.landlock_abi, Some(abi), "{snap:#?}");
        assert_eq!(
            fs.summary.as_str(),
            format!("landlock-abi-{abi} {access}"),
            "{snap:#?}"
        );
    }
    s.close().await.expect("close");
}

/// The filesystem enforcement `subzero_info` reports.
fn enforced_filesystem(info: &p::Info) -> &p::FilesystemSupport {
    info.enforcement
        .containment
        .as_ref()
        .and_then(|c| c.filesystem.as_ref())
        .unwrap_or_else(|| panic!("no filesystem enforcement: {info:#?}"))
}

/// The filesystem receipt of a child's snapshot.
fn child_filesystem(snap: &p::ChildSnapshot) -> &p::FilesystemEnforcement {
    snap.containment
        .as_ref()
        .and_then(|c| c.filesystem.as_ref())
        .unwrap_or_else(|| panic!("no filesystem receipt: {snap:#?}"))
}
