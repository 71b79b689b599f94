//! Driving one child's worker: starting it, feeding it runs, recording what it reports,
//! and closing it when nothing is queued.
//!
//! One driver task per live worker. It is the only writer of that worker's stdin and
//! the only reader of its stdout, so the order of control messages is the order of
//! this task's decisions. The next queued run is dispatched by the same store
//! transaction that settles the previous one (after its leaf is recorded), so a run
//! never starts before its predecessor's result is durable.

mod retire;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use secrecy::ExposeSecret;
use subzero_core::lifecycle::Supervisor;
use subzero_core::{ChildId, ErrorCode, RunId};
use subzero_protocol::{self as p, BrokerMessage, RunSettledStatus, WorkerEvent, WorkerMessage};
use tokio::sync::mpsc;

use super::live::{ToWorker, WorkerLink, label};
use super::wire::{broken, positive, wire};
use super::{Broker, BrokerError, events, lock};
use crate::artifacts;
use crate::locks::{self, ChildLock, SlotGuard, SlotKind};
use crate::scope::WorkspaceScope;
use crate::secret_env::SecretEnv;
use crate::store::{PartialResult, Phase, Settled, Settlement, WorkerInfo};
use crate::supervisor::{WorkerConn, reap};

/// Bytes of a result shown inline in `completed` events and `lastRun.preview`.
pub(super) const PREVIEW_BYTES: usize = 2048;

/// Where a run starts in the transcript.
#[derive(Clone, Debug, Default)]
pub(super) struct StartFrom {
    /// Leaf id and digest to branch from; `None` continues a new or current transcript.
    pub leaf: Option<(String, String)>,
    /// Appended before the prompt after an interruption.
    pub recovery_notice: Option<String>,
}

/// A run to start on a fresh worker.
#[derive(Debug)]
pub(super) struct FirstRun {
    pub run: RunId,
    pub prompt: String,
    pub from: StartFrom,
}

impl Broker {
    /// Start a worker for `child` holding `child_lock` and `slots`, and give it `first`.
    /// On failure the run is settled as failed, so nothing is left `running`.
    pub(super) async fn start_worker(
        self: &Arc<Self>,
        child: ChildId,
        scope: &WorkspaceScope,
        child_lock: ChildLock,
        slots: Vec<SlotGuard>,
        first: FirstRun,
    ) -> Result<(), BrokerError> {
        let run = first.run;
        match self
            .try_start_worker(child, scope, child_lock, slots, first)
            .await
        {
            Ok(()) => Ok(()),
            Err(err) => {
                self.record_failed_start(child, run, &err).await;
                Err(err)
            }
        }
    }

    /// A run that got no worker fails with the reason, so nothing is left `running`.
    pub(super) async fn record_failed_start(&self, child: ChildId, run: RunId, err: &BrokerError) {
        let settlement = Settlement::Failed {
            code: err.code(),
            message: err.message().to_owned(),
            partial: None,
        };
        if let Err(settle_err) = self
            .store
            .settle_run(child, run, self.owner_token(), settlement)
            .await
        {
            tracing::error!(%child, %run, %settle_err, "could not record a failed worker start");
        }
    }

