//! A run's failures as the broker reads them: the model's, the transcript's, a limit's.

use serde_json::json;

use crate::control::{ErrorBody, ErrorBodyExt, ErrorCode};
use crate::model::ModelError;
use crate::redact::redact;
use crate::transcript::TranscriptError;

pub(crate) fn limit(name: &str, message: String) -> ErrorBody {
    ErrorBody::new(ErrorCode::LimitExceeded, message).with_details(json!({ "limit": name }))
}

pub(crate) fn model_failed(err: &ModelError) -> ErrorBody {
    if let ModelError::TooLarge { .. } = err {
        return limit("model_response_bytes", format!("limit_exceeded: {err}"));
    }
    let details = match err {
        ModelError::Http { status, excerpt } => json!({ "status": status, "excerpt": excerpt }),
        ModelError::Redirect { target, .. } => json!({ "status": null, "redirect": target }),
        ModelError::Idle { ms, .. } => json!({ "status": null, "idleTimeoutMs": ms }),
        _ => json!({ "status": null }),
    };
    ErrorBody::new(
        ErrorCode::ModelRequestFailed,
        redact(&format!("model_request_failed: {err}")),
    )
    .with_details(details)
}

pub(crate) fn transcript_error(err: TranscriptError) -> ErrorBody {
    match err {
        TranscriptError::Incompatible(msg) => {
            ErrorBody::new(ErrorCode::CheckpointIncompatible, msg)
        }
        // The disk refused the transcript (full, read-only, gone): the state directory's
        // storage, not a bug; the run ends and the child takes a followup once it has room.
        TranscriptError::Io(e) => ErrorBody::new(
            ErrorCode::StorageUnavailable,
            format!(
                "storage_unavailable: the child's transcript could not be written ({e}); free space in the state directory (or make it writable), then send a followup"
            ),
        ),
    }
}
