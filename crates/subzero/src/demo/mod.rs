//! `subzero demo`: Subzero's main job, end to end, offline.
//!
//! It plays the parent agent: starts the real `subzero mcp` as a subprocess, talks MCP to
//! it over stdio, and delegates to a `researcher` child whose model is a scripted
//! OpenAI-compatible server on loopback ([`model`]). It spawns the child on the project's
//! README, steers it, queues a followup, stops a long run with confirmation, and prints
//! the result through `subzero_output`. Nothing leaves the machine; the state lives in a
//! temporary directory that is removed at the end.

use std::path::{Path, PathBuf};
use std::time::Instant;

mod model;

use std::time::Duration;

use clap::Args;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use subzero_protocol::{
    ArtifactChunk, ChildEvent, ChildSnapshot, ChildState, Info, ListOutput, SendOutput,
    SpawnOutput, StopOutput, TerminalRunStatus,
};
use subzero_runtime::mcp::client::{BrokerCommand, McpSession, ToolReply};

use model::{DemoModel, Reply};

/// Flags of `subzero demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The workspace the child reads (default: the current directory; a sample README is
    /// used when it has none).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Keep the temporary state directory and print its path.
    #[arg(long)]
    pub keep_state: bool,
}

type DemoResult<T> = Result<T, String>;

/// Run the demo; returns the exit code.
pub fn run(args: DemoArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("subzero demo: cannot start the async runtime: {e}");
            return 1;
        }
    };
    match runtime.block_on(demo(args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("\nsubzero demo failed: {e}");
            1
        }
    }
}

/// The scripted model's replies, in the order the child's runs will ask for them.
fn script() -> Vec<Reply> {
    vec![
        // Run 1 (spawn): read the README, slowly enough for the steer to arrive first.
        Reply::tool_call(
            Duration::from_millis(400),
            "call_read",
            "read",
            r#"{"path":"README.md"}"#,
        ),
        // Run 1, after the tool result and the steer: the answer, streamed.
        Reply::text(&[
            "The README says Subzero is a local MCP stdio broker ",
            "that lets a parent coding agent delegate work to persistent child agents. ",
            "As you asked, in one line: spawn, wait with subzero_get, read the result.",
        ]),
        // Run 2 (the queued followup): list the workspace, then answer.
        Reply::tool_call(Duration::ZERO, "call_ls", "ls", r#"{"path":"."}"#),
        Reply::text(&[
            "The workspace's top level holds the files listed by ls; ",
            "README.md is among them.",
        ]),
        // Run 3: a model that never answers, so the demo can stop it.
        Reply::Hang,
    ]
}

async fn demo(args: DemoArgs) -> DemoResult<()> {
    let started = Instant::now();
    let temp = TempDir::new()?;
    let workspace = workspace(args.workspace.as_deref(), temp.path())?;
    let server =
        DemoModel::start(script()).map_err(|e| format!("cannot start the scripted model: {e}"))?;
    let base_url = server.base_url();
    let origin = base_url.trim_end_matches("/v1").to_owned();
    let config = temp.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[credentials.demo]\nenv = \"SUBZERO_DEMO_KEY\"\norigins = [\"{origin}\"]\n"),
    )
    .map_err(|e| format!("cannot write the demo config: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate subzero: {e}"))?;
    say("Subzero demo: a parent agent delegating to a child, offline, with a scripted model");
    say(&format!("  workspace {}", workspace.display()));
    say(&format!("  model     {base_url} (scripted, loopback)"));
    let session = McpSession::start(&BrokerCommand {
        exe,
        workspace: workspace.clone(),
        state_dir: temp.path().join("state"),
        config,
        env: vec![("SUBZERO_DEMO_KEY".into(), "sk-demo-not-a-real-key".into())],
        log_file: Some(temp.path().join("broker.log")),
    })
    .await
    .map_err(|e| format!("cannot start `subzero mcp`: {e}"))?;
    say("\n1. started `subzero mcp` and completed the MCP handshake");
    let outcome = drive(&session, &server).await;
    let closed = session.close().await;
    if let Err(e) = outcome {
        return Err(with_log_tail(e, &temp.path().join("broker.log")));
    }
    closed.map_err(|e| format!("closing the broker failed: {e}"))?;
    let requests = server.requests();
    let steered = requests.iter().any(|body| body.contains("one line"));
    say(&format!(
        "\n9. the scripted model saw {} requests (none retried); the steer reached the model: {}",
        requests.len(),
        if steered { "yes" } else { "no" }
    ));
    if !steered {
        return Err("the steer did not reach the model".into());
    }
    if args.keep_state {
        let kept = temp.keep();
        say(&format!("   state kept in {}", kept.display()));
    }
    say(&format!(
        "\nDemo finished in {:.1} s.",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// `error`, then the last lines of the broker's log (its workers' too): what the demo saw
/// go wrong is there, and the temporary directory holding it goes away.
fn with_log_tail(error: String, log: &std::path::Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(20)..];
    if tail.is_empty() {
        return error;
    }
    let tail = tail.join("\n");
    let tail = crate::terminal_text::escape(&tail, crate::terminal_text::Lines::Many);
    format!("{error}\nthe broker's log ended with:\n{tail}")
}

async fn drive(s: &McpSession, server: &DemoModel) -> DemoResult<()> {
    let base_url = server.base_url();
    let info: Info = ok(s, "subzero_info", json!({})).await?;
    let templates: Vec<&str> = info
        .templates
        .iter()
        .map(|t| t.template_id.as_str())
        .collect();
    say(&format!(
        "2. subzero_info: templates {templates:?}, worker {} {}",
        info.worker.name.as_str(),
        info.worker.version.as_str()
    ));

    let model = json!({"url": base_url, "model": "scripted", "credentialRef": "demo"});
    let spawned: SpawnOutput = ok(
        s,
        "subzero_spawn",
        json!({"prompt": "Read README.md and tell me what this project is.", "templateId": "researcher", "model": model}),
    )
    .await?;
    let (child, first_run) = (spawned.child_id.to_string(), spawned.run_id.to_string());
    say(&format!(
        "3. subzero_spawn researcher → child {child}, run {first_run} (returned at once)"
    ));

    let steer: SendOutput = ok(
        s,
        "subzero_send",
        json!({"childId": child, "mode": "steer", "message": "Keep the answer to one line.", "requestId": "demo-steer-1"}),
    )
    .await?;
    say(&format!(
        "4. subzero_send steer → delivery {}",
        steer.delivery
    ));

    let followup: SendOutput = ok(
        s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "Now list the top-level files."}),
    )
    .await?;
    let second_run = followup.run_id.to_string();
    say(&format!(
        "5. subzero_send followup → run {second_run}, delivery {}",
        followup.delivery
    ));
    settled_followup(s, &child, &second_run).await?;
    stop_a_long_run(s, server, &child).await?;

    let history: ListOutput = ok(s, "subzero_list", json!({})).await?;
    say(&format!(
        "   subzero_list → {} child(ren) in this workspace",
        history.children.len()
    ));
    print_first_result(s, &child, &first_run).await
}

