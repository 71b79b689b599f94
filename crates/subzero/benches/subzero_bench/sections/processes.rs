//! The processes section: what the broker and its workers weigh under a hostile stream,
//! how fast runs start, stop and end when the broker is killed or shut down, and what a
//! parent pays for one delegated task.

use std::path::Path;

use crate::plan::Plan;
use crate::report::Target;
use crate::sink::Sink;
use crate::{broker, hostile, shutdown};

const MEMORY: &str = "Size and memory";
const LATENCY: &str = "Latency";
const PARENT: &str = "Parent-facing cost";

/// Every figure of the processes section, in the order of the report.
pub async fn measure(exe: &Path, plan: &Plan, sink: &mut Sink) {
    let n = plan.runs;
    hostile_stream_figures(exe, plan, sink).await;
    run_start_figures(exe, n, sink).await;
    stop_figures(exe, n, sink).await;
    broker_kill_figures(exe, n, sink).await;
    shutdown_figures(exe, n, sink);
    parent_cost_figures(exe, plan, sink).await;
}

/// Worker and broker memory while a model streams 200 MB at a worker.
async fn hostile_stream_figures(exe: &Path, plan: &Plan, sink: &mut Sink) {
    eprintln!("hostile stream…");
    match hostile::hostile_stream(exe, plan.hostile_runs).await {
        Ok(h) => {
            let note = "a researcher's endpoint streams 200 MB of text in 16 KiB deltas; default limits, so the run fails at `model_response_bytes` (8 MiB); worker VmHWM sampled every 1 ms until it exits";
            sink.add(
                MEMORY,
                "worker peak RSS during a 200 MB hostile stream",
                "MiB",
                h.worker_hwm_mib,
                Some(Target::MaxAtMost(64.0)),
                note,
            );
            sink.add(
                MEMORY,
                "broker peak RSS during a 200 MB hostile stream",
                "MiB",
                h.broker_hwm_mib,
                Some(Target::MaxAtMost(64.0)),
                "the same runs; the broker's VmHWM since it started",
            );
            sink.add(
                MEMORY,
                "artifacts written by the hostile run",
                "MiB",
                h.artifact_mib,
                None,
                "the failed run's partial text (up to the cap) plus the cut note",
            );
            sink.add(
                MEMORY,
                "transcript written by the hostile run",
                "KiB",
                h.transcript_kib,
                None,
                "the cut response is not appended to the transcript",
            );
        }
        Err(e) => sink.failed("hostile stream", &e),
    }
}

/// spawn and followup → `run_started` and → the first model request.
async fn run_start_figures(exe: &Path, n: usize, sink: &mut Sink) {
    match broker::run_start(exe, n).await {
        Ok(r) => {
            sink.add(LATENCY, "spawn → `run_started` (spawn reply)", "ms", r.spawn_reply_ms, Some(Target::MedianAtMost(20.0)),
                "`subzero_spawn` round trip over MCP (rmcp client); admission commits `run_started` before the reply (checked with a get)");
            sink.add(LATENCY, "spawn → first model request", "ms", r.spawn_first_request_ms, None,
                "spawn sent → the new worker's first request reaches the scripted model (worker start, hello, run message, HTTP)");
            sink.add(
                LATENCY,
                "followup on a ready child → `run_started` (send reply)",
                "ms",
                r.followup_reply_ms,
                None,
                "`subzero_send` mode followup on a ready child, delivery `started`",
            );
            sink.add(
                LATENCY,
                "followup on a ready child → first model request",
                "ms",
                r.followup_first_request_ms,
                None,
                "a ready child has no worker; this includes starting one",
            );
        }
        Err(e) => sink.failed("spawn and followup", &e),
    }
}

/// stop → confirmed while a bash tool tree runs.
async fn stop_figures(exe: &Path, n: usize, sink: &mut Sink) {
    eprintln!("stop with a tool tree…");
    match broker::stop_with_tree(exe, n).await {
        Ok(stop) => {
            sink.add(LATENCY, "stop → confirmed, bash tool tree with a `setsid` escapee", "ms", stop.confirmed_ms, Some(Target::P95AtMost(250.0)),
                "coder child running `sleep 1000 & setsid sleep 1000 & sleep 1000`; `subzero_stop` waitMs=10000 round trip, `confirmed: true`; default config, so on the PID-namespace path where the kernel allows it (see the worker-start rows)");
            sink.notes.push(format!(
                "stop: {} `sleep` process(es) left in the workspace after confirmed stops (should be 0).",
                stop.leftovers
            ));
        }
        Err(e) => sink.failed("stop", &e),
    }
}

