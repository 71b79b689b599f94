//! `subzero_send`: steer the active run, or add a follow-up run.

use std::sync::Arc;

use subzero_core::{ChildId, ChildState, ErrorCode, RunId};
use subzero_protocol as p;

use super::{Command, Context};
use crate::broker::admit::{delivered, interrupted};
use crate::broker::receipts::{Receipt, replayed};
use crate::broker::{Broker, BrokerError};
use crate::store::{Admit, AdmitFollowup, ChildRow};

/// `subzero_send`: steer the active run, or add a follow-up run.
impl Command for p::SendInput {
    const TOOL: &'static str = "subzero_send";
    type Output = p::SendOutput;

    async fn execute(
        self,
        broker: &Arc<Broker>,
        _ctx: Context,
    ) -> Result<p::SendOutput, BrokerError> {
        let input = self;
        broker.gate.check_open()?;
        let child = ChildId::parse(input.child_id.as_str())?;
        let message = input.message.to_string();
        broker.policy.limits.check_prompt(&message)?;
        let scope = broker.child_scope(child).await?;
        if input.mode == p::SendInputMode::Steer {
            if input.compact == Some(true) {
                return Err(BrokerError::invalid(
                    "compact",
                    "compact applies to a followup (mode \"followup\"); a steer reaches the running run between turns and cannot compact its transcript: send the steer without compact",
                ));
            }
            return broker
                .steer(
                    child,
                    &scope,
                    input.request_id.as_deref().map(String::as_str),
                    message,
                )
                .await;
        }
        let receipt = Receipt::prepare(
            "subzero_send",
            input.request_id.as_deref().map(String::as_str),
            &input,
        )?;
        if let Some(replayed) = broker.replay(&scope, receipt.as_ref()).await? {
            return Ok(replayed);
        }
        let row = broker.store.child(&scope, child).await?;
        followup_allowed(broker, &row)?;
        let run = RunId::generate();
        if input.compact == Some(true) {
            broker.check_compact(child).await?;
            broker.compact_before(child, run);
        }
        if row.state != ChildState::Ready {
            let queued = broker
                .store
                .queue_followup(
                    &scope,
                    AdmitFollowup {
                        child_id: child,
                        run_id: run,
                        prompt: message.clone(),
                        owner_token: broker.owner_token().to_owned(),
                        receipt: receipt
                            .clone()
                            .map(|r| r.with_output(&delivered(run, p::SendOutputDelivery::Queued)))
                            .transpose()?,
                    },
                )
                .await?;
            match queued {
                Some(Admit::Replayed(stored)) => return replayed("subzero_send", stored),
                Some(Admit::New(_)) => return Ok(delivered(run, p::SendOutputDelivery::Queued)),
                // The active run settled between our read and the admission; nothing was
                // written, and the follow-up starts on the now ready child.
                None => {}
            }
        }
        broker
            .followup_on_ready(child, &scope, &row, run, message, receipt)
            .await
    }
}

/// Whether `row`'s child can take a follow-up from this broker: only the broker that was
/// given a child's key holds it (after a restart, or for another broker's child, work
/// continues only through resume), and an interrupted child resumes first.
fn followup_allowed(broker: &Broker, row: &ChildRow) -> Result<(), BrokerError> {
    let child = row.child_id;
    if !broker.workers.live().contains_key(&child) {
        return Err(BrokerError::new(
            ErrorCode::CredentialsRequired,
            format!(
                "this broker holds no credentials for child {child} (it was started before a restart or by another broker); call subzero_resume with a model and credentialRef first, then send"
            ),
        ));
    }
    if row.state == ChildState::Interrupted {
        return Err(interrupted(child));
    }
    Ok(())
}
