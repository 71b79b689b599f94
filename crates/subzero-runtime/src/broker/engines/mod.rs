//! The workers a child can run on, as a registry: `WorkerKind → Engine`. The Rust worker and
//! the Pi worker are two entries ([`rust`], [`pi`]); everything that differs between them —
//! where each is installed, what its start needs, how a child's worker is told its grant, how
//! its transcript is read, what `subzero_info` reports — is a method of its engine. The
//! registry learns each engine's hello once, by starting a worker of it that runs nothing,
//! and refuses before anything is written what a child's worker cannot run.

mod pi;
mod rust;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use subzero_core::template::WorkerKind;
use subzero_core::{ChildId, ErrorCode};
use subzero_protocol as p;
use tokio::sync::OnceCell;

use super::checkpoint::Format;
use super::live::ModelKey;
use super::{Broker, BrokerError};
use crate::config::PiWorkerConfig;
use crate::supervisor::{Hello, WorkerConn};

/// One worker implementation behind the control protocol.
pub(super) trait Engine: Send + Sync + std::fmt::Debug {
    /// Its kind (a template's `worker`).
    fn kind(&self) -> WorkerKind;
    /// Its name on the wire.
    fn wire_name(&self) -> p::WorkerName;
    /// The worker arguments that start it, found on disk (blocking); or why it cannot run
    /// here and how to fix that.
    fn locate(&self) -> Result<Vec<OsString>, String>;
    /// The label of its handshake worker in logs.
    fn handshake_label(&self) -> &'static str;
    /// What to tell the caller when its located worker could not be started.
    fn start_failed(&self, error: &str) -> String;
    /// The arguments a child's worker adds to `base` (what [`Engine::locate`] found).
    fn child_args(
        &self,
        base: Vec<OsString>,
        child: ChildWorker<'_>,
    ) -> Result<Vec<OsString>, String>;
    /// Bytes it has on disk, once located.
    fn installed_bytes(&self) -> Option<u64>;
    /// How a child's transcript is read to verify a checkpoint.
    fn transcript_format(&self) -> Format;
    /// Whether `subzero_info.workers[].containment` carries its own receipts.
    fn reports_own_containment(&self) -> bool;
}

/// What a child's worker is started for.
#[derive(Clone, Copy, Debug)]
pub(super) struct ChildWorker<'a> {
    pub snapshot: &'a p::GrantSnapshot,
    pub transcript: &'a Path,
    pub workspace: &'a Path,
}

/// One engine with what the broker learned of it.
#[derive(Debug)]
struct Entry {
    engine: Arc<dyn Engine>,
    /// Its start arguments, found once (a failure is looked up again next time).
    base: OnceCell<Vec<OsString>>,
    /// Its hello, learned once.
    hello: OnceCell<Hello>,
}

/// The registry: every engine a template may name.
#[derive(Debug)]
pub(super) struct Engines {
    entries: Vec<Entry>,
}

impl Engines {
    /// The Rust worker at `worker_exe` and the Pi worker `[workers.pi]` names (or finds).
    pub(super) fn new(pi: &PiWorkerConfig, worker_exe: &Path) -> Engines {
        let engines: [Arc<dyn Engine>; 2] = [
            Arc::new(rust::RustEngine {
                exe: worker_exe.to_path_buf(),
            }),
            Arc::new(pi::PiEngine {
                config: pi.clone(),
                exe: PathBuf::from(worker_exe),
                found: Mutex::new(None),
            }),
        ];
        Engines {
            entries: engines
                .into_iter()
                .map(|engine| Entry {
                    engine,
                    base: OnceCell::new(),
                    hello: OnceCell::new(),
                })
                .collect(),
        }
    }

    fn entry(&self, kind: WorkerKind) -> Result<&Entry, BrokerError> {
        self.entries
            .iter()
            .find(|e| e.engine.kind() == kind)
            .ok_or_else(|| BrokerError::internal(format!("no engine for the {kind} worker")))
    }

    /// The `worker` a template of `kind` shows in `subzero_info` (absent for the default).
    pub(super) fn template_worker(&self, kind: WorkerKind) -> Option<p::WorkerName> {
        let entry = self.entry(kind).ok()?;
        (kind != WorkerKind::default()).then(|| entry.engine.wire_name())
    }

    /// How a child of `kind` keeps its transcript.
    pub(super) fn transcript_format(&self, kind: WorkerKind) -> Result<Format, BrokerError> {
        Ok(self.entry(kind)?.engine.transcript_format())
    }
}

/// The worker a wire snapshot names (absent: the Rust worker).
pub(super) fn worker_of(snapshot: &p::GrantSnapshot) -> WorkerKind {
    snapshot.worker.map_or(WorkerKind::Rust, |name| {
        WorkerKind::parse(&name.to_string()).unwrap_or_default()
    })
}

/// A grant the worker's hello says it cannot run, with the message `unsupported_grant` gives.
pub(super) struct Asked<'a> {
    pub tools: Vec<String>,
    pub mcp_servers: usize,
    pub compact: bool,
    pub model: &'a ModelKey,
}

fn incompatible(why: impl Into<String>) -> BrokerError {
    BrokerError::new(ErrorCode::WorkerIncompatible, why.into())
}

impl Broker {
    /// The start arguments of `kind`'s engine, found once.
    async fn base_args(&self, kind: WorkerKind) -> Result<Vec<OsString>, BrokerError> {
        let entry = self.workers.engines.entry(kind)?;
        let base = entry
            .base
            .get_or_try_init(|| async {
                let engine = Arc::clone(&entry.engine);
                tokio::task::spawn_blocking(move || engine.locate())
                    .await
                    .map_err(|e| format!("locating the {kind} worker panicked: {e}"))?
            })
            .await
            .map_err(incompatible)?;
        Ok(base.clone())
    }

