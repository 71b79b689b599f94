//! `subzero_output`: a chunk of a run's full result, read from its artifact file.

use subzero_core::ErrorCode;
use subzero_protocol as p;

use super::wire::wire;
use super::{Broker, BrokerError};

impl Broker {
    /// `subzero_output`: a chunk of a run's full result.
    pub async fn output(&self, input: p::OutputInput) -> Result<p::ArtifactChunk, BrokerError> {
        let id = subzero_core::ArtifactId::parse(input.artifact_id.as_str())?;
        let offset = input.offset.unwrap_or(0);
        // `length` is 1..65536 by the contract, checked where the arguments are parsed
        // (`invalid_request`); absent, it is the largest chunk.
        let length = input
            .length
            .map_or(u64::from(self.policy.limits.output_chunk_bytes), |l| {
                l.get()
            });
        let row = self.find_artifact(id).await?;
        let files = self.artifacts.clone();
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
