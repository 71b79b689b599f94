//! A settled change, landed in the workspace as a whole or thrown away.
//!
//! Both hold the child's lock for their whole length, as a worker of the child does, so no
//! run starts in the checkout meanwhile and of two brokers racing for the same change one
//! lands it and the other finds it applied (`change_unavailable`).

use std::sync::Arc;
use std::time::Duration;

use subzero_core::lifecycle::checkout::Applied;
use subzero_core::lifecycle::{AnyCheckout, CheckoutDecided, GitOid};
use subzero_core::{CheckoutState, ChildId, ErrorCode};
use subzero_protocol as p;

use super::run::loaded;
use super::{base_ref, blocking, change_ref, engine_oid, wire_oid};
use crate::broker::worker::transient;
use crate::broker::{Broker, BrokerError};
use crate::checkout::{self, ApplyMode};
use crate::locks::ChildLock;
use crate::scope::WorkspaceScope;

impl Broker {
    /// Land `child`'s recorded change in `scope`'s workspace: all of it (as uncommitted
    /// edits, or as one commit with `message`) or nothing, `change_conflict` naming each
    /// path in the way. The checkout is removed once the change has landed.
    ///
    /// Once git has landed it, the answer says so whatever the state database says: a
    /// ledger write the store refuses (a full disk) is retried in the background, holding
    /// the child's lock so no second apply of the change starts meanwhile.
    pub(in crate::broker) async fn apply_change(
        self: &Arc<Self>,
        scope: &WorkspaceScope,
        child: ChildId,
        message: Option<String>,
    ) -> Result<p::ApplyOutput, BrokerError> {
        let lock = self.idle_child(scope, child).await?;
        let checkout = loaded(self.store.checkout(child).await?, child)?;
        let Some(change) = checkout
            .record()
            .change
            .filter(|_| checkout.state() == CheckoutState::SettledChanged)
        else {
            return Err(unavailable(child, checkout.state()));
        };
        let site = checkout.record().site;
        let (base, head) = (engine_oid(&site.base)?, engine_oid(&change.head)?);
        let workspace = scope.root().to_path_buf();
        let mode = message.map_or(ApplyMode::Uncommitted, |message| ApplyMode::Commit {
            message,
        });
        let applied = blocking(move || checkout::apply(&workspace, &base, &head, &mode)).await?;
        let output = p::ApplyOutput {
            commit: applied
                .commit
                .map(|c| super::core_oid(&c).and_then(|c| wire_oid(&c)))
                .transpose()?,
            files_changed: change.stats.files_changed,
            state: p::CheckoutState::Applied,
        };
        let decided = self.landing(checkout, child, &change.head)?;
        match self.store.write_checkout(decided).await {
            Ok(_) => self.remove_checkout(scope, child, &[base_ref(child)]).await,
            Err(err) if transient(&err) => {
                tracing::error!(%child, %err, "a landed change is not recorded yet; it is recorded when the store takes writes again");
                let broker = Arc::clone(self);
                let scope = scope.clone();
                tokio::spawn(async move {
                    let _lock = lock;
                    if broker.record_landing_kept(child, &change.head).await {
                        broker
                            .remove_checkout(&scope, child, &[base_ref(child)])
                            .await;
                    }
                });
            }
            Err(err) => return Err(err.into()),
        }
        Ok(output)
    }

    /// The decision that `checkout`'s change (`head`) landed in the workspace just now.
    fn landing(
        &self,
        checkout: AnyCheckout,
        child: ChildId,
        head: &GitOid,
    ) -> Result<CheckoutDecided<Applied>, BrokerError> {
        // Evidence: the engine landed `head` in the workspace.
        let proof = self.supervisor.landing_seen(child, head.clone());
        checkout.apply(proof).map_err(|(_, e)| BrokerError::from(e))
    }

