//! Making a spawn's checkout: before anything is stored (a workspace that cannot have one
//! is refused with nothing changed), then entered in the ledger with the child.

use std::path::PathBuf;

use subzero_core::ChildId;
use subzero_core::lifecycle::checkout::Prepared;
use subzero_core::lifecycle::{Checkout, CheckoutDecided, CheckoutSite};

use subzero_protocol as p;

use super::{base_ref, blocking, change_ref, core_oid, create_private_dir, wire_oid};
use crate::broker::{Broker, BrokerError};
use crate::checkout::{self, Base, PrepareRequest};
use crate::scope::WorkspaceScope;
use crate::store::{Admission, Admit, AdmitSpawn};

/// A checkout made for a spawn, not yet in the ledger.
#[derive(Debug)]
pub(in crate::broker) struct PreparedCheckout {
    decided: CheckoutDecided<Prepared>,
    path: PathBuf,
    size: u64,
}

impl PreparedCheckout {
    /// The checkout as the spawn's answer shows it: its first run is starting in it.
    pub(in crate::broker) fn view(&self) -> Result<p::Checkout, BrokerError> {
        let site = self.decided.checkout().site();
        Ok(p::Checkout {
            base_commit: wire_oid(&site.base)?,
            carried: site.carried,
            change: None,
            dirty: site.dirty,
            path: self.path.to_string_lossy().into_owned(),
            state: p::CheckoutState::InUse,
            workspace_head: wire_oid(&site.workspace_head)?,
        })
    }
}

impl Broker {
    /// Make `child`'s checkout of `scope`'s repository from `base` (a revision), or from
    /// HEAD with the workspace's uncommitted changes carried. Nothing is stored yet.
    pub(in crate::broker) async fn prepare_checkout(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        base: Option<String>,
    ) -> Result<PreparedCheckout, BrokerError> {
        let path = self.isolation.path(child);
        if let Some(parent) = path.parent() {
            create_private_dir(parent)?;
        }
        let workspace = scope.root().to_path_buf();
        let (include, share) = (self.isolation.include.clone(), self.isolation.share.clone());
        let target = path.clone();
        let (prepared, size) = blocking(move || {
            checkout::probe(&workspace)?;
            let prepared = checkout::prepare(&PrepareRequest {
                workspace: &workspace,
                checkout: &target,
                base: base.map_or(Base::WorkingTree, Base::Revision),
                base_ref: &base_ref(child),
                include: &include,
                shared: &share,
            })?;
            let size = checkout::disk_usage(&target).unwrap_or(0);
            Ok((prepared, size))
        })
        .await?;
        self.isolation.keep_own_paths(child, &prepared.own_paths)?;
        let site = CheckoutSite {
            path: path.clone(),
            base: core_oid(&prepared.base)?,
            workspace_head: core_oid(&prepared.head)?,
            dirty: prepared.dirty,
            carried: prepared.carried,
        };
        Ok(PreparedCheckout {
            decided: Checkout::prepare(child, site),
            path,
            size,
        })
    }

    /// Admit `child`'s spawn with its prepared checkout in the ledger, in one
    /// transaction; a checkout of a spawn that was refused or replayed is removed, as
    /// nothing refers to it.
    pub(in crate::broker) async fn admit_isolated(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        admission: AdmitSpawn,
        prepared: PreparedCheckout,
    ) -> Result<Admit<Admission>, BrokerError> {
        let PreparedCheckout {
            decided,
            path,
            size,
        } = prepared;
        let admitted = self
            .store
            .admit_isolated_spawn(admission, decided, size)
            .await;
        if !matches!(admitted, Ok(Admit::New(_))) {
            self.drop_prepared(scope, child, path).await;
        }
        Ok(admitted?)
    }

    /// Remove a checkout whose spawn was refused after it was made: nothing refers to it.
    pub(in crate::broker) async fn drop_prepared(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
        path: PathBuf,
    ) {
        let workspace = scope.root().to_path_buf();
        let removed = blocking(move || {
            checkout::remove(
                &workspace,
                &path,
                &[base_ref(child).as_str(), change_ref(child).as_str()],
            )
        })
        .await;
        if let Err(e) = removed {
            tracing::warn!(%child, error = %e.message(), "could not remove the checkout of a refused spawn");
        }
        self.isolation.forget(child);
    }
}
