//! Ending a child that runs a bash tool tree (a background `sleep`, a `setsid` escapee and
//! a foreground one): `subzero_stop` until confirmed, and SIGKILL of the broker until every
//! descendant is gone.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::McpSession;

use super::LONG;
use crate::Fail;
use crate::env::{BenchEnv, ok};
use crate::procs::{alive, descendants, eventually, running_in, sigkill, sleeps_in, sleeps_under};
use crate::stats::{Samples, ms_since};

/// How often the kill scenario polls `/proc` for the killed tree.
const POLL: Duration = Duration::from_millis(1);

/// The bash call every stop and kill scenario leaves running: a background child, a
/// `setsid` escapee and a foreground sleep.
fn bash_tree() -> Reply {
    Reply::tool_call(
        "call_tree",
        "bash",
        &json!({"command": "sleep 1000 & setsid sleep 1000 & sleep 1000"}).to_string(),
    )
}

/// Spawn a coder child whose bash tool leaves three sleeps; returns once they run.
async fn coder_with_tree(
    env: &BenchEnv,
    s: &McpSession,
    broker: u32,
) -> Result<(String, String), Fail> {
    env.server.push(bash_tree());
    // The previous coder's writer slot frees when its worker has exited.
    let mut attempt = 0;
    let (child, run) = loop {
        match env.spawn(s, "coder", "Start the servers.").await {
            Ok(spawned) => break spawned,
            Err(e) if e.to_string().contains("workspace_busy") && attempt < 250 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    };
    let running = tokio::task::spawn_blocking(move || {
        eventually(LONG, Duration::from_millis(5), || {
            sleeps_under(broker).len() >= 3
        })
    })
    .await?;
    if !running {
        return Err("the bash tool tree never started".into());
    }
    Ok((child, run))
}

/// stop → confirmed with a bash tool tree running.
pub struct StopFigures {
    pub confirmed_ms: Samples,
    pub leftovers: usize,
}

pub async fn stop_with_tree(exe: &Path, runs: usize) -> Result<StopFigures, Fail> {
    let env = BenchEnv::new(exe, Vec::new())?;
    let s = env.broker().await?;
    let broker = s.pid().ok_or("no broker pid")?;
    let mut out = StopFigures {
        confirmed_ms: Samples::default(),
        leftovers: 0,
    };
    for _ in 0..runs {
        let (child, run) = coder_with_tree(&env, &s, broker).await?;
        let start = Instant::now();
        let stop = ok(
            &s,
            "subzero_stop",
            json!({"childId": child, "expectedRunId": run, "waitMs": 10000}),
        )
        .await?;
        let elapsed = ms_since(start);
        if stop["confirmed"] != true {
            return Err(format!("stop was not confirmed: {stop}").into());
        }
        out.confirmed_ms.push(elapsed);
        let left = sleeps_in(&env.workspace());
        out.leftovers += left.len();
        left.into_iter().for_each(sigkill);
    }
    s.close().await?;
    Ok(out)
}

/// Broker SIGKILL → every descendant (workers, tools, the `setsid` escapee) gone.
pub struct KillFigures {
    pub gone_ms: Samples,
    pub tree_size: Samples,
    pub survivors: usize,
    /// argv of the processes that outlived the 10 s limit (deduplicated).
    pub survivor_argv: Vec<String>,
}

pub async fn broker_kill(exe: &Path, runs: usize) -> Result<KillFigures, Fail> {
    let env = BenchEnv::new(exe, Vec::new())?;
    let mut out = KillFigures {
        gone_ms: Samples::default(),
        tree_size: Samples::default(),
        survivors: 0,
        survivor_argv: Vec::new(),
    };
    for _ in 0..runs {
        let s = env.broker().await?;
        let broker = s.pid().ok_or("no broker pid")?;
        coder_with_tree(&env, &s, broker).await?;
        // A second worker whose model never answers.
        let before = env.server.requests().len();
        env.server.push(Reply::Hang);
        env.spawn(&s, "researcher", "Think.").await?;
        let server_saw = {
            let deadline = Instant::now() + LONG;
            while env.server.requests().len() <= before && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            env.server.requests().len() > before
        };
        if !server_saw {
            return Err("the second child never called the model".into());
        }
        let tree: Vec<u32> = descendants(broker).into_iter().map(|p| p.pid).collect();
        sigkill(broker);
        let start = Instant::now();
        let gone = tokio::task::spawn_blocking(move || {
            eventually(Duration::from_secs(10), POLL, || {
                tree.iter().all(|pid| !alive(*pid))
            })
            .then_some(tree.len())
        })
        .await?;
        let elapsed = ms_since(start);
        drop(s);
        let left = running_in(&env.workspace());
        out.survivors += left.len();
        for p in &left {
            let argv = p.argv.join(" ");
            if !out.survivor_argv.contains(&argv) {
                out.survivor_argv.push(argv);
            }
            sigkill(p.pid);
        }
        match gone {
            Some(size) => {
                out.gone_ms.push(elapsed);
                out.tree_size.push(size as f64);
            }
            None => out.survivors += 1,
        }
    }
    Ok(out)
}
