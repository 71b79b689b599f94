//! The Subzero worker: one process per child, run by the broker as `subzero-worker worker`.
//!
//! It speaks JSON lines on stdin/stdout (see [`control`]), runs the model loop with exactly the
//! granted tools, keeps the child's transcript tree, and contains every tool process: on
//! cancel, stdin EOF or SIGTERM (also the parent-death signal) the whole tool tree is killed
//! and reaped before the worker confirms or exits.

pub mod cli;
pub mod control;

mod calls;
mod compact;
mod containment;
mod context;
mod control_input;
mod emit;
mod engine_pi;
mod failure;
mod handoff;
mod model;
mod prompt;
mod redact;
mod run;
mod scratch;
mod settlement;
mod setup;
mod startup;
mod steering;
mod text_events;
mod tool_exec;
mod tools;
mod transcript;
mod usage;

/// The worker's byte-level parsers, re-exported for the fuzz targets in `fuzz/` and the seed
/// replays in `tests/`. Not an API: nothing outside those may rely on it.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::model::chat::ChatStream;
    pub use crate::model::sse::{SseError, SseParser};
    pub use crate::model::{Assembler, Flow, ModelError, ModelTurn, ToolCall};
    pub use crate::redact::{PLACEHOLDER, StreamRedactor, add_secrets, redact};
    pub use crate::transcript::Parsed as ParsedTranscript;
}

use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use containment::Containment;
use control::{
    DiscardReason, ErrorBody, ErrorBodyExt, ErrorCode, Inbound, Outbound, RunId, RunStatus,
    RunUsage, StartRun, Steer, WorkerEvent,
};
use control_input::{Input, spawn_stdin_reader};
use run::{Completed, Progress, RunContext};
use scratch::Scratch;
use settlement::Settlement;
use startup::{Started, start_up};
use steering::SteerQueue;

/// Command-line options of `subzero-worker worker`.
#[derive(Debug, Clone, Default)]
pub struct WorkerOptions {
    /// Inherited descriptors (the child's flock-held lock file, then its workspace slots)
    /// that every tool process inherits, so the kernel holds them while any of the tree lives.
    pub lock_fds: Vec<RawFd>,
    /// Where to make the private scratch directory (the broker's `<state>/scratch`); the
    /// system temp directory without it.
    pub scratch_parent: Option<PathBuf>,
    /// Why this worker is not init of a PID namespace (from the broker).
    pub process_containment_reason: Option<String>,
    /// `--landlock off`: apply no Landlock ruleset, as on a kernel without it (the broker's
    /// `[containment] filesystem = "off"`).
    pub landlock_off: bool,
    /// `--network off`: make no network namespace for the tools, as on a kernel that
    /// refuses one (the broker's `[containment] network = "off"`).
    pub network_off: bool,
    /// The cgroup the broker started this worker in (`--cgroup DIR`): its tool processes
    /// go into `DIR/tools`, which every teardown kills.
    pub cgroup: Option<PathBuf>,
    /// Paths no tool process may see (`--hide PATH`): the broker's state directory, its
    /// configuration and its credential files.
    pub hide: Vec<PathBuf>,
    /// The cgroups that bound the tool tree's resources (`--limits-cgroup pids=DIR`,
    /// `memory=DIR`), made by the broker for this worker.
    pub limits_cgroups: Vec<String>,
}

pub use engine_pi::{PiOptions, run_pi};
pub use tool_exec::{ToolExecOptions, tool_exec};

/// The argument that tells `subzero-worker worker` why it has no PID namespace.
pub const PROCESS_CONTAINMENT_REASON_ARG: &str = containment::REASON_ARG;

