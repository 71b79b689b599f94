//! A checkout and its child's runs: each run works in it (`in_use`), and once no worker of
//! the child runs, what the checkout holds is recorded as the child's change.

use std::path::PathBuf;

use subzero_core::lifecycle::{AnyCheckout, DiffStats, GitOid};
use subzero_core::{CheckoutState, ChildId, ErrorCode};
use subzero_protocol as p;

use super::{blocking, change_ref, core_oid, engine_oid, wire_oid};
use crate::broker::wire::wire;
use crate::broker::{Broker, BrokerError};
use crate::checkout::{self, RecordRequest, Recorded};
use crate::scope::WorkspaceScope;

/// Where an isolated child's run works.
pub(in crate::broker) struct Workdir {
    pub path: PathBuf,
    /// No run has used the checkout yet: the template's setup runs first.
    pub first_run: bool,
}

/// The most of a change's diff kept as its artifact.
const DIFF_ARTIFACT_BYTES: u64 = 16 << 20;

impl Broker {
    /// Where `child`'s next run works: its checkout (now `in_use`), or `None` for a child
    /// that works in the workspace. A checkout whose change was applied or discarded has
    /// no more runs.
    pub(in crate::broker) async fn workdir_for_run(
        &self,
        child: ChildId,
    ) -> Result<Option<Workdir>, BrokerError> {
        let Some(checkout) = self.store.checkout(child).await? else {
            return Ok(None);
        };
        let path = checkout.record().site.path;
        let state = checkout.state();
        match state {
            CheckoutState::InUse => {}
            CheckoutState::Prepared
            | CheckoutState::SettledChanged
            | CheckoutState::SettledUnchanged => {
                let decided = checkout
                    .start_run()
                    .map_err(|(_, e)| BrokerError::from(e))?;
                self.store.write_checkout(decided).await?;
            }
            done => {
                return Err(BrokerError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "child {child}'s checkout is {done}: its work is over; spawn a new child for more"
                    ),
                ));
            }
        }
        Ok(Some(Workdir {
            path,
            first_run: state == CheckoutState::Prepared,
        }))
    }

    /// Whether a run of `child` writes the workspace itself (and so takes its writer slot):
    /// write-capable and not isolated.
    pub(in crate::broker) async fn writes_workspace(
        &self,
        child: ChildId,
        write_capable: bool,
    ) -> Result<bool, BrokerError> {
        Ok(write_capable && self.store.checkout_row(child).await?.is_none())
    }

    /// Record what `child`'s checkout holds, when it is `in_use` and no worker of the child
    /// runs (the caller knows): a commit on its base and a diff artifact, or no change.
    pub(in crate::broker) async fn settle_checkout(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
    ) -> Result<(), BrokerError> {
        let Some(checkout) = self.store.checkout(child).await? else {
            return Ok(());
        };
        if checkout.state() != CheckoutState::InUse {
            return Ok(());
        }
        let site = checkout.record().site;
        let base = site.base.clone();
        let (workspace, path) = (scope.root().to_path_buf(), site.path.clone());
        let own = self.isolation.own_paths(child);
        let engine_base = engine_oid(&base)?;
        let (recorded, size) = blocking(move || {
            let recorded = checkout::record(&RecordRequest {
                workspace: &workspace,
                checkout: &path,
                base: &engine_base,
                child_ref: &change_ref(child),
                child: &child.to_string(),
                own_paths: &own,
            })?;
            Ok((recorded, checkout::disk_usage(&path).unwrap_or(0)))
        })
        .await?;
        match recorded {
            Recorded::Unchanged => {
                // Evidence: the engine compared the checkout's files with `base` just now.
                let proof = self.supervisor.no_change_recorded(child, base);
                let decided = checkout
                    .settle_unchanged(proof)
                    .map_err(|(_, e)| BrokerError::from(e))?;
                self.store.write_checkout(decided).await?;
            }
            Recorded::Changed(change) => {
                let head = core_oid(&change.head)?;
                let stats = DiffStats {
                    files_changed: change.files_changed as u64,
                    insertions: change.insertions,
                    deletions: change.deletions,
                };
                // Evidence: the engine committed the files at `head` and measured them.
                let supervisor = self.supervisor;
                let proof = supervisor.change_recorded(child, base.clone(), head.clone(), stats);
                let decided = checkout
                    .settle(proof)
                    .map_err(|(_, e)| BrokerError::from(e))?;
                self.store.write_checkout(decided).await?;
                self.keep_diff(scope, child, &base, head).await?;
            }
        }
        self.store.measure_checkout(child, size).await?;
        Ok(())
    }

    /// The full diff of `child`'s change `base..head`, as an artifact the snapshot names.
    async fn keep_diff(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        base: &GitOid,
        head: GitOid,
    ) -> Result<(), BrokerError> {
        let (workspace, from, to) = (
            scope.root().to_path_buf(),
            engine_oid(base)?,
            engine_oid(&head)?,
        );
        let text = blocking(move || {
            let mut bytes = Vec::new();
            let mut offset = 0;
            loop {
                let chunk = checkout::diff_chunk(&workspace, &from, &to, offset, 1 << 20)?;
                bytes.extend_from_slice(&chunk.text);
                match chunk.next_offset {
                    Some(next) if next < DIFF_ARTIFACT_BYTES => offset = next,
                    Some(_) => {
                        bytes.extend_from_slice(
                            format!(
                                "\n[diff cut at {DIFF_ARTIFACT_BYTES} of {} bytes]\n",
                                chunk.total_bytes
                            )
                            .as_bytes(),
                        );
                        break;
                    }
                    None => break,
                }
            }
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        })
        .await?;
        let artifact = self.artifacts.write(child, &text)?;
        self.store.note_checkout_diff(child, head, artifact).await?;
        Ok(())
    }

    /// `child`'s checkout as `subzero_get` shows it.
    pub(in crate::broker) async fn checkout_view(
        &self,
        child: ChildId,
    ) -> Result<Option<p::Checkout>, BrokerError> {
        let Some(row) = self.store.checkout_row(child).await? else {
            return Ok(None);
        };
        let record = row.record()?;
        let change = match (&record.change, &row.diff_artifact) {
            (Some(change), Some(artifact)) => Some(p::Change {
                deletions: change.stats.deletions,
                diff_artifact_id: wire(artifact.as_str(), "checkout", "diffArtifactId")?,
                files_changed: change.stats.files_changed,
                head_commit: wire_oid(&change.head)?,
                insertions: change.stats.insertions,
            }),
            _ => None,
        };
        Ok(Some(p::Checkout {
            base_commit: wire_oid(&record.site.base)?,
            carried: record.site.carried,
            change,
            dirty: record.site.dirty,
            path: record.site.path.to_string_lossy().into_owned(),
            state: record.state.into(),
            workspace_head: wire_oid(&record.site.workspace_head)?,
        }))
    }
}

/// Loads a checkout for a decision, or says there is none.
pub(super) fn loaded(
    checkout: Option<AnyCheckout>,
    child: ChildId,
) -> Result<AnyCheckout, BrokerError> {
    checkout.ok_or_else(|| {
        BrokerError::new(
            ErrorCode::ChangeUnavailable,
            format!("child {child} has no isolated checkout (it was spawned with isolation shared): its changes are already in the workspace"),
        )
        .with_detail("state", "shared")
    })
}
