//! Tool limits end to end: the real broker over MCP, real workers, a scripted model.
//! `subzero_info` shows the `[tool_limits]` defaults and each template's resolved limits;
//! a spawn freezes its template's into the stored grant snapshot; a resume under another
//! configuration runs with the limits as frozen.

use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::{Value, json};
use subzero_testkit::Reply;

const TOOL_LIMITS: &str = "\n[tool_limits]\nprocesses = 512\nmemory_bytes = 2147483648\n\n\
[templates.builder]\ndescription = \"Builds\"\ninstructions = \"Build the project.\"\n\
tools = [\"read\", \"ls\"]\ntool_limits = { open_files = 256, file_size_bytes = 1073741824 }\n";

/// Tool limits as the protocol reads them.
fn limits(v: Value) -> Option<p::ToolLimits> {
    Some(parse("toolLimits", &v))
}

/// `[tool_limits]` over the shipped values.
fn defaults() -> Option<p::ToolLimits> {
    limits(json!({"processes": 512, "memoryBytes": 2_147_483_648_u64,
                  "fileSizeBytes": 4_294_967_296_u64, "openFiles": 8192}))
}

/// `builder`'s own keys over [`defaults`].
fn builder() -> Option<p::ToolLimits> {
    limits(json!({"processes": 512, "memoryBytes": 2_147_483_648_u64,
                  "fileSizeBytes": 1_073_741_824_u64, "openFiles": 256}))
}

fn append_config(env: &Env, text: &str) {
    let mut config = std::fs::read_to_string(env.config()).expect("config");
    config.push_str(text);
    std::fs::write(env.config(), config).expect("config");
}

/// The grant snapshot the store holds for `child`, as stored.
fn stored_json(env: &Env, child: &str) -> Value {
    let conn = rusqlite::Connection::open_with_flags(
        env.state_dir().join("subzero.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the database");
    let text: String = conn
        .query_row(
            "SELECT snapshot_json FROM children WHERE child_id = ?1",
            [child],
            |r| r.get(0),
        )
        .expect("the child's row");
    serde_json::from_str(&text).expect("snapshot JSON")
}

/// The grant snapshot the store holds for `child`, read as the protocol's type.
fn stored_snapshot(env: &Env, child: &str) -> p::GrantSnapshot {
    parse("the stored grant snapshot", &stored_json(env, child))
}

#[tokio::test(flavor = "multi_thread")]
async fn info_shows_the_configured_defaults_and_each_templates_resolved_tool_limits() {
    let env = Env::new(Vec::new());
    append_config(&env, TOOL_LIMITS);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let info = broker_info(&s).await;
    assert_eq!(info.tool_limits, defaults(), "{info:#?}");
    assert_eq!(template_named(&info, "researcher").tool_limits, defaults());
    assert_eq!(template_named(&info, "coder").tool_limits, defaults());
    assert_eq!(template_named(&info, "builder").tool_limits, builder());
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_tool_limits_configured_info_shows_the_shipped_ones() {
    let env = Env::new(Vec::new());
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let info = broker_info(&s).await;
    let shipped = limits(json!({"processes": 4096, "memoryBytes": 4_294_967_296_u64,
                                "fileSizeBytes": 4_294_967_296_u64, "openFiles": 8192}));
    assert_eq!(info.tool_limits, shipped, "{info:#?}");
    assert_eq!(template_named(&info, "coder").tool_limits, shipped);
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spawn_freezes_its_templates_tool_limits_and_a_resume_keeps_them() {
    let env = Env::new(vec![
        Reply::text("built"),
        Reply::text("researched"),
        Reply::text("built again"),
    ]);
    append_config(&env, TOOL_LIMITS);
    let mut reaper = Reaper::new(env.dir.path());
    let first = env.broker("first").await;
    reaper.broker(first.pid());
    let (built, _) = spawn(&first, &env, "builder", "Build it").await;
    let snap = settled(&first, &built, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    let (researched, _) = spawn(&first, &env, "researcher", "Survey it").await;
    let snap = settled(&first, &researched, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    first.close().await.expect("close");

    let frozen = stored_json(&env, &built);
    assert_eq!(
        stored_snapshot(&env, &built).tool_limits,
        builder(),
        "{frozen:#}"
    );
    assert_eq!(stored_snapshot(&env, &researched).tool_limits, defaults());

    // Another configuration: the child keeps what it was frozen with.
    env.write_config(&env.origin());
    append_config(&env, "\n[tool_limits]\nprocesses = 8\n");
    let second = env.broker("second").await;
    reaper.broker(second.pid());
    let info = broker_info(&second).await;
    let processes = info.tool_limits.as_ref().map(|l| l.processes.get());
    assert_eq!(processes, Some(8), "{info:#?}");
    let resumed = resume(
        &second,
        json!({"childId": built, "model": env.model(), "message": "Again"}),
    )
    .await;
    assert_eq!(resumed.state, p::ResumeOutputState::Running, "{resumed:#?}");
    let snap = settled(&second, &built, Duration::from_secs(30)).await;
    assert_eq!(
        last_status(&snap),
        Some(p::TerminalRunStatus::Completed),
        "{snap:#?}"
    );
    assert_eq!(last(&snap).preview.as_str(), "built again", "{snap:#?}");
    second.close().await.expect("close");
    assert_eq!(stored_json(&env, &built), frozen);
}