/// Runs the worker until stdin closes or it is told to terminate; returns the exit code.
pub fn run(options: WorkerOptions) -> i32 {
    let Started {
        scratch,
        process,
        holders,
    } = match start_up(&options) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let hello = containment::support(&process, holders).and_then(|support| {
        control::hello(
            env!("CARGO_PKG_VERSION"),
            transcript::TRANSCRIPT_VERSION,
            model::PROTOCOLS,
            support,
        )
    });
    match hello {
        Ok(hello) => emit::emit(&hello),
        Err(err) => {
            tracing::error!(%err, "the hello line breaks the contract");
            return 2;
        }
    }
    // One runtime thread: the worker waits on one model stream at a time, tool work runs on
    // the blocking pool (started on demand) and stdin on a thread of its own, so a second
    // runtime thread (and its stack and malloc arena) only cost memory while the child
    // waits on its model.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            tracing::error!(%err, "cannot start the async runtime");
            return 2;
        }
    };
    let code = runtime.block_on(Worker::new(scratch.clone()).serve());
    runtime.shutdown_timeout(Duration::from_millis(100));
    if let Err(err) = scratch.remove() {
        tracing::warn!(%err, path = %scratch.path().display(), "cannot remove the scratch directory");
    }
    code
}

enum Outcome {
    Completed(Completed),
    Failed(ErrorBody),
    Stopped,
}

struct Active {
    run_id: RunId,
    steers: Arc<SteerQueue>,
    progress: run::SharedProgress,
    cancel: Arc<Notify>,
    handle: JoinHandle<Outcome>,
}

struct Worker {
    containment: Arc<Containment>,
    scratch: Arc<Scratch>,
    /// What the child's endpoints taught this worker, kept across its runs.
    learned: Arc<model::Learned>,
    active: Option<Active>,
}

impl Worker {
    fn new(scratch: Arc<Scratch>) -> Self {
        Self {
            containment: Arc::new(Containment::new()),
            scratch,
            learned: Arc::default(),
            active: None,
        }
    }

