//! The Pi SDK worker: `subzero-worker worker --engine pi` as the init that confines Node
//! running `workers/pi`. Where it is installed is found on disk (and looked up again after a
//! failure, so `npm ci` while the broker runs is enough); a child's worker is told its grant,
//! transcript and workspace.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;
use subzero_core::template::WorkerKind;
use subzero_protocol as p;

use super::{ChildWorker, Engine};
use crate::broker::checkpoint::Format;
use crate::config::PiWorkerConfig;
use crate::workers::{INSTALL_HINT, PiInstall, installed_bytes, locate_pi};

/// The Pi worker engine.
#[derive(Debug)]
pub(super) struct PiEngine {
    pub(super) config: PiWorkerConfig,
    /// `subzero-worker`, its init (its directory also guides the search for `workers/pi`).
    pub(super) exe: PathBuf,
    /// Where it was last found.
    pub(super) found: Mutex<Option<PiInstall>>,
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

impl PiEngine {
    fn found(&self) -> Option<PiInstall> {
        self.found
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Engine for PiEngine {
    fn kind(&self) -> WorkerKind {
        WorkerKind::Pi
    }

    fn wire_name(&self) -> p::WorkerName {
        p::WorkerName::Pi
    }

    fn locate(&self) -> Result<Vec<OsString>, String> {
        let install = locate_pi(&self.config, &self.exe)
            .map_err(|why| format!("worker_incompatible: {why}"))?;
        let args = install.engine_args();
        *self.found.lock().unwrap_or_else(PoisonError::into_inner) = Some(install);
        Ok(args)
    }

    fn handshake_label(&self) -> &'static str {
        "handshake-pi"
    }

    fn start_failed(&self, error: &str) -> String {
        let (dir, node) = self.found().map_or_else(
            || ("?".to_owned(), "?".to_owned()),
            |i| (i.dir.display().to_string(), i.node.display().to_string()),
        );
        format!(
            "worker_incompatible: the Pi worker ({dir}, Node {node}) could not be started: {error}; {INSTALL_HINT}"
        )
    }

    fn child_args(
        &self,
        mut base: Vec<OsString>,
        child: ChildWorker<'_>,
    ) -> Result<Vec<OsString>, String> {
        let snapshot = child.snapshot;
        let grant = serde_json::to_string(&PiGrant {
            tools: &snapshot.tools,
            write_capable: snapshot.write_capable,
            filesystem: snapshot.filesystem.as_ref(),
            tool_limits: snapshot.tool_limits.as_ref(),
        })
        .map_err(|e| format!("cannot encode the Pi worker's grant: {e}"))?;
        if let Some(dir) = child.transcript.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        base.extend([
            "--pi-grant".into(),
            grant.into(),
            "--pi-transcript".into(),
            child.transcript.into(),
            "--pi-workspace".into(),
            child.workspace.into(),
        ]);
        Ok(base)
    }

    fn installed_bytes(&self) -> Option<u64> {
        self.found().map(|i| installed_bytes(&i.dir))
    }

    fn transcript_format(&self) -> Format {
        Format::Pi
    }

    fn reports_own_containment(&self) -> bool {
        true
    }
}
