//! `subzero_list`: the children of a workspace, a page at a time, by label, template or
//! state when asked.

use std::sync::Arc;

use subzero_core::ChildId;
use subzero_protocol as p;

use super::{Command, Context};
use crate::broker::wire::snapshot;
use crate::broker::{Broker, BrokerError};
use crate::store::ChildFilter;

/// `subzero_list`.
impl Command for p::ListInput {
    const TOOL: &'static str = "subzero_list";
    type Output = p::ListOutput;

    async fn execute(
        self,
        broker: &Arc<Broker>,
        _ctx: Context,
    ) -> Result<p::ListOutput, BrokerError> {
        let input = self;
        let scope = match &input.workspace_root {
            Some(root) => broker.scopes.for_root(Some(root.as_str()))?,
            None => broker.scopes.own.clone(),
        };
        let limit = input.limit.map(|l| l.get()).unwrap_or(50).clamp(1, 200) as u32;
        let after = input
            .after
            .as_ref()
            .map(|a| ChildId::parse(a.as_str()))
            .transpose()?;
        let filter = ChildFilter {
            label: input.label.as_deref().map(|l| l.to_string()),
            template: input.template_id.as_deref().map(|t| t.to_string()),
            state: input.state.map(Into::into),
        };
        let rows = broker
            .store
            .list_children_where(&scope, limit + 1, after, filter.clone())
            .await?;
        let more = rows.len() > limit as usize;
        let mut children = Vec::with_capacity(rows.len());
        for row in rows.iter().take(limit as usize) {
            // Listing is an access too: a child whose broker is gone is recovered here
            // (startup recovery may have seen that broker's locks a moment before they
            // were released) and shown as it now is.
            if broker.maybe_orphaned(row) {
                broker.recover_if_orphaned(&scope, row).await?;
            }
            // The row again with its runs, from one read: the page's row and runs read
            // apart could show a run settled in between as both active and last.
            let (row, runs) = broker.store.child_and_runs(&scope, row.child_id).await?;
            // Recovered just now, it may have left the state asked for.
            if filter.state.is_some_and(|state| state != row.state) {
                continue;
            }
            let mut summary = snapshot::summary(&row, &runs)?;
            summary.compact();
            children.push(summary);
        }
        let next_after = if more {
            rows.get(limit as usize - 1).map(|r| r.child_id.into())
        } else {
            None
        };
        Ok(p::ListOutput {
            children: p::ListOutputChildren(children),
            next_after,
            workspace_root: crate::broker::wire::wire(
                scope.root().to_string_lossy().into_owned(),
                Self::TOOL,
                "workspaceRoot",
            )?,
        })
    }
}

impl Broker {}