    async fn try_start_worker(
        self: &Arc<Self>,
        child: ChildId,
        scope: &WorkspaceScope,
        child_lock: ChildLock,
        slots: Vec<SlotGuard>,
        first: FirstRun,
    ) -> Result<(), BrokerError> {
        let token = self.owner_token().to_owned();
        let lock_path = child_lock.path().to_path_buf();
        let mut inherit = vec![child_lock.into_fd()];
        let mut held = Vec::new();
        for slot in slots {
            held.push((slot.kind(), slot.index()));
            self.store
                .mirror_slot(scope, slot.kind(), slot.index(), child, &token)
                .await?;
            inherit.push(slot.into_fd());
        }
        let launch = self.launch(inherit, scope.root());
        let started = WorkerConn::start(&self.spawner, launch, label(child)).await;
        let (conn, hello) = match started {
            Ok(ok) => ok,
            Err(e) => {
                self.unmirror(scope, &held).await;
                return Err(BrokerError::new(
                    ErrorCode::WorkerIncompatible,
                    format!("the worker could not be started: {e}; run `subzero doctor`"),
                ));
            }
        };
        self.store
            .record_worker(
                child,
                &token,
                WorkerInfo {
                    name: hello.name.clone(),
                    version: hello.version.clone(),
                    transcript_version: u32::try_from(hello.transcript_version).unwrap_or(u32::MAX),
                },
            )
            .await?;
        // SAFETY: `hello` is this worker's first control line, parsed and validated by
        // `WorkerConn::start` just above; `steering` is what the worker advertised in it.
        #[allow(unsafe_code, reason = "mint point: the worker's parsed hello")]
        let capabilities = unsafe { Supervisor::designate() }.capabilities(hello.steering);
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut live = lock(&self.live);
            let entry = live.get_mut(&child).ok_or_else(|| {
                BrokerError::internal(format!("child {child} has no model in memory"))
            })?;
            entry.worker = Some(WorkerLink {
                tx: tx.clone(),
                capabilities,
            });
        }
        let driver = Driver {
            broker: Arc::clone(self),
            child,
            scope: scope.clone(),
            conn,
            rx,
            slots: held,
            lock_path,
            active: None,
            leaf: None,
            stopped: None,
        };
        // Queue the first run before the driver runs, so it is the first thing it sends.
        let _ = tx.send(ToWorker::Start {
            run: first.run,
            prompt: first.prompt,
        });
        self.drivers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::spawn(driver.run(first.from));
        Ok(())
    }

    async fn unmirror(&self, scope: &WorkspaceScope, held: &[(SlotKind, u32)]) {
        for (kind, index) in held {
            if let Err(e) = self.store.unmirror_slot(scope, *kind, *index).await {
                tracing::warn!(%e, "could not clear a slot mirror");
            }
        }
    }

    pub(super) fn transcript_path(&self, child: ChildId) -> PathBuf {
        self.paths
            .root()
            .join("transcripts")
            .join(format!("{child}.jsonl"))
    }

    fn start_run_message(
        &self,
        child: ChildId,
        scope: &WorkspaceScope,
        run: RunId,
        prompt: &str,
        from: &StartFrom,
    ) -> Result<BrokerMessage, BrokerError> {
        let (model, snapshot) = {
            let live = lock(&self.live);
            let entry = live.get(&child).ok_or_else(|| {
                BrokerError::new(
                    ErrorCode::CredentialsRequired,
                    format!("child {child} has no credentials in this broker; call subzero_resume with a model first"),
                )
            })?;
            (entry.model.clone(), entry.snapshot.clone())
        };
        let mcp_env = mcp_env(&snapshot, &self.secrets)?;
        let transcripts = self.paths.root().join("transcripts");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&transcripts)
            .map_err(|e| {
                BrokerError::internal(format!("cannot create {}: {e}", transcripts.display()))
            })?;
        let (from_leaf, expected_digest) = match &from.leaf {
            Some((leaf, digest)) => (
                Some(wire(leaf.as_str(), START_RUN, "fromLeaf")?),
                Some(wire(digest.as_str(), START_RUN, "expectedDigest")?),
            ),
            None => (None, None),
        };
        let limit = |value: u32, field: &str| positive(value, START_RUN, field);
        Ok(BrokerMessage::StartRun {
            child_id: child.into(),
            expected_digest,
            from_leaf,
            mcp_env,
            model: p::WorkerModel {
                api: model.api,
                key: p::ApiKey::new(model.key.expose_secret())
                    .map_err(|e| broken(START_RUN, "model.key", e.message()))?,
                model: wire(model.model.as_str(), START_RUN, "model.model")?,
                url: wire(model.url.as_str(), START_RUN, "model.url")?,
            },
            prompt: wire(prompt, START_RUN, "prompt")?,
            recovery_notice: from
                .recovery_notice
                .as_deref()
                .map(|notice| wire(notice, START_RUN, "recoveryNotice"))
                .transpose()?,
            run_id: run.into(),
            secrets: p::StartRunSecrets(Vec::new()),
            snapshot,
            stream_limits: Some(p::StreamLimits {
                idle_timeout_ms: limit(
                    self.limits.model_idle_timeout_ms,
                    "streamLimits.idleTimeoutMs",
                )?,
                max_response_bytes: limit(
                    self.limits.model_response_bytes,
                    "streamLimits.maxResponseBytes",
                )?,
                max_tool_argument_bytes: limit(
                    self.limits.tool_argument_bytes,
                    "streamLimits.maxToolArgumentBytes",
                )?,
            }),
            transcript_path: wire(
                self.transcript_path(child).to_string_lossy().into_owned(),
                START_RUN,
                "transcriptPath",
            )?,
            workspace_root: wire(
                scope.root().to_string_lossy().into_owned(),
                START_RUN,
                "workspaceRoot",
            )?,
        })
    }
}

