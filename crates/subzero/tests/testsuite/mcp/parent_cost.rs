//! What a parent pays to delegate: a parent that follows the tool descriptions (spawn,
//! then `subzero_get` with `waitMs=30000` until the child settles) needs at most four
//! get calls for a child that streams 2,000 text deltas and 20 tool calls over ~10 s.
//! The byte count is printed here and measured properly by `cargo xtask bench`.

use std::time::{Duration, Instant};

use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::{Reply, Step};

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

#[tokio::test(flavor = "multi_thread")]
async fn a_parent_following_the_descriptions_needs_at_most_four_gets() {
    let mut script: Vec<Reply> = (0..20).map(|n| turn(95, 5, Some(n))).collect();
    script.push(turn(100, 5, None));
    let env = Env::new(script);
    let s = env.broker("broker").await;
    let started = Instant::now();
    let spawned = call(&s, "subzero_spawn", json!({"prompt": "Survey the workspace.", "templateId": "researcher", "model": env.model()})).await;
    assert!(!spawned.is_error, "{}", spawned.text);
    let child = Some(
        parse::<p::SpawnOutput>("subzero_spawn", &spawned.structured)
            .child_id
            .to_string(),
    )
    .as_deref()
    .expect("childId")
    .to_owned();
    let mut gets = 0;
    let mut bytes = spawned.bytes;
    let snapshot = loop {
        let reply = call(
            &s,
            "subzero_get",
            json!({"childId": child, "waitMs": 30000}),
        )
        .await;
        gets += 1;
        bytes += reply.bytes;
        assert!(!reply.is_error, "{}", reply.text);
        let snap: p::ChildSnapshot = parse("subzero_get", &reply.structured);
        if snap.state != p::ChildState::Running || gets >= 10 {
            break snap;
        }
    };
    let elapsed = started.elapsed();
    eprintln!(
        "parent cost: {gets} get call(s), {bytes} bytes of tool results, child ran {elapsed:?}"
    );
    assert_eq!(
        last_status(&snapshot),
        Some(p::TerminalRunStatus::Completed),
        "{snapshot:#?}"
    );
    assert!(gets <= 4, "a parent needed {gets} get calls");
    assert!(
        elapsed >= Duration::from_secs(5),
        "the scripted child should stream for ~10 s"
    );
    s.close().await.expect("close");
}
