//! The closed set of stable error codes shared by every boundary.
//!
//! A code never changes meaning once released (v1 is additive only). Messages may be
//! reworded; callers branch on the code. `schema-src/v1/error.schema.json` lists the
//! same set, and a test keeps the two equal.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A stable, snake_case error code.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// An argument is missing, malformed or out of bounds.
    InvalidRequest,
    /// A well-formed id names nothing in this workspace scope.
    NotFound,
    /// A credential reference is unknown, unset, unreadable, or not allowed for the model origin.
    CredentialsRequired,
    /// The template id names no built-in or configured template.
    TemplateNotFound,
    /// The worker cannot enforce a requested grant exactly.
    UnsupportedGrant,
    /// A policy limit (size, count, turns, deadline, budget) was hit.
    LimitExceeded,
    /// The workspace's worker or writer slots are all taken.
    WorkspaceBusy,
    /// Another broker or process holds the child; try again later.
    Busy,
    /// The previous owner's processes may still be alive; the child cannot be claimed yet.
    RecoveryRequired,
    /// `expectedRunId` is not the child's active run.
    StaleRun,
    /// The child has no active run for this operation.
    NotRunning,
    /// The worker does not advertise steering.
    UnsupportedSteer,
    /// The recorded checkpoint cannot be loaded exactly (digest, version, leaf).
    CheckpointIncompatible,
    /// The worker's name, version, transcript version or protocol does not fit.
    WorkerIncompatible,
    /// The artifact is missing or unreadable.
    ArtifactUnavailable,
    /// The same `requestId` was used with different arguments.
    RequestConflict,
    /// The model endpoint failed the request; nothing was retried.
    ModelRequestFailed,
    /// The broker is shutting down and accepts no new work.
    RuntimeShuttingDown,
    /// The child is interrupted; call `subzero_resume` first.
    Interrupted,
    /// The state database (or another stored file) cannot be written or is no longer the
    /// file this process opened; the message names the path and what the OS said.
    StorageUnavailable,
    /// An unexpected internal failure; state was left consistent.
    Internal,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 21] = [
        ErrorCode::InvalidRequest,
        ErrorCode::NotFound,
        ErrorCode::CredentialsRequired,
        ErrorCode::TemplateNotFound,
        ErrorCode::UnsupportedGrant,
        ErrorCode::LimitExceeded,
        ErrorCode::WorkspaceBusy,
        ErrorCode::Busy,
        ErrorCode::RecoveryRequired,
        ErrorCode::StaleRun,
        ErrorCode::NotRunning,
        ErrorCode::UnsupportedSteer,
        ErrorCode::CheckpointIncompatible,
        ErrorCode::WorkerIncompatible,
        ErrorCode::ArtifactUnavailable,
        ErrorCode::RequestConflict,
        ErrorCode::ModelRequestFailed,
        ErrorCode::RuntimeShuttingDown,
        ErrorCode::Interrupted,
        ErrorCode::StorageUnavailable,
        ErrorCode::Internal,
    ];

    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::NotFound => "not_found",
            ErrorCode::CredentialsRequired => "credentials_required",
            ErrorCode::TemplateNotFound => "template_not_found",
            ErrorCode::UnsupportedGrant => "unsupported_grant",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::WorkspaceBusy => "workspace_busy",
            ErrorCode::Busy => "busy",
            ErrorCode::RecoveryRequired => "recovery_required",
            ErrorCode::StaleRun => "stale_run",
            ErrorCode::NotRunning => "not_running",
            ErrorCode::UnsupportedSteer => "unsupported_steer",
            ErrorCode::CheckpointIncompatible => "checkpoint_incompatible",
            ErrorCode::WorkerIncompatible => "worker_incompatible",
            ErrorCode::ArtifactUnavailable => "artifact_unavailable",
            ErrorCode::RequestConflict => "request_conflict",
            ErrorCode::ModelRequestFailed => "model_request_failed",
            ErrorCode::RuntimeShuttingDown => "runtime_shutting_down",
            ErrorCode::Interrupted => "interrupted",
            ErrorCode::StorageUnavailable => "storage_unavailable",
            ErrorCode::Internal => "internal",
        }
    }

    /// Parse the wire spelling.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Anything that can report a stable code.
pub trait Coded {
    /// The stable code for this error.
    fn code(&self) -> ErrorCode;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_matches_serde() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }
}
