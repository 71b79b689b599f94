//! Starting a child's worker: its scratch and slots, its supervised process, and the
//! `start_run` message of its first run.

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;

use secrecy::ExposeSecret;
use subzero_core::{ChildId, ErrorCode, Limits, RunId};
use subzero_protocol::{self as p, BrokerMessage};
use tokio::sync::mpsc;

use crate::broker::live::{ModelKey, ToWorker, WorkerLink, label};
use crate::broker::wire::{broken, positive, wire};
use crate::broker::{Broker, BrokerError};
use crate::locks::{ChildLock, SlotGuard, SlotKind};
use crate::scope::WorkspaceScope;
use crate::secret_env::SecretEnv;
use crate::store::WorkerInfo;
use crate::supervisor::{Hello, WorkerConn};

use super::driver::Driver;
use super::phase::Phase;
use super::reserve::SpaceReserve;

/// Where a run starts in the transcript.
#[derive(Clone, Debug, Default)]
pub(in crate::broker) struct StartFrom {
    /// Leaf id and digest to branch from; `None` continues a new or current transcript.
    pub leaf: Option<(String, String)>,
    /// Appended before the prompt after an interruption.
    pub recovery_notice: Option<String>,
}

/// A run to start on a fresh worker.
#[derive(Debug)]
pub(in crate::broker) struct FirstRun {
    pub run: RunId,
    pub prompt: String,
    pub from: StartFrom,
}

