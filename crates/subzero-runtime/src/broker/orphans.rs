//! Children whose owner is gone, recovered by whichever broker touches them first.
//!
//! A broker that dies leaves its children `running` and owned by it. Startup recovery
//! settles them for a broker that starts later; this does the same for the brokers that
//! were alive all along: the first access to such a child (get, list, stop, send, resume)
//! checks the owner's liveness lock, and when it is free and nothing holds the child's
//! lock any more, the active run becomes `interrupted` (`broker_lost`) and the child is
//! usable here at once. A live owner, or a child lock still held by its processes, is left
//! alone (the latter becomes `recovery_required`, naming them).

use super::{Broker, BrokerError};
use crate::scope::WorkspaceScope;
use crate::store::{ChildRow, Ownership};

impl Broker {
    /// Whether `row` may be an orphan: owned by another broker, marked
    /// `recovery_required`, or running with no owner at all.
    pub(super) fn maybe_orphaned(&self, row: &ChildRow) -> bool {
        match row.ownership {
            Ownership::RecoveryRequired => true,
            Ownership::Owned => row.owner_token.as_deref() != Some(self.owner_token()),
            Ownership::None => row.active_run_id.is_some(),
        }
    }

    /// Recover `row`'s child when its owner is gone (see the module docs); a no-op for a
    /// child whose owner lives.
    pub(super) async fn recover_if_orphaned(
        &self,
        scope: &WorkspaceScope,
        row: &ChildRow,
    ) -> Result<(), BrokerError> {
        if !self.maybe_orphaned(row) {
            return Ok(());
        }
        let (store, paths, token, observed) = (
            self.store.clone(),
            self.paths.clone(),
            self.owner_token().to_owned(),
            row.clone(),
        );
        let report = tokio::task::spawn_blocking(move || {
            crate::recovery::recover_child(&store, &paths, &observed, &token)
        })
        .await
        .map_err(|e| BrokerError::internal(format!("recovery panicked: {e}")))??;
        if !report.interrupted.is_empty() || !report.released.is_empty() {
            tracing::info!(child_id = %row.child_id, scope = %scope.key(), "recovered a child whose broker is gone");
        }
        Ok(())
    }
}
