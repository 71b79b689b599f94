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

/// `[tool_limits]` over the shipped values.
fn defaults() -> Value {
    json!({"processes": 512, "memoryBytes": 2_147_483_648_u64,
           "fileSizeBytes": 4_294_967_296_u64, "openFiles": 8192})
}

/// `builder`'s own keys over [`defaults`].
fn builder() -> Value {
    json!({"processes": 512, "memoryBytes": 2_147_483_648_u64,
           "fileSizeBytes": 1_073_741_824_u64, "openFiles": 256})
}

fn append_config(env: &Env, text: &str) {
    let mut config = std::fs::read_to_string(env.config()).expect("config");
    config.push_str(text);
    std::fs::write(env.config(), config).expect("config");
}

/// The grant snapshot the store holds for `child`.
fn stored_snapshot(env: &Env, child: &str) -> Value {
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

fn template<'a>(info: &'a Value, id: &str) -> &'a Value {
    info["templates"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["templateId"] == id))
        .unwrap_or_else(|| panic!("no template {id}: {info:#}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn info_shows_the_configured_defaults_and_each_templates_resolved_tool_limits() {
    let env = Env::new(Vec::new());
    append_config(&env, TOOL_LIMITS);
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let info = ok(&s, "subzero_info", json!({})).await;
    assert_eq!(info["toolLimits"], defaults(), "{info:#}");
    assert_eq!(template(&info, "researcher")["toolLimits"], defaults());
    assert_eq!(template(&info, "coder")["toolLimits"], defaults());
    assert_eq!(template(&info, "builder")["toolLimits"], builder());
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_tool_limits_configured_info_shows_the_shipped_ones() {
    let env = Env::new(Vec::new());
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let info = ok(&s, "subzero_info", json!({})).await;
    let shipped = json!({"processes": 4096, "memoryBytes": 4_294_967_296_u64,
                         "fileSizeBytes": 4_294_967_296_u64, "openFiles": 8192});
    assert_eq!(info["toolLimits"], shipped, "{info:#}");
    assert_eq!(template(&info, "coder")["toolLimits"], shipped);
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
    let snap = settle(&first, &built, Duration::from_secs(30)).await;
    assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
    let (researched, _) = spawn(&first, &env, "researcher", "Survey it").await;
    let snap = settle(&first, &researched, Duration::from_secs(30)).await;
    assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
    first.close().await.expect("close");

    let frozen = stored_snapshot(&env, &built);
    assert_eq!(frozen["toolLimits"], builder(), "{frozen:#}");
    assert_eq!(stored_snapshot(&env, &researched)["toolLimits"], defaults());

    // Another configuration: the child keeps what it was frozen with.
    env.write_config(&env.origin());
    append_config(&env, "\n[tool_limits]\nprocesses = 8\n");
    let second = env.broker("second").await;
    reaper.broker(second.pid());
    let info = ok(&second, "subzero_info", json!({})).await;
    assert_eq!(info["toolLimits"]["processes"], 8, "{info:#}");
    let resumed = ok(
        &second,
        "subzero_resume",
        json!({"childId": built, "model": env.model(), "message": "Again"}),
    )
    .await;
    assert_eq!(resumed["state"], "running", "{resumed:#}");
    let snap = settle(&second, &built, Duration::from_secs(30)).await;
    assert_eq!(snap["lastRun"]["status"], "completed", "{snap:#}");
    assert_eq!(snap["lastRun"]["preview"], "built again", "{snap:#}");
    second.close().await.expect("close");
    assert_eq!(stored_snapshot(&env, &built), frozen);
}