/// Waits for the child to settle and shows the followup's result.
async fn settled_followup(s: &McpSession, child: &str, run: &str) -> DemoResult<()> {
    let (snapshot, calls, bytes) = wait_settled(s, child).await?;
    let kinds: Vec<&str> = snapshot.events.iter().map(ChildEvent::kind).collect();
    say(&format!(
        "6. subzero_get waitMs=30000 → state {} after {calls} call(s), {bytes} bytes read; events {kinds:?}",
        snapshot.state
    ));
    match &snapshot.last_run {
        Some(last)
            if last.run_id.as_str() == run && last.status == TerminalRunStatus::Completed =>
        {
            say(&format!("   followup result: {}", last.preview.as_str()));
            Ok(())
        }
        other => Err(format!("the followup did not complete: {other:?}")),
    }
}

/// Starts a run whose model never answers and stops it with confirmation.
async fn stop_a_long_run(s: &McpSession, server: &DemoModel, child: &str) -> DemoResult<()> {
    let long: SendOutput = ok(
        s,
        "subzero_send",
        json!({"childId": child, "mode": "followup", "message": "Take as long as you need on this one."}),
    )
    .await?;
    let long_run = long.run_id.to_string();
    // Stop it only once the model request is in flight, so there is something to cancel.
    tokio::task::block_in_place(|| server.wait_for_requests(5, Duration::from_secs(5)));
    let stopped: StopOutput = ok(
        s,
        "subzero_stop",
        json!({"childId": child, "expectedRunId": long_run, "waitMs": 10000}),
    )
    .await?;
    say(&format!(
        "7. a long run {long_run} started; subzero_stop → requested {}, confirmed {}, status {}",
        stopped.requested, stopped.confirmed, stopped.status
    ));
    if stopped.confirmed {
        Ok(())
    } else {
        Err("the stop was not confirmed".into())
    }
}