    async fn serve(mut self) -> i32 {
        self.spawn_reaper();
        let (tx, mut rx) = mpsc::unbounded_channel();
        spawn_stdin_reader(tx);
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::error!("cannot install signal handlers");
            return 2;
        };
        // The broker starts the worker with these blocked, so a parent-death signal sent
        // before the handlers existed is pending, not lost: it arrives now.
        containment::unblock_termination();
        loop {
            tokio::select! {
                input = rx.recv() => match input {
                    Some(Input::Message(message)) => self.handle(message).await,
                    Some(Input::Eof) | None => {
                        tracing::info!("control channel closed; tearing down");
                        self.teardown().await;
                        return 0;
                    }
                },
                outcome = wait_active(&mut self.active) => {
                    if let Some(active) = self.active.take() {
                        self.settle(active, outcome).await;
                    }
                }
                _ = term.recv() => { self.abandon("SIGTERM").await; return 0; }
                _ = int.recv() => { self.abandon("SIGINT").await; return 0; }
                _ = hup.recv() => { self.abandon("SIGHUP").await; return 0; }
            }
        }
    }

    fn spawn_reaper(&self) {
        let containment = self.containment.clone();
        tokio::spawn(async move {
            let mut sigchld = signal(SignalKind::child()).ok();
            loop {
                match sigchld.as_mut() {
                    Some(s) => {
                        let _ = tokio::time::timeout(Duration::from_millis(200), s.recv()).await;
                    }
                    None => tokio::time::sleep(Duration::from_millis(50)).await,
                }
                containment.reap();
            }
        });
    }

    async fn handle(&mut self, message: Inbound) {
        match message {
            Inbound::StartRun(start) => self.start(*start),
            Inbound::Steer(steer) => self.steer(steer),
            Inbound::Cancel(cancel) => match &self.active {
                Some(active) if active.run_id == cancel.run_id => active.cancel.notify_one(),
                _ => {
                    // Not the active run: nothing runs for it; confirm after sweeping anyway.
                    let reaped = if self.active.is_none() {
                        self.containment.kill_all().await
                    } else {
                        0
                    };
                    emit::emit(&Outbound::CancelConfirmed {
                        run_id: cancel.run_id,
                        reaped: u64::from(reaped),
                    });
                }
            },
        }
    }

    fn start(&mut self, start: StartRun) {
        redact::add_secrets(
            std::iter::once(start.model.key.expose())
                .chain(start.secrets.iter().map(String::as_str))
                .chain(start.mcp_env.values().map(String::as_str)),
        );
        if let Some(active) = &self.active {
            tracing::warn!(active = %active.run_id.as_str(), "start_run while a run is active");
            emit::emit(&Outbound::RunSettled {
                run_id: start.run_id,
                status: RunStatus::Failed,
                result: None,
                budget: None,
                cut: None,
                error: Some(ErrorBody::new(
                    ErrorCode::Busy,
                    format!(
                        "busy: run {} is still active in this worker",
                        active.run_id.as_str()
                    ),
                )),
                usage: RunUsage::default().into(),
            });
            return;
        }
        let run_id = start.run_id.clone();
        let child_id = start.child_id.to_string();
        let steers = Arc::new(SteerQueue::default());
        let progress = Arc::new(std::sync::Mutex::new(Progress::default()));
        let cancel = Arc::new(Notify::new());
        let task = run_task(
            Arc::new(start),
            self.containment.clone(),
            self.scratch.clone(),
            self.learned.clone(),
            steers.clone(),
            progress.clone(),
            cancel.clone(),
        );
        tracing::info!(child_id = %child_id, run_id = %run_id.as_str(), "run started");
        self.active = Some(Active {
            run_id,
            steers,
            progress,
            cancel,
            handle: tokio::spawn(task),
        });
    }

    fn steer(&self, steer: Steer) {
        let refused = match &self.active {
            Some(active) if active.run_id == steer.run_id => active.steers.offer(steer).err(),
            _ => Some(steer),
        };
        // The run it names already gave its final answer (or is not this worker's).
        if let Some(steer) = refused {
            emit::event(
                &steer.run_id,
                WorkerEvent::SteerDiscarded {
                    steer_id: steer.steer_id,
                    request_id: steer.request_id,
                    reason: DiscardReason::NotActive,
                },
            );
        }
    }

    /// Reports a finished run: kills what is left of its tool tree, then leaf (when completed),
    /// discarded steers, the settlement and — after a stop — the confirmation with the count.
    async fn settle(&mut self, active: Active, outcome: Outcome) {
        let reaped = self.containment.kill_all().await;
        let usage = active.progress.lock().map(|p| p.usage).unwrap_or_default();
        // The run is over: take its text (up to `model_response_bytes`) instead of copying it,
        // so a cut hostile answer is held once, not twice, while the settlement is written.
        let partial = active
            .progress
            .lock()
            .map(|mut p| std::mem::take(&mut p.text))
            .map(|text| redact::redact(&text))
            .unwrap_or_default();
        let partial = (!partial.is_empty()).then_some(partial);
        let run_id = active.run_id.clone();
        let reason = settlement::discard_reason(&outcome);
        for steer in active.steers.close() {
            emit::event(
                &run_id,
                WorkerEvent::SteerDiscarded {
                    steer_id: steer.steer_id,
                    request_id: steer.request_id,
                    reason,
                },
            );
        }
        let settlement = Settlement::of(&run_id, outcome, partial);
        let status = settlement.status;
        tracing::info!(run_id = %run_id.as_str(), ?status, reaped, "run settled");
        emit::emit(&settlement.message(run_id.clone(), usage));
        if status == RunStatus::Stopped {
            emit::emit(&Outbound::CancelConfirmed {
                run_id,
                reaped: u64::from(reaped),
            });
        }
    }

    /// Told to terminate by a signal (the broker's death, or anyone else's): nobody asked to stop the run, so it is not reported
    /// `stopped`. A run that completes within the grace is reported; otherwise the tree
    /// is torn down and the worker exits without a settlement, which the broker records
    /// as interrupted when the pipe closes.
    async fn abandon(&mut self, signal: &str) {
        tracing::warn!(
            signal,
            "terminating on a signal; tearing the tool tree down"
        );
        if let Some(mut active) = self.active.take() {
            active.cancel.notify_one();
            let outcome = tokio::time::timeout(Duration::from_millis(300), &mut active.handle)
                .await
                .ok()
                .and_then(Result::ok);
            active.handle.abort();
            if let Some(Outcome::Completed(done)) = outcome {
                self.settle(active, Outcome::Completed(done)).await;
                return;
            }
        }
        let reaped = self.containment.kill_all().await;
        tracing::info!(reaped, "tool tree torn down");
    }

    async fn teardown(&mut self) {
        if let Some(mut active) = self.active.take() {
            active.cancel.notify_one();
            let outcome = tokio::time::timeout(Duration::from_millis(300), &mut active.handle)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(Outcome::Stopped);
            active.handle.abort();
            let outcome = match outcome {
                Outcome::Completed(done) => Outcome::Completed(done),
                _ => Outcome::Stopped,
            };
            self.settle(active, outcome).await;
        } else {
            let reaped = self.containment.kill_all().await;
            tracing::info!(reaped, "tool tree torn down");
        }
    }
}