/// The `start_run` control message, as error messages name it.
const START_RUN: &str = "start_run message";

/// Values of the snapshot's MCP `env:VAR` references, from the secrets the broker captured
/// from its environment at startup (the worker's environment is cleared). Each value
/// travels only inside `start_run` and is redacted by the worker like the key. A reference
/// to a variable that was not captured is `credentials_required`, naming the server and
/// the variable.
pub(super) fn mcp_env(
    snapshot: &p::GrantSnapshot,
    secrets: &SecretEnv,
) -> Result<BTreeMap<String, p::SecretText>, BrokerError> {
    let mut values = BTreeMap::new();
    for server in snapshot.mcp_servers.iter() {
        for (name, reference) in &server.env_refs {
            let reference = reference.as_str();
            let var = reference.strip_prefix("env:").unwrap_or(reference);
            match secrets.get(var).map(ExposeSecret::expose_secret) {
                Some(value) if !value.is_empty() => {
                    let value = p::SecretText::new(value).map_err(|e| {
                        broken(START_RUN, &format!("mcpEnv.{reference}"), e.message())
                    })?;
                    values.insert(reference.to_owned(), value);
                }
                _ => {
                    return Err(BrokerError::new(
                        ErrorCode::CredentialsRequired,
                        format!(
                            "MCP server `{}` needs {name} from {reference}, but {var} was unset or empty in the broker's environment when it started (the broker reads the variables its configuration names once, at startup); set it where the host starts `subzero mcp`",
                            server.name.as_str()
                        ),
                    ));
                }
            }
        }
    }
    Ok(values)
}

struct Driver {
    broker: Arc<Broker>,
    child: ChildId,
    scope: WorkspaceScope,
    conn: WorkerConn,
    rx: mpsc::UnboundedReceiver<ToWorker>,
    slots: Vec<(SlotKind, u32)>,
    lock_path: PathBuf,
    /// The run the worker is working on.
    active: Option<RunId>,
    /// The leaf the worker committed for the active run.
    leaf: Option<(String, String)>,
    /// The run the worker reported stopped; settled at its cancel confirmation.
    stopped: Option<RunId>,
}

/// What the driver loop decided.
enum Next {
    Continue,
    Close,
    Lost(String),
}

impl Driver {
    async fn run(mut self, mut from: StartFrom) {
        loop {
            let next = tokio::select! {
                message = self.rx.recv() => match message {
                    Some(m) => self.handle_command(m, &mut from).await,
                    // The broker dropped the link (shutdown). A run still active has not
                    // confirmed its stop: closing the pipe ends it, and it is recorded as
                    // interrupted, not stopped.
                    None if self.active.is_some() || self.stopped.is_some() => {
                        Next::Lost("the broker shut down before the run settled".into())
                    }
                    None => Next::Close,
                },
                line = self.conn.recv() => match line {
                    Some(Ok(message)) => self.handle_report(message).await,
                    Some(Err(bad)) => Next::Lost(format!("the worker broke the control protocol: {bad}")),
                    None => Next::Lost("the worker exited unexpectedly".into()),
                },
            };
            match next {
                Next::Continue => {}
                Next::Close => {
                    if self.try_close() {
                        break;
                    }
                }
                Next::Lost(reason) => {
                    self.lost(&reason).await;
                    break;
                }
            }
        }
        self.finish().await;
    }