/// Broker SIGKILL → every worker descendant gone.
async fn broker_kill_figures(exe: &Path, n: usize, sink: &mut Sink) {
    eprintln!("broker SIGKILL…");
    match broker::broker_kill(exe, n).await {
        Ok(kill) => {
            let tree = kill.tree_size.median();
            sink.add(LATENCY, "broker SIGKILL → every worker descendant gone", "ms", kill.gone_ms, Some(Target::P95AtMost(1000.0)),
                &format!("2 workers (one in a bash tree with a `setsid` escapee, one waiting on the model), median {tree:.0} processes under the broker; /proc polled every 1 ms, zombies count as gone; default config, so on the PID-namespace path where the kernel allows it"));
            sink.notes.push(format!(
                "broker SIGKILL: {} survivor(s) over all runs (should be 0){}.",
                kill.survivors,
                if kill.survivor_argv.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; still alive 10 s after the kill: `{}`",
                        kill.survivor_argv.join("`, `")
                    )
                }
            ));
        }
        Err(e) => sink.failed("broker SIGKILL", &e),
    }
}

/// Each way a host ends the broker → the broker exited, with four children running.
fn shutdown_figures(exe: &Path, n: usize, sink: &mut Sink) {
    for ending in shutdown::Ending::ALL {
        let label = ending.label();
        eprintln!("shutdown by {label}…");
        match shutdown::shutdown_with_trees(exe, n, ending) {
            Ok(down) => {
                sink.add(LATENCY, &format!("shutdown by {label} with 4 active children running bash trees → exit"), "ms", down.exit_ms, Some(Target::P95AtMost(100.0)),
                    &format!("4 coder children each running `sleep 1000 & setsid sleep 1000 & sleep 1000`; {label} → the broker process exited ({}); Claude Code sends SIGINT, SIGTERM 100 ms later, SIGKILL at 500 ms", ending.how()));
                sink.notes.push(format!(
                    "shutdown by {label}: {} run(s) not recorded `stopped`, {} `sleep` process(es) left, {} exit(s) other than 0, over all runs (each should be 0).",
                    down.not_stopped, down.leftovers, down.unclean_exits
                ));
            }
            Err(e) => sink.failed(&format!("shutdown by {label}"), &e),
        }
    }
}

/// What a parent pays for one standard task, and the worker's peak memory meanwhile.
async fn parent_cost_figures(exe: &Path, plan: &Plan, sink: &mut Sink) {
    eprintln!("parent cost ({} run(s) of ~10 s)…", plan.parent_cost_runs);
    match broker::parent_cost(exe, plan.parent_cost_runs).await {
        Ok(cost) => {
            sink.add(PARENT, "get calls until the result", "calls", cost.gets, Some(Target::MaxAtMost(4.0)),
                "spawn, then `subzero_get` waitMs=30000 until not running; child streams 2,000 text deltas and 20 `ls` calls, 5 ms apart");
            sink.add(
                PARENT,
                "bytes of tool results read (spawn + gets)",
                "bytes",
                cost.bytes,
                Some(Target::MaxAtMost(16384.0)),
                "text content the parent model reads",
            );
            sink.add(
                PARENT,
                "tool definitions a host sends its model on every turn (9 tools)",
                "bytes",
                cost.definitions,
                Some(Target::MaxAtMost(8000.0)),
                "name, description and input schema of each tool from `tools/list`, compact JSON (was 24.9 KB)",
            );
            sink.add(
                PARENT,
                "`subzero_spawn` + `subzero_get` definitions",
                "bytes",
                cost.spawn_get,
                Some(Target::MaxAtMost(5309.0)),
                "the same measure; target: Claude Code 2.1.332's own `Agent` tool in a request to its model, 5,309 bytes (was 11,492 there)",
            );
            sink.add(
                PARENT,
                "a settled one-tool task's `subzero_get`, without its preview",
                "bytes",
                cost.settled_get,
                Some(Target::MaxAtMost(1024.0)),
                "structured content as compact JSON (an `ls` call, then a one-line answer), less the preview text (was ~3.0 KB)",
            );
            sink.add(
                PARENT,
                "a `subzero_list` entry",
                "bytes",
                cost.list_entry,
                Some(Target::MaxAtMost(200.0)),
                "that child's entry, compact JSON (was ~430 bytes)",
            );
            sink.add(
                PARENT,
                "child run duration",
                "ms",
                cost.child_ms,
                None,
                "spawn sent → settled get returned",
            );
            sink.add(
                MEMORY,
                "peak worker RSS during a run (VmHWM)",
                "MiB",
                cost.worker_hwm_mib,
                None,
                "largest VmHWM of the worker running the standard task, sampled every 100 ms",
            );
        }
        Err(e) => sink.failed("parent cost", &e),
    }
}
