//! Figures measured against the release `subzero mcp` binary over stdio, with a scripted
//! model on loopback.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use subzero_testkit::mcp_client::McpSession;
use subzero_testkit::{Reply, Step};

use crate::Fail;
use crate::env::{BenchEnv, call, ok, settle, string};
use crate::procs::{
    alive, descendants, eventually, hwm_mib, rss_mib, running_in, sigkill, sleeps_under, workers_of,
};
use crate::stats::{Samples, ms_since};

const LONG: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(1);

/// Broker cold start → `initialize` reply over raw JSON-RPC lines, and its RSS 200 ms later.
pub struct ColdStart {
    pub initialize_ms: Samples,
    pub idle_rss_mib: Samples,
}

pub fn cold_start(exe: &Path, runs: usize) -> Result<ColdStart, Fail> {
    let env = BenchEnv::new(exe, Vec::new())?;
    let cmd = env.command();
    let mut out = ColdStart {
        initialize_ms: Samples::default(),
        idle_rss_mib: Samples::default(),
    };
    // One warm-up start creates and migrates the database; it is not counted.
    for round in 0..=runs {
        let mut command = Command::new(&cmd.exe);
        command
            .arg("mcp")
            .arg("--workspace")
            .arg(&cmd.workspace)
            .arg("--state-dir")
            .arg(&cmd.state_dir)
            .arg("--config")
            .arg(&cmd.config)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let start = Instant::now();
        let mut child = command.spawn()?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "subzero-bench", "version": "0"}}});
        writeln!(stdin, "{initialize}")?;
        stdin.flush()?;
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = lines
                .next()
                .ok_or("the broker closed stdout before answering")??;
            let reply: Value = serde_json::from_str(&line)?;
            if reply["id"] == 1 {
                break;
            }
        }
        let elapsed = ms_since(start);
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )?;
        stdin.flush()?;
        std::thread::sleep(Duration::from_millis(200));
        let rss = rss_mib(child.id());
        drop(stdin);
        if !eventually(Duration::from_secs(5), Duration::from_millis(5), || {
            child.try_wait().ok().flatten().is_some()
        }) {
            let _ = child.kill();
        }
        let _ = child.wait();
        if round > 0 {
            out.initialize_ms.push(elapsed);
            if let Some(rss) = rss {
                out.idle_rss_mib.push(rss);
            }
        }
    }
    Ok(out)
}

/// Start → hello of a bare worker, started exactly as the broker starts it — through the
/// runtime's spawner thread (`subzero_runtime::supervisor::Spawner`), which clones it into
/// new PID and mount namespaces (`namespace`) or, as `[containment] process =
/// "subreaper"`, as a plain child — until its hello line is parsed. Also returns the
/// containment its hello reported.
///
/// As the broker does, it names a state directory, a configuration directory and a key
/// file to hide from tool processes (`--hide`), so the worker probes the tools' mount
/// namespace before its hello.
pub async fn worker_start(
    exe: &Path,
    runs: usize,
    namespace: bool,
    engine: Vec<std::ffi::OsString>,
) -> Result<(Samples, String), Fail> {
    use subzero_runtime::supervisor::limits::LimitParents;
    use subzero_runtime::supervisor::{
        FilesystemMode, ProcessMode, ProcessPlan, Spawner, WorkerConn, WorkerLaunch, WorkerSetup,
    };
    let hidden = tempfile::tempdir()?;
    let state = hidden.path().join("state");
    let config = hidden.path().join("subzero");
    let scratch = state.join("scratch");
    std::fs::create_dir_all(&scratch)?;
    std::fs::create_dir_all(&config)?;
    let key = hidden.path().join("key");
    std::fs::write(&key, "k")?;
    let mode = if namespace {
        ProcessMode::Auto
    } else {
        ProcessMode::Subreaper
    };
    let spawner = Spawner::configured(WorkerSetup {
        scratch_parent: Some(scratch),
        process: ProcessPlan::detect(mode)?,
        filesystem: FilesystemMode::Landlock,
        hide: vec![state, config, key],
        limits: Arc::new(LimitParents::none()),
    })?;
    // The executable the broker starts its workers from (`subzero-worker` beside it).
    let worker = subzero_runtime::supervisor::worker_executable(exe);
    let mut ms = Samples::default();
    let mut reported = String::new();
    // The first start warms the page cache; it is not counted.
    for round in 0..=runs {
        let launch = WorkerLaunch::handshake(&worker, hidden.path(), engine.clone());
        let started = Instant::now();
        let (mut conn, hello) = WorkerConn::start(&spawner, launch, "bench".into()).await?;
        if round > 0 {
            ms.push(ms_since(started));
        }
        reported = format!(
            "{}; view hidden: {}",
            hello
                .process
                .as_ref()
                .map_or_else(|| "none reported".to_owned(), |p| p.mode.to_string()),
            hello.view.as_ref().is_some_and(|v| v.hidden)
        );
        conn.close();
        conn.wait_exit(Duration::from_secs(5)).await;
    }
    Ok((ms, reported))
}

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
        let left: Vec<u32> = running_in(&env.workspace())
            .into_iter()
            .filter(|p| p.argv.first().is_some_and(|a| a.ends_with("sleep")))
            .map(|p| p.pid)
            .collect();
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