    async fn handle_command(&mut self, message: ToWorker, from: &mut StartFrom) -> Next {
        match message {
            ToWorker::Control(message) => match self.conn.send(*message).await {
                Ok(()) => Next::Continue,
                Err(e) => Next::Lost(format!("the worker's control pipe failed: {e}")),
            },
            ToWorker::Start { run, prompt } => {
                let start = std::mem::take(from);
                let built =
                    self.broker
                        .start_run_message(self.child, &self.scope, run, &prompt, &start);
                let message = match built {
                    Ok(m) => m,
                    Err(err) => {
                        self.settle(
                            run,
                            Settlement::Failed {
                                code: err.code(),
                                message: err.message().to_owned(),
                                partial: None,
                            },
                        )
                        .await;
                        return Next::Close;
                    }
                };
                self.active = Some(run);
                self.leaf = None;
                match self.conn.send(message).await {
                    Ok(()) => Next::Continue,
                    Err(e) => Next::Lost(format!("the worker's control pipe failed: {e}")),
                }
            }
        }
    }

    async fn handle_report(&mut self, message: WorkerMessage) -> Next {
        match message {
            WorkerMessage::Hello { .. } => Next::Continue,
            WorkerMessage::Event { run_id, event } => {
                let Some(run) = self.our_run(run_id.as_str()) else {
                    return Next::Continue;
                };
                self.record_event(run, event).await;
                Next::Continue
            }
            WorkerMessage::LeafCommitted {
                run_id,
                leaf_id,
                digest,
            } => {
                if self.our_run(run_id.as_str()).is_some() {
                    self.leaf = Some((leaf_id.to_string(), digest.to_string()));
                }
                Next::Continue
            }
            WorkerMessage::RunSettled {
                run_id,
                status,
                result,
                error,
                ..
            } => {
                let Some(run) = self.our_run(run_id.as_str()) else {
                    return Next::Continue;
                };
                let settlement = match status {
                    RunSettledStatus::Completed => {
                        self.completed(run, result.unwrap_or_default()).await
                    }
                    RunSettledStatus::Failed => {
                        let (code, message) = match error {
                            Some(body) => (ErrorCode::from(body.code), body.message.to_string()),
                            None => (
                                ErrorCode::Internal,
                                "the worker reported a failure without a reason".to_owned(),
                            ),
                        };
                        let partial = match result {
                            Some(text) if !text.is_empty() => self.partial(run, text).await,
                            _ => None,
                        };
                        Settlement::Failed {
                            code,
                            message,
                            partial,
                        }
                    }
                    RunSettledStatus::Stopped => {
                        // `stopped` is recorded only with the cancel confirmation that follows.
                        self.stopped = Some(run);
                        return Next::Continue;
                    }
                };
                self.settle_and_dispatch(run, settlement).await
            }
            WorkerMessage::CancelConfirmed { run_id, reaped } => {
                let Ok(run) = RunId::parse(run_id.as_str()) else {
                    return Next::Continue;
                };
                if self.stopped == Some(run) {
                    self.stopped = None;
                    let reaped = u32::try_from(reaped).unwrap_or(u32::MAX);
                    // SAFETY: the worker just sent `cancel_confirmed` for `run`, the run it
                    // reported `stopped`; it sends that line only once its tool tree is gone.
                    #[allow(unsafe_code, reason = "mint point: the worker's cancel_confirmed")]
                    let confirmed =
                        unsafe { Supervisor::designate() }.confirm_stop(self.child, run, reaped);
                    return self
                        .settle_and_dispatch(run, Settlement::Stopped { confirmed })
                        .await;
                }
                Next::Continue
            }
        }
    }

    fn our_run(&self, text: &str) -> Option<RunId> {
        RunId::parse(text)
            .ok()
            .filter(|run| self.active == Some(*run))
    }

