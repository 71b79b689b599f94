//! The worker implementations behind the control protocol: which one a child runs on (its
//! snapshot's `worker`), each one's hello (learned once), what it can run, how it is started,
//! and what `subzero_info` says of each.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::time::Duration;

use serde::Serialize;
use subzero_core::template::WorkerKind;
use subzero_core::{ChildId, ErrorCode};
use subzero_protocol as p;

use super::live::ModelKey;
use super::{Broker, BrokerError};
use crate::supervisor::{Hello, WorkerConn};
use crate::workers::{PiInstall, installed_bytes, locate_pi};

/// The worker a wire snapshot names (absent: the Rust worker).
pub(super) fn worker_of(snapshot: &p::GrantSnapshot) -> WorkerKind {
    match snapshot.worker {
        Some(p::WorkerName::Pi) => WorkerKind::Pi,
        Some(p::WorkerName::Rust) | None => WorkerKind::Rust,
    }
}

/// What the Pi worker's jail needs of a grant (`--pi-grant`): nothing secret.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PiGrant<'a> {
    tools: &'a p::GrantSnapshotTools,
    write_capable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    filesystem: Option<&'a p::FilesystemGrant>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_limits: Option<&'a p::ToolLimits>,
}

/// A grant the worker's hello says it cannot run, with the message `unsupported_grant` gives.
pub(super) struct Asked<'a> {
    pub tools: Vec<String>,
    pub mcp_servers: usize,
    pub compact: bool,
    pub model: &'a ModelKey,
}

impl Broker {
    /// Where the Pi worker is installed, found once (a failure is looked up again next time,
    /// so `npm ci` while the broker runs is enough).
    pub(super) async fn pi_install(&self) -> Result<PiInstall, BrokerError> {
        let install = self
            .pi_install
            .get_or_try_init(|| async {
                let config = self.pi_config.clone();
                let exe = self.worker_exe.clone();
                tokio::task::spawn_blocking(move || locate_pi(&config, &exe))
                    .await
                    .map_err(|e| format!("locating the Pi worker panicked: {e}"))?
            })
            .await
            .map_err(|why| {
                BrokerError::new(
                    ErrorCode::WorkerIncompatible,
                    format!("worker_incompatible: {why}"),
                )
            })?;
        Ok(install.clone())
    }

    /// The hello of `kind`, learned once by starting a worker of it that runs nothing.
    pub(super) async fn hello_for(&self, kind: WorkerKind) -> Result<Hello, BrokerError> {
        if kind == WorkerKind::Rust {
            return self.hello().await;
        }
        let install = self.pi_install().await?;
        let hello = self
            .pi_hello
            .get_or_try_init(|| async {
                let launch = self.launch(Vec::new(), self.scope.root(), install.engine_args());
                let (mut conn, hello) = WorkerConn::start(&self.spawner, launch, "handshake-pi".into())
                    .await
                    .map_err(|e| {
                        BrokerError::new(
                            ErrorCode::WorkerIncompatible,
                            format!(
                                "worker_incompatible: the Pi worker ({}, Node {}) could not be started: {e}; {}",
                                install.dir.display(),
                                install.node.display(),
                                crate::workers::INSTALL_HINT
                            ),
                        )
                    })?;
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
            return Err(BrokerError::new(
                ErrorCode::WorkerIncompatible,
                format!(
                    "the {kind} worker does not speak api `{api}`; it speaks {}",
                    hello.protocols.join(", ")
                ),
            ));
        }
        let Some(can) = &hello.capabilities else {
            return Ok(hello);
        };
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
        Ok(hello)
    }

    /// The worker arguments that start `snapshot`'s worker for `child` (none for Rust).
    pub(super) async fn engine_for(
        &self,
        child: ChildId,
        snapshot: &p::GrantSnapshot,
        workspace: &std::path::Path,
    ) -> Result<Vec<OsString>, BrokerError> {
        if worker_of(snapshot) == WorkerKind::Rust {
            return Ok(Vec::new());
        }
        let install = self.pi_install().await?;
        let grant = serde_json::to_string(&PiGrant {
            tools: &snapshot.tools,
            write_capable: snapshot.write_capable,
            filesystem: snapshot.filesystem.as_ref(),
            tool_limits: snapshot.tool_limits.as_ref(),
        })
        .map_err(|e| BrokerError::internal(format!("cannot encode the Pi worker's grant: {e}")))?;
        let transcript = self.transcript_path(child);
        if let Some(dir) = transcript.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| {
                    BrokerError::internal(format!("cannot create {}: {e}", dir.display()))
                })?;
        }
        let mut args = install.engine_args();
        args.extend([
            "--pi-grant".into(),
            grant.into(),
            "--pi-transcript".into(),
            transcript.into(),
            "--pi-workspace".into(),
            workspace.into(),
        ]);
        Ok(args)
    }

    /// `subzero_info.workers`: each worker, installed or why not, with its footprint.
    pub(super) async fn info_workers(&self) -> Vec<p::WorkerAvailability> {
        let mut all = Vec::new();
        for kind in WorkerKind::ALL {
            let bytes = match kind {
                WorkerKind::Rust => Some(installed_bytes(&self.worker_exe)),
                WorkerKind::Pi => self
                    .pi_install()
                    .await
                    .ok()
                    .map(|i| installed_bytes(&i.dir)),
            };
            all.push(match self.hello_for(kind).await {
                Ok(hello) => availability(kind, Some(&hello), bytes, None),
                Err(e) => availability(kind, None, bytes, Some(e.message())),
            });
        }
        all
    }
}

fn availability(
    kind: WorkerKind,
    hello: Option<&Hello>,
    installed_bytes: Option<u64>,
    problem: Option<&str>,
) -> p::WorkerAvailability {
    let name = match kind {
        WorkerKind::Rust => p::WorkerName::Rust,
        WorkerKind::Pi => p::WorkerName::Pi,
    };
    p::WorkerAvailability {
        name,
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
        // The Rust worker's receipts are `enforcement.containment`.
        containment: hello
            .filter(|_| kind != WorkerKind::Rust)
            .map(super::containment::support_of),
        installed_bytes,
        problem: problem.and_then(|why| why.chars().take(1024).collect::<String>().parse().ok()),
    }
}
