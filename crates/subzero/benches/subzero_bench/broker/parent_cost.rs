//! What a parent pays for one standard delegated task: get calls, bytes of tool results
//! read, the child's run time, and the worker's peak RSS meanwhile; and what it pays on
//! every model turn, the tool definitions.

use std::path::Path;
use std::time::Instant;

use serde_json::json;
use subzero_testkit::{Reply, Step};

use crate::Fail;
use crate::env::{BenchEnv, call, string};
use crate::hwm::HwmSampler;
use crate::stats::{Samples, ms_since};

/// What a parent pays for one standard delegated task, and the worker's peak RSS.
pub struct ParentCost {
    pub gets: Samples,
    pub bytes: Samples,
    pub child_ms: Samples,
    pub worker_hwm_mib: Samples,
    /// The nine tool definitions (name, description, input schema) as compact JSON.
    pub definitions: Samples,
    /// `subzero_spawn`'s and `subzero_get`'s definitions.
    pub spawn_get: Samples,
    /// A settled one-tool task's `subzero_get`, without its preview text.
    pub settled_get: Samples,
    /// That child's `subzero_list` entry.
    pub list_entry: Samples,
}

/// A one-tool task: an `ls` call, then a one-line answer.
fn one_tool_task() -> Vec<Reply> {
    vec![
        turn(0, 0, Some(0)),
        Reply::text("The workspace holds README.md."),
    ]
}

/// Bytes of compact JSON.
fn compact_bytes(value: &serde_json::Value) -> usize {
    serde_json::to_vec(value).map_or(0, |b| b.len())
}

/// What a parent reads back about a settled one-tool task: its `subzero_get` (without
/// the preview text, which is the answer) and its `subzero_list` entry.
async fn answers(exe: &Path) -> Result<(f64, f64), Fail> {
    let env = BenchEnv::new(exe, one_tool_task())?;
    let s = env.broker().await?;
    let spawned = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "List the workspace.", "templateId": "researcher", "model": env.model()}),
    )
    .await?;
    let child = string(&spawned.structured, "childId")?;
    let settled = call(
        &s,
        "subzero_get",
        json!({"childId": child, "waitMs": 30000}),
    )
    .await?;
    if settled.structured["lastRun"]["status"] != "completed" {
        return Err(format!("the one-tool task did not complete: {}", settled.structured).into());
    }
    let preview = settled.structured["lastRun"]["preview"]
        .as_str()
        .map_or(0, str::len);
    let get = compact_bytes(&settled.structured) - preview;
    let listed = call(&s, "subzero_list", json!({})).await?;
    let entry = compact_bytes(&listed.structured["children"][0]);
    s.close().await?;
    Ok((get as f64, entry as f64))
}

/// The bytes of each tool's definition as a host sends it to its model: name, description
/// and input schema, compact JSON.
async fn definitions(
    s: &subzero_testkit::mcp_client::McpSession,
) -> Result<Vec<(String, usize)>, Fail> {
    let tools = s
        .list_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    Ok(tools
        .iter()
        .map(|tool| {
            let definition = json!({
                "name": tool.name,
                "description": tool.description,
                "inputSchema": serde_json::Value::Object((*tool.input_schema).clone()),
            });
            let bytes = serde_json::to_vec(&definition).map_or(0, |b| b.len());
            (tool.name.to_string(), bytes)
        })
        .collect())
}

/// One model turn: `deltas` text deltas `delay_ms` apart, then a tool call (or a stop).
fn turn(deltas: usize, delay_ms: u64, tool_call: Option<usize>) -> Reply {
    let mut steps = Vec::new();
    for i in 0..deltas {
        steps.push(Step::delay_ms(delay_ms));
        steps.push(Step::text(&format!("w{i} ")));
    }
    match tool_call {
        Some(n) => {
            steps.push(Step::tool_delta(
                Some(0),
                Some(&format!("call_{n}")),
                Some("ls"),
                r#"{"path":"."}"#,
            ));
            steps.push(Step::finish("tool_calls"));
        }
        None => steps.push(Step::finish("stop")),
    }
    steps.push(Step::done());
    Reply::Sse(steps)
}

/// 20 turns of 95 deltas + an `ls` call, then 100 deltas and stop: 2,000 deltas, 20
/// tool calls, ~5 ms apart (~10 s).
fn standard_task() -> Vec<Reply> {
    let mut script: Vec<Reply> = (0..20).map(|n| turn(95, 5, Some(n))).collect();
    script.push(turn(100, 5, None));
    script
}

pub async fn parent_cost(exe: &Path, runs: usize) -> Result<ParentCost, Fail> {
    let mut out = ParentCost {
        gets: Samples::default(),
        bytes: Samples::default(),
        child_ms: Samples::default(),
        worker_hwm_mib: Samples::default(),
        definitions: Samples::default(),
        spawn_get: Samples::default(),
        settled_get: Samples::default(),
        list_entry: Samples::default(),
    };
    for _ in 0..runs {
        let (get, entry) = answers(exe).await?;
        out.settled_get.push(get);
        out.list_entry.push(entry);
        let env = BenchEnv::new(exe, standard_task())?;
        let s = env.broker().await?;
        let broker = s.pid().ok_or("no broker pid")?;
        let defined = definitions(&s).await?;
        out.definitions
            .push(defined.iter().map(|(_, b)| *b).sum::<usize>() as f64);
        out.spawn_get.push(
            defined
                .iter()
                .filter(|(name, _)| name == "subzero_spawn" || name == "subzero_get")
                .map(|(_, b)| *b)
                .sum::<usize>() as f64,
        );
        let peak = HwmSampler::start(broker);
        let start = Instant::now();
        let spawned = call(
            &s,
            "subzero_spawn",
            json!({"prompt": "Survey the workspace.", "templateId": "researcher", "model": env.model()}),
        )
        .await?;
        if spawned.is_error {
            return Err(format!("spawn failed: {}", spawned.text).into());
        }
        let child = string(&spawned.structured, "childId")?;
        let mut gets = 0;
        let mut bytes = spawned.bytes;
        // A parent following the descriptions: get with the maximum wait until settled.
        let snapshot = loop {
            let reply = call(
                &s,
                "subzero_get",
                json!({"childId": child, "waitMs": 30000}),
            )
            .await?;
            gets += 1;
            bytes += reply.bytes;
            if reply.is_error {
                return Err(format!("get failed: {}", reply.text).into());
            }
            if reply.structured["state"] != "running" || gets >= 20 {
                break reply.structured;
            }
        };
        out.child_ms.push(ms_since(start));
        if snapshot["lastRun"]["status"] != "completed" {
            return Err(format!("the standard task did not complete: {snapshot}").into());
        }
        out.gets.push(f64::from(gets));
        out.bytes.push(bytes as f64);
        if let Some(hwm) = peak.finish() {
            out.worker_hwm_mib.push(hwm);
        }
        s.close().await?;
    }
    Ok(out)
}