impl Broker {
    /// Start a worker for `child` holding `child_lock` and `slots`, and give it `first`.
    /// On failure the run is settled as failed, so nothing is left `running`.
    pub(in crate::broker) async fn start_worker(
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

    async fn try_start_worker(
        self: &Arc<Self>,
        child: ChildId,
        scope: &WorkspaceScope,
        child_lock: ChildLock,
        slots: Vec<SlotGuard>,
        first: FirstRun,
    ) -> Result<(), BrokerError> {
        let token = self.owner_token().to_owned();
        self.take_workdir(child).await?;
        // The space a settlement needs on a full disk, set aside while there is room.
        let reserve = SpaceReserve::of(self.paths.root());
        if let Err(e) = tokio::task::spawn_blocking(move || reserve.ensure()).await {
            tracing::warn!(%e, "checking the space reserve panicked");
        }
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
        let (conn, hello) = match self.launch_worker(child, scope, inherit).await {
            Ok(started) => started,
            Err(e) => {
                self.unmirror(scope, &held).await;
                return Err(e);
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
        // Mint point: `hello` is this worker's first control line, parsed and validated by
        // `WorkerConn::start` just above; `steering` is what the worker advertised in it.
        let capabilities = self.supervisor.capabilities(hello.steering);
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut live = self.workers.live();
            let entry = live.get_mut(&child).ok_or_else(|| {
                BrokerError::internal(format!("child {child} has no model in memory"))
            })?;
            entry.worker = Some(WorkerLink {
                tx: tx.clone(),
                capabilities,
                process: hello.process.clone(),
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
            phase: Phase::Idle { closing: false },
        };
        // Queue the first run before the driver runs, so it is the first thing it sends.
        let _ = tx.send(ToWorker::Start {
            run: first.run,
            prompt: first.prompt,
        });
        self.workers.driver_started();
        tokio::spawn(driver.run(first.from));
        Ok(())
    }

    /// `child`'s worker started with the descriptors it inherits, and its hello.
    async fn launch_worker(
        &self,
        child: ChildId,
        scope: &WorkspaceScope,
        inherit: Vec<std::os::fd::OwnedFd>,
    ) -> Result<(WorkerConn, Hello), BrokerError> {
        let workdir = self.workdir(child, scope);
        let engine = self.child_engine(child, &workdir).await?;
        let launch = self.workers.launch(inherit, &workdir, engine);
        WorkerConn::start(&self.workers.spawner, launch, label(child))
            .await
            .map_err(|e| {
                BrokerError::new(
                    ErrorCode::WorkerIncompatible,
                    format!("the worker could not be started: {e}; run `subzero doctor`"),
                )
            })
    }

    /// The worker arguments of `child`'s worker (from the grant this broker holds for it).
    async fn child_engine(
        &self,
        child: ChildId,
        workdir: &std::path::Path,
    ) -> Result<Vec<std::ffi::OsString>, BrokerError> {
        let snapshot = self
            .workers
            .live()
            .get(&child)
            .map(|entry| entry.snapshot.clone())
            .ok_or_else(|| {
                BrokerError::internal(format!("child {child} has no grant in memory"))
            })?;
        self.engine_for(child, &snapshot, workdir).await
    }

    /// An isolated child's runs work in its checkout, which this run now uses.
    async fn take_workdir(&self, child: ChildId) -> Result<(), BrokerError> {
        let workdir = self.workdir_for_run(child).await?;
        if let Some(entry) = self.workers.live().get_mut(&child) {
            entry.setup_pending = workdir.as_ref().is_some_and(|w| w.first_run);
            entry.workdir = workdir.map(|w| w.path);
        }
        Ok(())
    }

    /// Where `child`'s runs work: its checkout, else the workspace.
    fn workdir(&self, child: ChildId, scope: &WorkspaceScope) -> PathBuf {
        self.workers
            .live()
            .get(&child)
            .and_then(|entry| entry.workdir.clone())
            .unwrap_or_else(|| scope.root().to_path_buf())
    }

    pub(super) async fn unmirror(&self, scope: &WorkspaceScope, held: &[(SlotKind, u32)]) {
        for (kind, index) in held {
            if let Err(e) = self.store.unmirror_slot(scope, *kind, *index).await {
                tracing::warn!(%e, "could not clear a slot mirror");
            }
        }
    }

    pub(in crate::broker) fn transcript_path(&self, child: ChildId) -> PathBuf {
        self.paths
            .root()
            .join("transcripts")
            .join(format!("{child}.jsonl"))
    }

    /// Marks `run` of `child` to start with a compaction (the parent's `compact: true`);
    /// its `start_run` carries it, whenever the run starts.
    pub(in crate::broker) fn compact_before(&self, child: ChildId, run: RunId) {
        if let Some(entry) = self.workers.live().get_mut(&child) {
            entry.compact.insert(run);
        }
    }

    pub(super) fn start_run_message(
        &self,
        child: ChildId,
        scope: &WorkspaceScope,
        run: RunId,
        prompt: &str,
        from: &StartFrom,
    ) -> Result<BrokerMessage, BrokerError> {
        let (model, snapshot) = {
            let live = self.workers.live();
            let entry = live.get(&child).ok_or_else(|| {
                BrokerError::new(
                    ErrorCode::CredentialsRequired,
                    format!("child {child} has no credentials in this broker; call subzero_resume with a model first"),
                )
            })?;
            (entry.model.clone(), entry.snapshot.clone())
        };
        let (compact, setup) =
            self.workers
                .live()
                .get_mut(&child)
                .map_or((false, false), |entry| {
                    let setup = std::mem::take(&mut entry.setup_pending);
                    (entry.compact.remove(&run), setup)
                });
        let setup = setup && snapshot.setup.is_some();
        let mcp_env = mcp_env(&snapshot, &self.policy.secrets)?;
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
        Ok(BrokerMessage::StartRun {
            child_id: child.into(),
            compact: compact.then_some(true),
            expected_digest,
            from_leaf,
            mcp_env,
            model: worker_model(&model)?,
            prompt: wire(prompt, START_RUN, "prompt")?,
            recovery_notice: from
                .recovery_notice
                .as_deref()
                .map(|notice| wire(notice, START_RUN, "recoveryNotice"))
                .transpose()?,
            run_id: run.into(),
            secrets: p::StartRunSecrets(Vec::new()),
            setup: setup.then_some(true),
            snapshot,
            stream_limits: Some(stream_limits(&self.policy.limits)?),
            transcript_path: wire(
                self.transcript_path(child).to_string_lossy().into_owned(),
                START_RUN,
                "transcriptPath",
            )?,
            workspace_root: wire(
                self.workdir(child, scope).to_string_lossy().into_owned(),
                START_RUN,
                "workspaceRoot",
            )?,
        })
    }
}

/// The `start_run` control message, as error messages name it.
const START_RUN: &str = "start_run message";

/// The model a run calls, with its key, as `start_run` carries it.
fn worker_model(model: &ModelKey) -> Result<p::WorkerModel, BrokerError> {
    Ok(p::WorkerModel {
        api: model.api,
        key: p::ApiKey::new(model.key.expose_secret())
            .map_err(|e| broken(START_RUN, "model.key", e.message()))?,
        model: wire(model.model.as_str(), START_RUN, "model.model")?,
        output_tokens_param: model.output_tokens_param,
        context_window: model
            .context_window
            .map(|w| p::ContextWindow::from(i64::from(w))),
        url: wire(model.url.as_str(), START_RUN, "model.url")?,
    })
}

/// The bounds on a run's model stream, from the broker's limits.
fn stream_limits(limits: &Limits) -> Result<p::StreamLimits, BrokerError> {
    let limit = |value: u32, field: &str| positive(value, START_RUN, field);
    Ok(p::StreamLimits {
        idle_timeout_ms: limit(limits.model_idle_timeout_ms, "streamLimits.idleTimeoutMs")?,
        max_response_bytes: limit(limits.model_response_bytes, "streamLimits.maxResponseBytes")?,
        max_tool_argument_bytes: limit(
            limits.tool_argument_bytes,
            "streamLimits.maxToolArgumentBytes",
        )?,
    })
}

/// Values of the snapshot's MCP `env:VAR` references, from the secrets the broker captured
/// from its environment at startup (the worker's environment is cleared). Each value
/// travels only inside `start_run` and is redacted by the worker like the key. A reference
/// to a variable that was not captured is `credentials_required`, naming the server and
/// the variable.
pub(in crate::broker) fn mcp_env(
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