    async fn record_event(&mut self, run: RunId, event: WorkerEvent) {
        let store = &self.broker.store;
        let token = self.broker.owner_token();
        let phase = match &event {
            WorkerEvent::TurnStarted { .. } => {
                let _ = store.set_phase(self.child, token, Phase::Model).await;
                return;
            }
            WorkerEvent::Text { .. } => Some(Phase::Model),
            WorkerEvent::Tool {
                state: p::ToolState::Started,
                ..
            } => Some(Phase::Tool),
            WorkerEvent::Tool { .. } => Some(Phase::Model),
            WorkerEvent::SteerApplied { .. } | WorkerEvent::SteerDiscarded { .. } => None,
        };
        match events::stored(&event) {
            Ok((kind, payload)) => {
                if let Err(e) = store
                    .append_event(self.child, Some(run), token, kind, payload)
                    .await
                {
                    tracing::warn!(child = %self.child, %run, %e, "could not record a worker event");
                }
            }
            Err(e) => {
                tracing::warn!(child = %self.child, %run, %e, "could not encode a worker event");
            }
        }
        if let Some(phase) = phase {
            let _ = store.set_phase(self.child, token, phase).await;
        }
    }

    async fn completed(&mut self, run: RunId, result: String) -> Settlement {
        let Some((leaf_id, leaf_digest)) = self.leaf.take() else {
            return Settlement::Failed {
                code: ErrorCode::Internal,
                message: "the worker reported completion without committing a transcript leaf"
                    .into(),
                partial: None,
            };
        };
        let leaf = subzero_core::Sha256Digest::parse(&leaf_digest)
            .ok()
            .and_then(|digest| subzero_core::lifecycle::LeafRef::new(&leaf_id, digest).ok());
        let Some(leaf) = leaf else {
            return Settlement::Failed {
                code: ErrorCode::Internal,
                message: format!(
                    "the worker committed a malformed transcript leaf {leaf_id:?} ({leaf_digest:?})"
                ),
                partial: None,
            };
        };
        // SAFETY: `leaf` is the worker's `leaf_committed` line for the active run `run`,
        // parsed above and taken from `self.leaf` (spent once); the settlement carrying
        // this token records it as the child's last leaf in the same transaction.
        #[allow(unsafe_code, reason = "mint point: the worker's leaf_committed")]
        let leaf = unsafe { Supervisor::designate() }.leaf_recorded(self.child, run, leaf);
        let files = self.broker.artifacts.clone();
        let child = self.child;
        let text = result.clone();
        let written = tokio::task::spawn_blocking(move || files.write(child, &text)).await;
        let artifact = match written {
            Ok(Ok(artifact)) => artifact,
            Ok(Err(e)) => {
                return Settlement::Failed {
                    code: ErrorCode::ArtifactUnavailable,
                    message: format!(
                        "the result of run {run} could not be stored: {}",
                        BrokerError::from(e).message()
                    ),
                    partial: None,
                };
            }
            Err(e) => {
                return Settlement::Failed {
                    code: ErrorCode::Internal,
                    message: format!("storing the result panicked: {e}"),
                    partial: None,
                };
            }
        };
        let preview = artifacts::preview(&result, PREVIEW_BYTES);
        Settlement::Completed {
            preview: preview.text,
            preview_truncated: preview.truncated,
            artifact: Some(artifact),
            leaf,
        }
    }

    /// A failed run's partial output, stored like a result so the parent can read what was
    /// produced (e.g. the text up to a response cap). Best effort: a failure to store it is
    /// logged and the run still fails with its own error.
    async fn partial(&mut self, run: RunId, text: String) -> Option<PartialResult> {
        let files = self.broker.artifacts.clone();
        let child = self.child;
        let preview = artifacts::preview(&text, PREVIEW_BYTES);
        let written = tokio::task::spawn_blocking(move || files.write(child, &text)).await;
        let artifact = match written {
            Ok(Ok(artifact)) => Some(artifact),
            Ok(Err(e)) => {
                tracing::warn!(%child, %run, %e, "could not store a failed run's partial result");
                None
            }
            Err(e) => {
                tracing::warn!(%child, %run, %e, "storing a failed run's partial result panicked");
                None
            }
        };
        Some(PartialResult {
            preview: preview.text,
            preview_truncated: preview.truncated,
            artifact,
        })
    }