/// What a parent pays for one standard delegated task, and the worker's peak RSS.
pub struct ParentCost {
    pub gets: Samples,
    pub bytes: Samples,
    pub child_ms: Samples,
    pub worker_hwm_mib: Samples,
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
    };
    for _ in 0..runs {
        let env = BenchEnv::new(exe, standard_task())?;
        let s = env.broker().await?;
        let broker = s.pid().ok_or("no broker pid")?;
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

/// Polls the VmHWM of the broker's workers on a thread; keeps the largest. VmHWM is a
/// high-water mark, so a sample taken late still sees an earlier peak of a living worker.
pub(crate) struct HwmSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Option<f64>>,
}

impl HwmSampler {
    /// Every 100 ms.
    fn start(broker: u32) -> HwmSampler {
        HwmSampler::every(broker, Duration::from_millis(100))
    }

    /// Every `interval` (a short one for workers that live only briefly).
    pub(crate) fn every(broker: u32, interval: Duration) -> HwmSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak: Option<f64> = None;
            while !flag.load(Ordering::Relaxed) {
                for worker in workers_of(broker) {
                    if let Some(hwm) = hwm_mib(worker) {
                        peak = Some(peak.map_or(hwm, |p| p.max(hwm)));
                    }
                }
                std::thread::sleep(interval);
            }
            peak
        });
        HwmSampler { stop, thread }
    }

    pub(crate) fn finish(self) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().ok().flatten()
    }
}

/// `subzero_list` and `subzero_get` through a broker on the populated database.
pub struct ListGet {
    pub list_ms: Samples,
    pub list_200_ms: Samples,
    pub get_ms: Samples,
}

pub async fn list_and_get(
    env: &BenchEnv,
    children: &[String],
    runs: usize,
) -> Result<ListGet, Fail> {
    let s = env.broker().await?;
    let mut out = ListGet {
        list_ms: Samples::default(),
        list_200_ms: Samples::default(),
        get_ms: Samples::default(),
    };
    for i in 0..runs {
        let start = Instant::now();
        let listed = ok(&s, "subzero_list", json!({})).await?;
        out.list_ms.push(ms_since(start));
        if listed["children"].as_array().is_none_or(Vec::is_empty) {
            return Err(format!("subzero_list saw no children: {listed}").into());
        }
        let start = Instant::now();
        ok(&s, "subzero_list", json!({"limit": 200})).await?;
        out.list_200_ms.push(ms_since(start));
        let child = &children[(children.len() / 2 + i * 97) % children.len()];
        let start = Instant::now();
        ok(
            &s,
            "subzero_get",
            json!({"childId": child, "eventLimit": 50}),
        )
        .await?;
        out.get_ms.push(ms_since(start));
    }
    s.close().await?;
    Ok(out)
}
