//! Settling a run so that nothing the worker produced is lost to a storage fault.
//!
//! What the worker showed — its result and committed leaf, its failure, its cancel
//! confirmation, or its loss — is kept as plain data ([`Ended`]) until the store has
//! recorded it. Each attempt writes the result file if it is not written yet, mints the
//! proofs the settlement needs from that evidence, and hands it to the store. A database
//! write the file system refuses (full, read-only, I/O error), or a database locked past
//! its busy timeout, is retried — backing off to once a second — for as long as the
//! broker lives, so the run settles truthfully, with its result, as soon as the store
//! takes writes again. A result file the file system refuses is retried for
//! [`ARTIFACT_PATIENCE`], then the run is recorded `failed` (`artifact_unavailable`).
//! Any other refusal is final and logged. Only the broker's shutdown ends the retries;
//! the next broker then records the run interrupted (`broker_lost`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use subzero_core::lifecycle::{LeafRef, Supervisor};
use subzero_core::{BudgetReached, ErrorCode, RunId};

use super::PREVIEW_BYTES;
use super::driver::Driver;
use crate::RuntimeError;
use crate::artifacts;
use crate::broker::BrokerError;
use crate::store::{NewArtifact, PartialResult, Settled, Settlement};

/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// How long a result file the file system refuses is retried before the run is recorded
/// without it (`artifact_unavailable`): a result that does not fit must not keep its
/// child `running` for as long as the disk stays full. The database write itself is
/// retried for as long as the broker lives.
const ARTIFACT_PATIENCE: Duration = Duration::from_secs(10);

/// How a run ended, as the worker (or the supervisor) showed it; kept until stored.
pub(super) enum Ended {
    /// `run_settled completed` after the run's `leaf_committed`.
    Completed {
        /// The full result.
        result: String,
        /// The transcript leaf the worker committed for the run.
        leaf: LeafRef,
        /// The result file, once written.
        artifact: Option<NewArtifact>,
        /// With `run_settled budget_exhausted`: the budget reached (the result is the
        /// handoff summary).
        budget: Option<BudgetReached>,
    },
    /// `run_settled failed`, or a completion that cannot be recorded as one.
    Failed {
        /// Stable code.
        code: ErrorCode,
        /// Message.
        message: String,
        /// What the run produced before it failed.
        partial: Option<String>,
        /// The partial result file, once written.
        artifact: Option<NewArtifact>,
    },
    /// `cancel_confirmed` for the run the worker reported `stopped`.
    Stopped {
        /// Processes the worker reaped.
        reaped: u32,
    },
    /// The worker was lost mid-run.
    Interrupted {
        /// Why.
        reason: String,
        /// Whether its tree is proven gone (child lock free).
        tree_gone: bool,
    },
}

/// Whether a failure is the file system or the database refusing for now: worth another
/// attempt once it takes writes again.
fn transient(err: &RuntimeError) -> bool {
    match err {
        RuntimeError::StorageUnavailable { .. } | RuntimeError::Locked(_) => true,
        RuntimeError::Io { source, .. } => matches!(
            source.raw_os_error(),
            Some(libc::ENOSPC | libc::EDQUOT | libc::EROFS | libc::EIO)
        ),
        _ => false,
    }
}

