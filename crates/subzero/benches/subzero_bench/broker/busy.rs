//! Memory under load: the broker and its workers while four children wait on a model that
//! never answers.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use subzero_testkit::Reply;

use super::LONG;
use crate::Fail;
use crate::env::{BenchEnv, ok};
use crate::procs::{rss_mib, workers_of};
use crate::stats::Samples;

/// Memory with four children running (model hangs): broker and per-worker RSS.
pub struct BusyMemory {
    pub broker_rss_mib: Samples,
    pub worker_rss_mib: Samples,
}

pub async fn four_children(exe: &Path, runs: usize) -> Result<BusyMemory, Fail> {
    let env = BenchEnv::new(exe, Vec::new())?;
    let mut out = BusyMemory {
        broker_rss_mib: Samples::default(),
        worker_rss_mib: Samples::default(),
    };
    for _ in 0..runs {
        let s = env.broker().await?;
        let broker = s.pid().ok_or("no broker pid")?;
        let before = env.server.requests().len();
        let mut children = Vec::new();
        for n in 0..4 {
            env.server.push(Reply::Hang);
            children.push(env.spawn(&s, "researcher", &format!("Task {n}")).await?);
        }
        let deadline = Instant::now() + LONG;
        while env.server.requests().len() < before + 4 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(rss) = rss_mib(broker) {
            out.broker_rss_mib.push(rss);
        }
        for worker in workers_of(broker) {
            if let Some(rss) = rss_mib(worker) {
                out.worker_rss_mib.push(rss);
            }
        }
        for (child, run) in children {
            ok(
                &s,
                "subzero_stop",
                json!({"childId": child, "expectedRunId": run, "waitMs": 10000}),
            )
            .await?;
        }
        s.close().await?;
    }
    Ok(out)
}
