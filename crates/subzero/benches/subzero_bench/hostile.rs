//! A hostile model endpoint: a 200 MB streamed answer under the default limits. The run must
//! fail at `model_response_bytes` (8 MiB) with worker and broker memory staying flat.

use std::time::Duration;

use serde_json::json;
use subzero_testkit::{Reply, Step};

use crate::Fail;
use crate::env::{BenchEnv, call, settle};
use crate::hwm::HwmSampler;
use crate::procs::{eventually, hwm_mib, workers_of};
use crate::stats::Samples;

/// Bytes the endpoint offers: 200 MB of text in 16 KiB deltas.
const OFFERED_BYTES: u64 = 200 * 1024 * 1024;
const DELTA_BYTES: usize = 16 * 1024;

pub struct HostileStream {
    pub worker_hwm_mib: Samples,
    pub broker_hwm_mib: Samples,
    pub artifact_mib: Samples,
    pub transcript_kib: Samples,
}

fn flood() -> Reply {
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "x".repeat(DELTA_BYTES)},
                                     "finish_reason": null}]})
    .to_string();
    Reply::Sse(vec![
        Step::repeat_data(&chunk, OFFERED_BYTES / DELTA_BYTES as u64),
        Step::finish("stop"),
        Step::done(),
    ])
}

fn bytes_under(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                bytes_under(&path)
            } else {
                path.metadata().map_or(0, |m| m.len())
            }
        })
        .sum()
}

/// One flooded run per sample, under the default limits.
pub async fn hostile_stream(exe: &std::path::Path, runs: usize) -> Result<HostileStream, Fail> {
    let mut out = HostileStream {
        worker_hwm_mib: Samples::default(),
        broker_hwm_mib: Samples::default(),
        artifact_mib: Samples::default(),
        transcript_kib: Samples::default(),
    };
    for _ in 0..runs {
        let env = BenchEnv::new(exe, vec![flood()])?;
        let s = env.broker().await?;
        let broker = s.pid().ok_or("no broker pid")?;
        // The flooded run fails at the cap and its worker exits soon after: sample fast.
        let sampler = HwmSampler::every(broker, Duration::from_millis(1));
        let (child, _) = env.spawn(&s, "researcher", "Answer at length.").await?;
        let snap = settle(&s, &child).await?;
        // The worker is gone once the child settled with nothing queued.
        eventually(Duration::from_secs(10), Duration::from_millis(5), || {
            workers_of(broker).is_empty()
        });
        let worker_peak = sampler.finish().ok_or("the worker was never sampled")?;
        if snap["lastRun"]["error"]["code"] != "limit_exceeded" {
            return Err(format!("the flood did not end at the response cap: {snap}").into());
        }
        out.worker_hwm_mib.push(worker_peak);
        out.broker_hwm_mib
            .push(hwm_mib(broker).ok_or("no broker VmHWM")?);
        out.artifact_mib
            .push(bytes_under(&env.state_dir().join("artifacts")) as f64 / 1024.0 / 1024.0);
        out.transcript_kib
            .push(bytes_under(&env.state_dir().join("transcripts")) as f64 / 1024.0);
        let _ = call(&s, "subzero_list", json!({})).await?;
        s.close().await?;
    }
    Ok(out)
}