    /// The hello of the worker a snapshot runs on (none when it cannot be had).
    pub(super) async fn hello_of(&self, snapshot: &p::GrantSnapshot) -> Option<Hello> {
        self.hello_for(worker_of(snapshot)).await.ok()
    }

    /// The hello of `kind`, learned once by starting a worker of it that runs nothing.
    pub(super) async fn hello_for(&self, kind: WorkerKind) -> Result<Hello, BrokerError> {
        let entry = self.workers.engines.entry(kind)?;
        let hello = entry
            .hello
            .get_or_try_init(|| async {
                let base = self.base_args(kind).await?;
                let launch = self
                    .workers
                    .launch(Vec::new(), self.scopes.own.root(), base);
                let label = entry.engine.handshake_label().to_owned();
                let (mut conn, hello) = WorkerConn::start(&self.workers.spawner, launch, label)
                    .await
                    .map_err(|e| incompatible(entry.engine.start_failed(&e.to_string())))?;
                conn.close();
                conn.wait_exit(Duration::from_secs(2)).await;
                Ok::<_, BrokerError>(hello)
            })
            .await?;
        Ok(hello.clone())
    }

    /// Refuses, before anything is written, what the child's worker cannot run: it is not
    /// installed (`worker_incompatible`, naming the fix), it does not speak the api
    /// (`worker_incompatible`), or its hello says it cannot run a granted tool, the MCP
    /// servers or a compaction (`unsupported_grant`).
    pub(super) async fn check_worker(
        &self,
        kind: WorkerKind,
        asked: Asked<'_>,
    ) -> Result<Hello, BrokerError> {
        let hello = self.hello_for(kind).await?;
        let api = asked.model.api.to_string();
        if !hello.protocols.contains(&api) {
            return Err(incompatible(format!(
                "the {kind} worker does not speak api `{api}`; it speaks {}",
                hello.protocols.join(", ")
            )));
        }
        match &hello.capabilities {
            Some(can) => refuse_unsupported(kind, can, &asked).map(|()| hello),
            None => Ok(hello),
        }
    }

    /// The worker arguments that start `snapshot`'s worker for `child`.
    pub(super) async fn engine_for(
        &self,
        child: ChildId,
        snapshot: &p::GrantSnapshot,
        workspace: &Path,
    ) -> Result<Vec<OsString>, BrokerError> {
        let kind = worker_of(snapshot);
        let base = self.base_args(kind).await?;
        let transcript = self.transcript_path(child);
        let worker = ChildWorker {
            snapshot,
            transcript: &transcript,
            workspace,
        };
        self.workers
            .engines
            .entry(kind)?
            .engine
            .child_args(base, worker)
            .map_err(BrokerError::internal)
    }

    /// `subzero_info.workers`: each worker, installed or why not, with its footprint.
    pub(super) async fn info_workers(&self) -> Vec<p::WorkerAvailability> {
        let mut all = Vec::new();
        for entry in &self.workers.engines.entries {
            let engine = &entry.engine;
            let hello = self.hello_for(engine.kind()).await;
            let bytes = engine.installed_bytes();
            all.push(match hello {
                Ok(hello) => availability(engine.as_ref(), Some(&hello), bytes, None),
                Err(e) => availability(engine.as_ref(), None, bytes, Some(e.message())),
            });
        }
        all
    }
}

/// `unsupported_grant` for a granted tool, MCP servers or a compaction the worker's
/// capabilities do not offer.
fn refuse_unsupported(
    kind: WorkerKind,
    can: &p::WorkerCapabilities,
    asked: &Asked<'_>,
) -> Result<(), BrokerError> {
    let refuse = |what: String| {
        Err(BrokerError::new(
            ErrorCode::UnsupportedGrant,
            format!("unsupported_grant: {what}; nothing was started"),
        ))
    };
    if let Some(tool) = asked
        .tools
        .iter()
        .find(|t| !can.tools.iter().any(|c| c.to_string() == **t))
    {
        let why = if tool == "bash" {
            "its bash needs Landlock (a nested Landlock domain keeps commands from reading Node's memory, which holds the key)"
        } else {
            "it does not offer that tool here"
        };
        return refuse(format!(
            "the {kind} worker cannot run the granted tool `{tool}`: {why}; use worker = \"rust\" for this template"
        ));
    }
    if asked.mcp_servers > 0 && !can.mcp_servers {
        return refuse(format!(
            "the {kind} worker does not run MCP servers; use worker = \"rust\" for a template with mcp_servers"
        ));
    }
    if asked.compact && !can.compaction {
        return refuse(format!(
            "the {kind} worker does not compact a transcript; send without compact (an overflowing run ends context_exhausted)"
        ));
    }
    Ok(())
}

fn availability(
    engine: &dyn Engine,
    hello: Option<&Hello>,
    installed_bytes: Option<u64>,
    problem: Option<&str>,
) -> p::WorkerAvailability {
    p::WorkerAvailability {
        name: engine.wire_name(),
        installed: hello.is_some(),
        version: hello.and_then(|h| h.version.parse().ok()),
        protocols: hello.map(|h| {
            p::WorkerAvailabilityProtocols(
                h.protocols.iter().filter_map(|a| a.parse().ok()).collect(),
            )
        }),
        steering: hello.map(|h| h.steering),
        transcript_version: hello.and_then(|h| std::num::NonZeroU64::new(h.transcript_version)),
        capabilities: hello.and_then(|h| h.capabilities.clone()),
        containment: hello
            .filter(|_| engine.reports_own_containment())
            .map(super::containment::support_of),
        installed_bytes,
        problem: problem.and_then(|why| why.chars().take(1024).collect::<String>().parse().ok()),
    }
}
