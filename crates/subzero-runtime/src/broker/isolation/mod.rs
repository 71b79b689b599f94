//! Isolated checkouts, as a service of the broker: where they live, what each gets besides
//! the tracked files (`[isolation]`), and the steps that take one through its life —
//! made at spawn (`prepare.rs`), taken by each run and recorded when its child goes idle
//! (`run.rs`), landed in the workspace or thrown away (`land.rs`).
//!
//! The git work is `crate::checkout`'s; the states are the core's
//! ([`subzero_core::lifecycle::checkout`]), written to the store's ledger only as the core
//! decided. The evidence a decision needs — a change committed and measured, a change
//! landed — is minted here, where the git engine has just seen it.

mod land;
mod prepare;
mod run;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use subzero_core::lifecycle::GitOid;
use subzero_core::{ChildId, ErrorCode};
use subzero_protocol as p;

use super::BrokerError;
use crate::checkout::{CheckoutError, Oid};
use crate::config::IsolationConfig;
use crate::paths::StatePaths;

/// Where checkouts live and what each one gets.
#[derive(Debug)]
pub(super) struct Isolation {
    /// The checkouts themselves (`<state>-checkouts/<child>`), outside the state directory
    /// every tool process has hidden.
    dir: PathBuf,
    /// The broker's notes on each checkout (`<state>/checkouts/<child>.own`: the paths
    /// Subzero placed in it), hidden from tools like the rest of the state.
    notes: PathBuf,
    include: Vec<String>,
    share: Vec<String>,
}

impl Isolation {
    pub(super) fn new(paths: &StatePaths, config: &IsolationConfig) -> Isolation {
        Isolation {
            dir: paths.checkouts_dir(),
            notes: paths.root().join("checkouts"),
            include: config.include.clone(),
            share: config.share.clone(),
        }
    }

    /// `child`'s checkout directory.
    pub(super) fn path(&self, child: ChildId) -> PathBuf {
        self.dir.join(child.to_string())
    }

    fn own_paths_file(&self, child: ChildId) -> PathBuf {
        self.notes.join(format!("{child}.own"))
    }

    /// Keep the paths Subzero placed in `child`'s checkout (included copies, shared
    /// links), which a recorded change leaves out: NUL-separated, as bytes.
    fn keep_own_paths(&self, child: ChildId, paths: &[PathBuf]) -> Result<(), BrokerError> {
        create_private_dir(&self.notes)?;
        let mut bytes = Vec::new();
        for path in paths {
            bytes.extend_from_slice(path.as_os_str().as_bytes());
            bytes.push(0);
        }
        let file = self.own_paths_file(child);
        std::fs::write(&file, bytes)
            .map_err(|e| BrokerError::internal(format!("cannot write {}: {e}", file.display())))
    }

    fn own_paths(&self, child: ChildId) -> Vec<PathBuf> {
        let Ok(bytes) = std::fs::read(self.own_paths_file(child)) else {
            return Vec::new();
        };
        bytes
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(p)))
            .collect()
    }

    fn forget(&self, child: ChildId) {
        let _ = std::fs::remove_file(self.own_paths_file(child));
    }
}

/// The ref that keeps `child`'s base commit from being pruned.
fn base_ref(child: ChildId) -> String {
    format!("refs/subzero/base/{child}")
}

/// The ref naming `child`'s recorded change.
fn change_ref(child: ChildId) -> String {
    format!("refs/subzero/children/{child}")
}

fn create_private_dir(dir: &Path) -> Result<(), BrokerError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| BrokerError::internal(format!("cannot create {}: {e}", dir.display())))
}

/// The core's commit id of the engine's.
fn core_oid(oid: &Oid) -> Result<GitOid, BrokerError> {
    GitOid::parse(oid.as_str())
        .map_err(|e| BrokerError::internal(format!("git printed an unusable commit id: {e}")))
}

/// The engine's commit id of the core's.
fn engine_oid(oid: &GitOid) -> Result<Oid, BrokerError> {
    Oid::parse(oid.as_str().as_bytes(), "the ledger").map_err(engine_error)
}

/// The wire's commit id of the core's.
fn wire_oid(oid: &GitOid) -> Result<p::CommitId, BrokerError> {
    super::wire::wire(oid.as_str(), "checkout", "commit")
}

/// The engine's error as the broker answers it: a workspace that cannot have a checkout is
/// `not_isolatable`; a change that cannot land is `change_conflict`, each path in
/// `details.conflicts`.
fn engine_error(err: CheckoutError) -> BrokerError {
    let not_isolatable = err.is_not_isolatable()
        || matches!(
            err,
            CheckoutError::BadRevision { .. } | CheckoutError::Submodule { .. }
        );
    let code = err.code();
    let message = err.to_string();
    let message = message
        .strip_prefix(code)
        .and_then(|m| m.strip_prefix(": "))
        .unwrap_or(&message)
        .to_owned();
    if let CheckoutError::Conflict { paths } = &err {
        let conflicts: Vec<Conflict> = paths
            .iter()
            .map(|c| Conflict {
                path: c.path.to_string_lossy().into_owned(),
                reason: c.reason.as_str(),
            })
            .collect();
        return BrokerError::new(ErrorCode::ChangeConflict, message).with_detail(
            "conflicts",
            serde_json::to_value(conflicts).unwrap_or_default(),
        );
    }
    let code_now = if not_isolatable {
        ErrorCode::NotIsolatable
    } else {
        ErrorCode::Internal
    };
    BrokerError::new(code_now, message).with_detail("git", code)
}

/// One path of a `change_conflict`'s `details.conflicts`.
#[derive(serde::Serialize)]
struct Conflict {
    path: String,
    reason: &'static str,
}

/// Runs git work off the reactor.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CheckoutError> + Send + 'static,
) -> Result<T, BrokerError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| BrokerError::internal(format!("the git work panicked: {e}")))?
        .map_err(engine_error)
}
