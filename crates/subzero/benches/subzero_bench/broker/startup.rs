//! Starting up: the broker's cold start to its `initialize` reply, and a bare worker's
//! start to its hello, each as the broker's host or the broker itself would start it.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Fail;
use crate::env::{BenchEnv, mcp_command};
use crate::procs::{eventually, rss_mib};
use crate::stats::{Samples, ms_since};

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
        let mut command = mcp_command(&cmd);
        command.stderr(Stdio::null());
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
        wait_for_reply(&mut lines, 1)?;
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
        reap(child);
        if round > 0 {
            out.initialize_ms.push(elapsed);
            if let Some(rss) = rss {
                out.idle_rss_mib.push(rss);
            }
        }
    }
    Ok(out)
}

/// Read JSON-RPC lines until the reply to request `id`.
fn wait_for_reply(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    id: u64,
) -> Result<(), Fail> {
    loop {
        let line = lines
            .next()
            .ok_or("the broker closed stdout before answering")??;
        let reply: Value = serde_json::from_str(&line)?;
        if reply["id"] == id {
            return Ok(());
        }
    }
}

/// Wait up to 5 s for a broker whose stdin is closed to exit, kill it if it has not, and
/// reap it.
fn reap(mut child: Child) {
    if !eventually(Duration::from_secs(5), Duration::from_millis(5), || {
        child.try_wait().ok().flatten().is_some()
    }) {
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// Start → hello of a bare worker, started exactly as the broker starts it — through the
/// runtime's spawner thread (`subzero_runtime::supervisor::Spawner`), which clones it into
/// new PID and mount namespaces (`namespace`) or, as `[containment] process =
/// "subreaper"`, as a plain child — until its hello line is parsed. Also returns the
/// containment its hello reported.
///
/// As the broker does, it names a state directory, a configuration directory and a key
/// file to hide from tool processes (`--hide`), so the worker probes the tools' mount
/// namespace before its hello, and (unless `network_off`, `[containment] network = "off"`)
/// makes the tools' network namespace.
pub async fn worker_start(
    exe: &Path,
    runs: usize,
    namespace: bool,
    network_off: bool,
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
        network_off,
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
