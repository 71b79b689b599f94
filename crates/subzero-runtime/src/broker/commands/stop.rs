//! `subzero_stop`: the guarded stop of a child's active run.

use std::sync::Arc;
use std::time::Duration;

use subzero_core::{ChildId, RunId};
use subzero_protocol as p;

use super::{Command, Context};
use crate::broker::{Broker, BrokerError};

/// `subzero_stop`: a stale `expectedRunId` changes nothing; a matching one clears the
/// queue and requests the stop at once. `confirmed` is true once the run has ended
/// and every process of its worker tree is gone; `waitMs` waits (bounded) for that.
impl Command for p::StopInput {
    const TOOL: &'static str = "subzero_stop";
    type Output = p::StopOutput;

    async fn execute(
        self,
        broker: &Arc<Broker>,
        _ctx: Context,
    ) -> Result<p::StopOutput, BrokerError> {
        let input = self;
        let child = ChildId::parse(input.child_id.as_str())?;
        let expected = RunId::parse(input.expected_run_id.as_str())?;
        let wait = Duration::from_millis(u64::try_from(input.wait_ms_or_default()).unwrap_or(0));
        let scope = broker.child_scope(child).await?;
        let begun = broker
            .store
            .begin_stop(&scope, child, expected, broker.owner_token())
            .await?;
        if !begun.already_requested {
            broker.send_cancel(child, begun.run_id);
        }
        let status = broker
            .wait_run_ended(&scope, child, begun.run_id, wait)
            .await?;
        Ok(p::StopOutput {
            confirmed: status.is_terminal(),
            requested: true,
            run_id: begun.run_id.into(),
            status: status.into(),
        })
    }
}
