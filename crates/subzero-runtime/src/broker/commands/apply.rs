//! `subzero_apply`: an isolated child's settled change, landed in its workspace as a whole
//! or thrown away.

use std::sync::Arc;

use subzero_core::ChildId;
use subzero_protocol as p;

use super::{Command, Context};
use crate::broker::{Broker, BrokerError};

/// `subzero_apply`: all of the change or nothing (`change_conflict` names each path in the
/// way and leaves the workspace as it was); `discard` throws it away instead.
impl Command for p::ApplyInput {
    const TOOL: &'static str = "subzero_apply";
    type Output = p::ApplyOutput;

    async fn execute(
        self,
        broker: &Arc<Broker>,
        _ctx: Context,
    ) -> Result<p::ApplyOutput, BrokerError> {
        broker.gate.check_open()?;
        let child = ChildId::parse(self.child_id.as_str())?;
        let scope = match self.workspace_root.as_deref() {
            Some(root) => broker.scopes.for_root(Some(root.as_str()))?,
            None => broker.child_scope(child).await?,
        };
        if self.discard == Some(true) {
            if self.commit_message.is_some() {
                return Err(BrokerError::invalid(
                    "commitMessage",
                    "commitMessage lands a change; it cannot go with discard: true",
                ));
            }
            return broker.discard_change(&scope, child).await;
        }
        let message = self.commit_message.map(String::from);
        broker.apply_change(&scope, child, message).await
    }
}