impl Driver {
    /// Record how `run` ended, retrying what storage refuses until it is recorded (or
    /// the broker shuts down). `None` when it could not be recorded.
    pub(super) async fn settle(&mut self, run: RunId, mut ended: Ended) -> Option<Settled> {
        self.active = None;
        let mut closing = self.broker.closing.subscribe();
        let mut pause = Duration::from_millis(50);
        let mut attempts = 0u32;
        let since = std::time::Instant::now();
        loop {
            attempts += 1;
            let patient = since.elapsed() < ARTIFACT_PATIENCE;
            let refused = match self.settlement(run, &mut ended, patient).await {
                Err(err) => err,
                Ok(settlement) => match self
                    .broker
                    .store
                    .settle_run_with_usage(
                        self.child,
                        run,
                        self.broker.owner_token(),
                        settlement,
                        self.usage,
                    )
                    .await
                {
                    Ok(settled) => {
                        if attempts > 1 {
                            tracing::warn!(child = %self.child, %run, attempts, "settled a run once the store took writes again");
                        }
                        return Some(settled);
                    }
                    Err(err) => err,
                },
            };
            if !transient(&refused) {
                tracing::error!(child = %self.child, %run, %refused, "could not settle a run");
                return None;
            }
            if attempts == 1 {
                tracing::error!(child = %self.child, %run, %refused, "could not settle a run yet; its result is kept and the settlement retried until the store takes writes");
            }
            if self.broker.shutting_down.load(Ordering::SeqCst) {
                tracing::error!(child = %self.child, %run, "the broker is shutting down before the run could be settled; the next broker records it interrupted");
                return None;
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                _ = closing.changed() => {}
            }
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }

    /// One attempt's settlement: writes a result file not written yet (while `patient`, a
    /// transient failure to write it is `Err`, to be retried), and mints the proofs from
    /// the evidence kept in `ended`.
    async fn settlement(
        &mut self,
        run: RunId,
        ended: &mut Ended,
        patient: bool,
    ) -> Result<Settlement, RuntimeError> {
        // A result file that cannot be written for good (not a full or read-only disk)
        // turns the completion into the failure that says so.
        if let Ended::Completed {
            result,
            artifact: artifact @ None,
            ..
        } = ended
        {
            match self.write_artifact(result).await {
                Ok(written) => *artifact = Some(written),
                Err(err) if patient && transient(&err) => return Err(err),
                Err(err) => {
                    *ended = Ended::Failed {
                        code: ErrorCode::ArtifactUnavailable,
                        message: format!(
                            "the result of run {run} could not be stored: {}",
                            BrokerError::from(err).message()
                        ),
                        partial: None,
                        artifact: None,
                    };
                }
            }
        }
        match ended {
            Ended::Completed {
                result,
                leaf,
                artifact,
                budget,
            } => {
                // The token is minted again for each attempt: a failed one is rolled back
                // whole, and the evidence below is kept unchanged until one succeeds.
                let preview = artifacts::preview(result, PREVIEW_BYTES);
                // SAFETY: `leaf` is the worker's `leaf_committed` line for run `run`, parsed
                // at its `run_settled completed`; the settlement records it as the last leaf.
                #[allow(unsafe_code, reason = "mint point: the worker's leaf_committed")]
                let leaf =
                    unsafe { Supervisor::designate() }.leaf_recorded(self.child, run, leaf.clone());
                Ok(Settlement::Completed {
                    preview: preview.text,
                    preview_truncated: preview.truncated,
                    artifact: artifact.clone(),
                    leaf,
                    budget: *budget,
                })
            }
            Ended::Failed {
                code,
                message,
                partial,
                artifact,
            } => {
                let Some(text) = partial.as_deref().filter(|t| !t.is_empty()) else {
                    return Ok(Settlement::Failed {
                        code: *code,
                        message: message.clone(),
                        partial: None,
                    });
                };
                if artifact.is_none() {
                    match self.write_artifact(text).await {
                        Ok(written) => *artifact = Some(written),
                        Err(err) if patient && transient(&err) => return Err(err),
                        // The partial result is best effort: the run still fails with
                        // its own error, with the preview but no file.
                        Err(err) => {
                            tracing::warn!(child = %self.child, %run, %err, "could not store a failed run's partial result");
                        }
                    }
                }
                let preview = artifacts::preview(text, PREVIEW_BYTES);
                Ok(Settlement::Failed {
                    code: *code,
                    message: message.clone(),
                    partial: Some(PartialResult {
                        preview: preview.text,
                        preview_truncated: preview.truncated,
                        artifact: artifact.clone(),
                    }),
                })
            }
            Ended::Stopped { reaped } => {
                // SAFETY: the worker sent `cancel_confirmed` for `run`, the run it reported
                // `stopped`, only once its tool tree was gone; `reaped` is from that line.
                #[allow(unsafe_code, reason = "mint point: the worker's cancel_confirmed")]
                let confirmed =
                    unsafe { Supervisor::designate() }.confirm_stop(self.child, run, *reaped);
                Ok(Settlement::Stopped { confirmed })
            }
            Ended::Interrupted { reason, tree_gone } => Ok(Settlement::Interrupted {
                reason: reason.clone(),
                tree_gone: *tree_gone,
            }),
        }
    }

    async fn write_artifact(&self, text: &str) -> Result<NewArtifact, RuntimeError> {
        let files = self.broker.artifacts.clone();
        let child = self.child;
        let text = text.to_owned();
        match tokio::task::spawn_blocking(move || files.write(child, &text)).await {
            Ok(written) => written,
            Err(e) => Err(RuntimeError::Internal(format!(
                "storing the result panicked: {e}"
            ))),
        }
    }
}