/// Wait the way the tool descriptions teach: long waits until the child settles.
async fn wait_settled(s: &McpSession, child: &str) -> DemoResult<(ChildSnapshot, usize, usize)> {
    let mut calls = 0;
    let mut bytes = 0;
    loop {
        let reply = call(s, "subzero_get", json!({"childId": child, "waitMs": 30000})).await?;
        calls += 1;
        bytes += reply.bytes;
        if reply.is_error {
            return Err(reply.text);
        }
        let snapshot: ChildSnapshot = typed("subzero_get", reply.structured)?;
        if snapshot.state != ChildState::Running || calls >= 10 {
            return Ok((snapshot, calls, bytes));
        }
    }
}

/// Read the first run's full result through `subzero_output`, in chunks.
async fn print_first_result(s: &McpSession, child: &str, run: &str) -> DemoResult<()> {
    let snapshot: ChildSnapshot = ok(
        s,
        "subzero_get",
        json!({"childId": child, "eventLimit": 50}),
    )
    .await?;
    let last_run = snapshot.last_run.as_ref().map(|r| &r.run_id);
    let artifact = snapshot
        .events
        .iter()
        .find_map(|e| match e {
            ChildEvent::Completed { artifact_id, .. }
                if e.run_in(last_run).is_some_and(|r| r.as_str() == run) =>
            {
                Some(artifact_id.to_string())
            }
            _ => None,
        })
        .ok_or("the first run's completed event is not in the snapshot")?;
    let mut offset = 0u64;
    let mut result = String::new();
    loop {
        let chunk: ArtifactChunk = ok(
            s,
            "subzero_output",
            json!({"artifactId": artifact, "offset": offset, "length": 64}),
        )
        .await?;
        result.push_str(&chunk.text);
        offset = chunk.next_offset;
        if chunk.eof {
            break;
        }
    }
    say(&format!(
        "8. subzero_output {artifact} (64-byte chunks) → the first run's full result:"
    ));
    say(&format!("   {result}"));
    Ok(())
}

async fn call(s: &McpSession, tool: &str, args: Value) -> DemoResult<ToolReply> {
    s.call(tool, args).await.map_err(|e| format!("{tool}: {e}"))
}

/// A call that must succeed, its output read as the tool's output type.
async fn ok<T: DeserializeOwned>(s: &McpSession, tool: &str, args: Value) -> DemoResult<T> {
    let reply = call(s, tool, args).await?;
    if reply.is_error {
        return Err(format!("{tool} failed: {}", reply.text));
    }
    typed(tool, reply.structured)
}

fn typed<T: DeserializeOwned>(tool: &str, value: Value) -> DemoResult<T> {
    serde_json::from_value(value)
        .map_err(|e| format!("{tool} answered outside its output type: {e}"))
}

fn say(line: &str) {
    println!("{line}");
}

/// The workspace the child reads: the given or current directory if it has a README,
/// else a sample workspace inside the demo's temporary directory.
fn workspace(given: Option<&Path>, temp: &Path) -> DemoResult<PathBuf> {
    let dir = match given {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    if dir.join("README.md").is_file() {
        return dir
            .canonicalize()
            .map_err(|e| format!("{}: {e}", dir.display()));
    }
    let sample = temp.join("workspace");
    std::fs::create_dir_all(&sample)
        .map_err(|e| format!("cannot create a sample workspace: {e}"))?;
    std::fs::write(
        sample.join("README.md"),
        "# Sample project\n\nSubzero is a local MCP stdio broker that delegates work to child agents.\n",
    )
    .map_err(|e| format!("cannot write the sample README: {e}"))?;
    Ok(sample)
}

/// A temporary directory removed on drop unless kept.
struct TempDir(Option<PathBuf>);

impl TempDir {
    fn new() -> DemoResult<Self> {
        let base = std::env::temp_dir().join(format!("subzero-demo-{}", std::process::id()));
        std::fs::create_dir_all(&base)
            .map_err(|e| format!("cannot create {}: {e}", base.display()))?;
        Ok(TempDir(Some(base)))
    }

    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new("/nonexistent"))
    }

    fn keep(mut self) -> PathBuf {
        self.0.take().unwrap_or_default()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}
