//! `subzero_output`: a chunk of a run's full result, read from its artifact file.

use std::sync::Arc;

use subzero_core::ErrorCode;
use subzero_protocol as p;

use super::{Command, Context};
use crate::broker::wire::wire;
use crate::broker::{Broker, BrokerError};

/// `subzero_output`: a chunk of a run's full result.
impl Command for p::OutputInput {
    const TOOL: &'static str = "subzero_output";
    type Output = p::ArtifactChunk;

    async fn execute(
        self,
        broker: &Arc<Broker>,
        _ctx: Context,
    ) -> Result<p::ArtifactChunk, BrokerError> {
        let input = self;
        let id = subzero_core::ArtifactId::parse(input.artifact_id.as_str())?;
        let offset = input.offset.unwrap_or(0);
        // `length` is 1..65536 by the contract, checked where the arguments are parsed
        // (`invalid_request`); absent, it is the largest chunk.
        let length = input
            .length
            .map_or(u64::from(broker.policy.limits.output_chunk_bytes), |l| {
                l.get()
            });
        let row = broker.find_artifact(id).await?;
        let files = broker.artifacts.clone();
        let chunk = tokio::task::spawn_blocking(move || files.read_chunk(&row, offset, length))
            .await
            .map_err(|e| BrokerError::internal(format!("artifact read panicked: {e}")))??;
        Ok(p::ArtifactChunk {
            artifact_id: id.into(),
            eof: chunk.eof,
            next_offset: chunk.next_offset,
            offset: chunk.offset,
            text: wire(chunk.text, "output result", "text")?,
            total_bytes: chunk.total_bytes,
        })
    }
}

impl Broker {
    async fn find_artifact(
        &self,
        id: subzero_core::ArtifactId,
    ) -> Result<crate::store::ArtifactRow, BrokerError> {
        for scope in self.scopes.all() {
            match self.store.artifact(&scope, id).await {
                Ok(row) => return Ok(row),
                Err(e) if e.code() == ErrorCode::NotFound => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(BrokerError::new(
            ErrorCode::NotFound,
            format!(
                "artifact {id} does not exist in this workspace; take artifact ids from subzero_get's lastRun"
            ),
        ))
    }
}