async fn wait_active(active: &mut Option<Active>) -> Outcome {
    match active {
        Some(active) => match (&mut active.handle).await {
            Ok(outcome) => outcome,
            Err(err) => Outcome::Failed(ErrorBody::new(
                ErrorCode::Internal,
                format!("internal: the run task ended abnormally: {err}"),
            )),
        },
        None => std::future::pending().await,
    }
}

async fn run_task(
    start: Arc<StartRun>,
    containment: Arc<Containment>,
    scratch: Arc<Scratch>,
    learned: Arc<model::Learned>,
    steers: Arc<SteerQueue>,
    progress: run::SharedProgress,
    cancel: Arc<Notify>,
) -> Outcome {
    if let Err(err) = run::check_grant(&start) {
        return Outcome::Failed(err);
    }
    let root = match workspace_root(&start) {
        Ok(root) => root,
        Err(err) => return Outcome::Failed(err),
    };
    let deadline_ms = start.snapshot.limits.deadline_ms.get();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(deadline_ms);
    // The loop hands off at the deadline; this is the backstop for a handoff that never
    // ends (its own request is bounded by HANDOFF_TIMEOUT).
    let backstop = deadline + handoff::HANDOFF_TIMEOUT + Duration::from_secs(5);
    // Before any tool process exists: every one of them confines itself with this.
    containment::network::run_started(&start.run_id);
    let jail = match containment::tool::prepare(&start.snapshot, &root, scratch.path()) {
        Ok(jail) => jail,
        Err(message) => {
            return Outcome::Failed(ErrorBody::new(ErrorCode::UnsupportedGrant, message));
        }
    };
    let tools = tools::ToolContext {
        root,
        containment,
        scratch,
        jail,
    };
    let work = async {
        // Setup first (the servers may need what it installs), then the servers: a grant
        // they cannot satisfy fails before the transcript is touched.
        let setup_note = setup::run(&start, &tools).await;
        let mcp = Arc::new(run::start_mcp(&start, &tools).await?);
        let transcript = run::open_transcript(&start)?;
        let ctx = RunContext {
            start: start.clone(),
            tools,
            steers,
            progress,
            mcp: mcp.clone(),
            learned,
            deadline,
            setup_note,
        };
        let result = run::drive(ctx, transcript).await;
        if let Ok(mcp) = Arc::try_unwrap(mcp) {
            mcp.close().await;
        }
        result
    };
    tokio::select! {
        result = tokio::time::timeout_at(backstop, work) => match result {
            Ok(Ok(done)) => Outcome::Completed(done),
            Ok(Err(err)) => Outcome::Failed(err),
            Err(_) => Outcome::Failed(
                ErrorBody::new(
                    ErrorCode::LimitExceeded,
                    format!(
                        "limit_exceeded: the run passed its deadline of {deadline_ms} ms (deadlineMs) and its handoff did not end"
                    ),
                )
                .with_details(serde_json::json!({ "limit": "deadlineMs" })),
            ),
        },
        () = cancel.notified() => Outcome::Stopped,
    }
}

/// The run's canonical workspace root, which must be a directory.
fn workspace_root(start: &StartRun) -> Result<PathBuf, ErrorBody> {
    match std::fs::canonicalize(&start.workspace_root) {
        Ok(root) if root.is_dir() => Ok(root),
        _ => Err(ErrorBody::new(
            ErrorCode::InvalidRequest,
            format!(
                "invalid_request: workspace root {} is not a directory",
                start.workspace_root
            ),
        )),
    }
}

/// The crate's test suite (`tests/testsuite/`) is compiled into its unit-test binary, so the
/// crate links one test binary, not two; the suite names the crate by its name.
#[cfg(test)]
extern crate self as subzero_worker;
#[cfg(test)]
#[path = "../tests/testsuite/mod.rs"]
mod testsuite;