    /// [`Broker::landing`] decided again from the stored checkout and written, until the
    /// store takes it (backing off to once a second) or the broker shuts down; whether it
    /// is recorded.
    async fn record_landing_kept(&self, child: ChildId, head: &GitOid) -> bool {
        let mut pause = Duration::from_millis(50);
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
            let refused = match self.store.checkout(child).await {
                Ok(Some(checkout)) if checkout.state() == CheckoutState::Applied => return true,
                Ok(Some(checkout)) => match self.landing(checkout, child, head) {
                    Err(err) => {
                        tracing::error!(%child, error = %err.message(), "a landed change cannot be recorded");
                        return false;
                    }
                    Ok(decided) => match self.store.write_checkout(decided).await {
                        Ok(_) => {
                            tracing::warn!(%child, "recorded a landed change once the store took writes again");
                            return true;
                        }
                        Err(err) => err,
                    },
                },
                Ok(None) => return false,
                Err(err) => err,
            };
            tracing::debug!(%child, %refused, "a landed change is still not recorded");
            if !transient(&refused) || self.gate.is_closed() {
                tracing::error!(%child, %refused, "a landed change could not be recorded: the checkout still reads settled_changed, and applying it again finds its edits in the way");
                return false;
            }
        }
    }

    /// Throw `child`'s checkout away: a recorded change is `discarded`, a checkout with
    /// none `removed`. Its directory and refs go with it.
    pub(in crate::broker) async fn discard_change(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
    ) -> Result<p::ApplyOutput, BrokerError> {
        let _lock = self.idle_child(scope, child).await?;
        let checkout = loaded(self.store.checkout(child).await?, child)?;
        let files_changed = checkout
            .record()
            .change
            .map_or(0, |c| c.stats.files_changed);
        let state = match checkout.state() {
            CheckoutState::SettledChanged => {
                let decided = checkout.discard().map_err(|(_, e)| BrokerError::from(e))?;
                self.store.write_checkout(decided).await?;
                p::CheckoutState::Discarded
            }
            CheckoutState::SettledUnchanged | CheckoutState::Prepared => {
                let decided = checkout.remove().map_err(|(_, e)| BrokerError::from(e))?;
                self.store.write_checkout(decided).await?;
                p::CheckoutState::Removed
            }
            other => return Err(unavailable(child, other)),
        };
        self.remove_checkout(scope, child, &[base_ref(child), change_ref(child)])
            .await;
        Ok(p::ApplyOutput {
            commit: None,
            files_changed,
            state,
        })
    }

    /// The child's lock, held while its change is decided on: refused while a run is
    /// active (`change_unavailable`) or another process holds the child (`busy`). A
    /// checkout left `in_use` with no run (a start that failed, a broker that died) is
    /// recorded first.
    async fn idle_child(
        &self,
        scope: &WorkspaceScope,
        child: ChildId,
    ) -> Result<ChildLock, BrokerError> {
        let row = self.store.child(scope, child).await?;
        if let Some(run) = row.active_run_id {
            return Err(BrokerError::new(
                ErrorCode::ChangeUnavailable,
                format!("child {child} is running ({run}); wait for it to settle (subzero_get with waitMs), then apply or discard"),
            )
            .with_detail("state", CheckoutState::InUse.to_string()));
        }
        let lock = ChildLock::try_acquire(&self.paths, child)?;
        self.settle_checkout(scope, child).await?;
        Ok(lock)
    }

    /// Remove `child`'s checkout directory and `refs` (the ledger keeps its row).
    async fn remove_checkout(&self, scope: &WorkspaceScope, child: ChildId, refs: &[String]) {
        let workspace = scope.root().to_path_buf();
        let path = self.isolation.path(child);
        let refs = refs.to_vec();
        let removed = blocking(move || {
            let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
            checkout::remove(&workspace, &path, &refs)
        })
        .await;
        match removed {
            Ok(()) => {
                self.isolation.forget(child);
                if let Err(e) = self.store.measure_checkout(child, 0).await {
                    tracing::warn!(%child, %e, "could not record the removed checkout's size");
                }
            }
            Err(e) => {
                tracing::warn!(%child, error = %e.message(), "could not remove a checkout; subzero gc will");
            }
        }
    }
}

fn unavailable(child: ChildId, state: CheckoutState) -> BrokerError {
    let why = match state {
        CheckoutState::InUse | CheckoutState::Prepared => "no run has settled in it yet",
        CheckoutState::SettledUnchanged => "its runs changed nothing",
        CheckoutState::Applied => "its change was already applied",
        CheckoutState::Discarded => "its change was discarded",
        CheckoutState::Removed => "its checkout was removed",
        CheckoutState::SettledChanged => "its change is not readable",
    };
    BrokerError::new(
        ErrorCode::ChangeUnavailable,
        format!(
            "child {child} has no change to apply: {why}; read checkout.state with subzero_get"
        ),
    )
    .with_detail("state", state.to_string())
}
