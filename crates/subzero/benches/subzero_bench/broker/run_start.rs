//! How fast a run starts: spawn → `run_started` and followup on a ready child →
//! `run_started`, each also to the worker's first model request.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use subzero_testkit::Reply;

use super::LONG;
use crate::Fail;
use crate::env::{BenchEnv, ok, settle, string};
use crate::stats::{Samples, ms_since};

/// spawn → `run_started` and followup on a ready child → `run_started`.
pub struct RunStart {
    /// The spawn call's round trip: its admission commits `run_started` before replying.
    pub spawn_reply_ms: Samples,
    /// spawn sent → the worker's first model request reaches the scripted server.
    pub spawn_first_request_ms: Samples,
    pub followup_reply_ms: Samples,
    pub followup_first_request_ms: Samples,
}

pub async fn run_start(exe: &Path, runs: usize) -> Result<RunStart, Fail> {
    let env = Arc::new(BenchEnv::new(exe, Vec::new())?);
    let s = env.broker().await?;
    let mut out = RunStart {
        spawn_reply_ms: Samples::default(),
        spawn_first_request_ms: Samples::default(),
        followup_reply_ms: Samples::default(),
        followup_first_request_ms: Samples::default(),
    };
    let mut seen = 0;
    for round in 0..runs {
        env.server.push(Reply::text("Done."));
        env.server.push(Reply::text("Done again."));

        seen += 1;
        let arrival = wait_request(&env, seen);
        let start = Instant::now();
        let spawned = ok(
            &s,
            "subzero_spawn",
            json!({"prompt": "Look around.", "templateId": "researcher", "model": env.model()}),
        )
        .await?;
        out.spawn_reply_ms.push(ms_since(start));
        let child = string(&spawned, "childId")?;
        if round == 0 {
            let snap = ok(&s, "subzero_get", json!({"childId": child})).await?;
            let started = snap["events"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["type"] == "run_started"));
            if !started {
                return Err(format!("no run_started right after spawn: {snap}").into());
            }
        }
        let at = arrival.await?.ok_or("the model was never called")?;
        out.spawn_first_request_ms
            .push(at.duration_since(start).as_secs_f64() * 1000.0);
        settle(&s, &child).await?;

        seen += 1;
        let arrival = wait_request(&env, seen);
        let start = Instant::now();
        let sent = ok(
            &s,
            "subzero_send",
            json!({"childId": child, "mode": "followup", "message": "Again."}),
        )
        .await?;
        out.followup_reply_ms.push(ms_since(start));
        if sent["delivery"] != "started" {
            return Err(format!("followup on a ready child was not started: {sent}").into());
        }
        let at = arrival.await?.ok_or("the model was never called")?;
        out.followup_first_request_ms
            .push(at.duration_since(start).as_secs_f64() * 1000.0);
        settle(&s, &child).await?;
    }
    s.close().await?;
    Ok(out)
}

/// A blocking waiter for the `n`th model request, started before the call under test.
fn wait_request(env: &Arc<BenchEnv>, n: usize) -> tokio::task::JoinHandle<Option<Instant>> {
    let env = env.clone();
    tokio::task::spawn_blocking(move || env.server.wait_for_requests(n, LONG).then(Instant::now))
}
