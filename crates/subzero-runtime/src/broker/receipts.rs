//! Idempotency: a `requestId` makes a retried spawn, send or resume safe.
//!
//! The same id with the same arguments returns the first call's receipt and has no
//! second effect; the same id with other arguments is `request_conflict`. Receipts of
//! spawn, followup and resume are stored in the same transaction as their effect, so a
//! crash cannot separate them. Steer receipts live in the broker's memory: a steer only
//! exists for the lifetime of the run (and of the worker) this broker drives.

use std::collections::HashMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use subzero_core::digest::{Sha256Digest, canonical_json};
use subzero_core::{ChildId, ErrorCode};
use subzero_protocol as p;

use super::{Broker, BrokerError, lock};
use crate::scope::WorkspaceScope;
use crate::store::ReceiptInput;

/// A request id with the digest of the arguments it came with.
#[derive(Clone, Debug)]
pub(super) struct Receipt {
    tool: &'static str,
    request_id: String,
    args_digest: String,
}

impl Receipt {
    /// The receipt key for a call, or `None` without a `requestId`. The digest covers
    /// every argument except the request id itself.
    pub fn prepare<T: Serialize>(
        tool: &'static str,
        request_id: Option<&str>,
        input: &T,
    ) -> Result<Option<Self>, BrokerError> {
        let Some(request_id) = request_id else {
            return Ok(None);
        };
        Ok(Some(Receipt {
            tool,
            request_id: request_id.to_owned(),
            args_digest: args_digest(input)?,
        }))
    }

    /// The stored form, with the output the call returns.
    pub fn with_output<T: Serialize>(self, output: &T) -> Result<ReceiptInput, BrokerError> {
        let receipt = serde_json::to_value(output).map_err(|e| {
            BrokerError::internal(format!("cannot encode the {} receipt: {e}", self.tool))
        })?;
        Ok(self.stored_as(receipt))
    }

    fn stored_as(self, receipt: Value) -> ReceiptInput {
        ReceiptInput {
            tool: self.tool.to_owned(),
            request_id: self.request_id,
            args_digest: self.args_digest,
            receipt,
        }
    }

    fn probe(&self) -> ReceiptInput {
        self.clone().stored_as(Value::Null)
    }
}

/// A receipt read back from the store as the output type `T` of `tool`. The store holds
/// what an earlier call (maybe of another broker) returned; one the contract refuses is
/// `internal`.
pub(super) fn replayed<T: DeserializeOwned>(tool: &str, stored: Value) -> Result<T, BrokerError> {
    serde_json::from_value(stored).map_err(|e| {
        BrokerError::internal(format!(
            "the stored {tool} receipt breaks the contract: {e}"
        ))
    })
}

fn args_digest<T: Serialize>(input: &T) -> Result<String, BrokerError> {
    let mut value = serde_json::to_value(input)
        .map_err(|e| BrokerError::internal(format!("cannot encode arguments: {e}")))?;
    if let Value::Object(map) = &mut value {
        map.remove("requestId");
    }
    Ok(Sha256Digest::of(canonical_json(&value).as_bytes()).to_string())
}

/// Steer receipts of this broker: (child, requestId) → (message digest, output).
pub(super) type SteerReceipts = HashMap<(ChildId, String), (String, p::SendOutput)>;

impl Broker {
    /// The output of an earlier identical call, if any.
    pub(super) async fn replay<T: DeserializeOwned>(
        &self,
        scope: &WorkspaceScope,
        receipt: Option<&Receipt>,
    ) -> Result<Option<T>, BrokerError> {
        let Some(r) = receipt else {
            return Ok(None);
        };
        match self.store.find_receipt(scope, r.probe()).await? {
            Some(stored) => replayed(r.tool, stored).map(Some),
            None => Ok(None),
        }
    }

    /// The output of an earlier steer with this request id, or a conflict.
    pub(super) fn steer_receipt(
        &self,
        child: ChildId,
        request_id: &str,
        message: &str,
    ) -> Result<Option<p::SendOutput>, BrokerError> {
        let digest = Sha256Digest::of(message.as_bytes()).to_string();
        match lock(&self.steer_receipts).get(&(child, request_id.to_owned())) {
            None => Ok(None),
            Some((seen, output)) if *seen == digest => Ok(Some(output.clone())),
            Some(_) => Err(BrokerError::new(
                ErrorCode::RequestConflict,
                format!(
                    "requestId {request_id} was already used for subzero_send with different arguments; use a new requestId"
                ),
            )),
        }
    }

    pub(super) fn remember_steer(
        &self,
        child: ChildId,
        request_id: &str,
        message: &str,
        output: p::SendOutput,
    ) {
        let digest = Sha256Digest::of(message.as_bytes()).to_string();
        lock(&self.steer_receipts).insert((child, request_id.to_owned()), (digest, output));
    }
}