    async fn settle(&mut self, run: RunId, settlement: Settlement) -> Option<Settled> {
        self.active = None;
        match self
            .broker
            .store
            .settle_run(self.child, run, self.broker.owner_token(), settlement)
            .await
        {
            Ok(settled) => Some(settled),
            Err(e) => {
                tracing::error!(child = %self.child, %run, %e, "could not settle a run");
                None
            }
        }
    }

    async fn settle_and_dispatch(&mut self, run: RunId, settlement: Settlement) -> Next {
        // A settlement that leaves the child idle is recorded only once this worker is gone
        // with its tree and locks: a caller that reads `ready` may start the next run at once.
        let retired = self.retire_if_idle().await;
        let Some(settled) = self.settle(run, settlement).await else {
            return Next::Close;
        };
        match settled.next {
            // A follow-up queued while the worker was retiring: it starts on a new worker.
            Some(next) if retired => {
                self.restart_for(next);
                Next::Close
            }
            Some(next) => {
                let mut from = StartFrom::default();
                match self.broker.store.child(&self.scope, self.child).await {
                    Ok(row) => {
                        from.leaf = row.last_leaf.map(|l| (l.leaf_id, l.digest));
                    }
                    Err(e) => tracing::warn!(%e, "could not read the leaf to continue from"),
                }
                self.handle_command(
                    ToWorker::Start {
                        run: next.run_id,
                        prompt: next.prompt,
                    },
                    &mut from,
                )
                .await
            }
            None => Next::Close,
        }
    }

    /// Close unless a run was handed to this worker in the meantime. Removing the link
    /// under the live lock makes the choice race-free with `send`.
    fn try_close(&mut self) -> bool {
        let mut live = lock(&self.broker.live);
        if !self.rx.is_empty() || self.active.is_some() {
            return false;
        }
        if let Some(entry) = live.get_mut(&self.child) {
            entry.worker = None;
        }
        true
    }

    /// The worker died or broke the protocol mid-run: end its tree and record the run
    /// as interrupted. Nothing is retried.
    async fn lost(&mut self, reason: &str) {
        {
            let mut live = lock(&self.broker.live);
            if let Some(entry) = live.get_mut(&self.child) {
                entry.worker = None;
            }
        }
        tracing::warn!(child = %self.child, reason, "worker lost");
        self.conn.close();
        let exited = self.conn.wait_exit(Duration::from_millis(500)).await;
        let tree_gone = self.kill_leftovers(exited).await;
        let run = self.active.or(self.stopped);
        if let Some(run) = run {
            self.stopped = None;
            self.settle(
                run,
                Settlement::Interrupted {
                    reason: reason.to_owned(),
                    tree_gone,
                },
            )
            .await;
        }
    }

    /// Kill whatever of the worker's tree is left (the worker itself if it did not exit,
    /// and every process still holding the child lock). Returns whether the lock is free.
    async fn kill_leftovers(&mut self, worker_exited: bool) -> bool {
        let mut pids: BTreeSet<i32> = locks::holders(&self.lock_path)
            .iter()
            .filter_map(|h| i32::try_from(h.pid).ok())
            .collect();
        let table = reap::process_table();
        pids.extend(reap::descendants(&table, self.conn.pid()));
        let mut not_mine = BTreeSet::new();
        if !worker_exited {
            pids.insert(self.conn.pid());
            not_mine.insert(self.conn.pid());
        }
        pids.remove(&(std::process::id() as i32));
        reap::terminate(&pids, &not_mine, Duration::from_millis(200)).await;
        if !worker_exited {
            self.conn.wait_exit(Duration::from_secs(1)).await;
        }
        locks::is_free(&self.lock_path).unwrap_or(false)
    }

    async fn finish(mut self) {
        self.conn.close();
        if !self.conn.wait_exit(Duration::from_secs(3)).await {
            self.kill_leftovers(false).await;
        }
        self.broker.unmirror(&self.scope, &self.slots).await;
        self.broker
            .drivers
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.broker.notify_settled(self.child);
    }
}
