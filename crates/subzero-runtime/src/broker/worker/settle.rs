//! Settling a run so that nothing the worker produced is lost to a storage fault, and
//! no child stays `running` without a worker because of one.
//!
//! Every path that ends a run goes through [`Broker::settle_kept`]: the worker's report
//! (its result and committed leaf, its failure, its cancel confirmation), its loss, and
//! a worker that could not be started. What the run showed is kept as plain data
//! ([`Ended`]) until the store has recorded it. Each attempt writes the result file if it
//! is not written yet, mints the proofs the settlement needs from that evidence, and
//! hands it to the store. A database write the file system refuses (full, read-only, I/O
//! error) first releases the state directory's [space reserve](super::reserve) and is
//! tried again at once — on a full disk that is what lets the run's end be recorded —
//! then, like a database locked past its busy timeout, is retried, backing off to once a
//! second, for as long as the broker lives. A completed run's result file the file system
//! refuses is retried for [`ARTIFACT_PATIENCE`], then the run is recorded `failed`
//! (`artifact_unavailable`); a failed run's partial result is tried once. So a run whose
//! worker is gone is recorded within [`SETTLE_BOUND`] unless the store refuses even the
//! reserved space. Any other refusal is final and logged. Only the broker's shutdown
//! ends the retries; the next broker then records the run interrupted (`broker_lost`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use subzero_core::lifecycle::{LeafRef, Supervisor};
use subzero_core::{BudgetReached, ChildId, ErrorCode, RunId};

use super::PREVIEW_BYTES;
use super::driver::Driver;
use super::phase::{ActiveRun, Phase};
use super::reserve::SpaceReserve;
use crate::RuntimeError;
use crate::artifacts;
use crate::broker::{Broker, BrokerError};
use crate::store::{ErrorDetails, NewArtifact, PartialResult, RunUsage, Settled, Settlement};

/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The bound this module keeps: a run whose worker is gone — it reported the run's end,
/// exited, broke the protocol, or never started — is recorded within this long (the
/// worker's retirement, at most [`ARTIFACT_PATIENCE`] for a result file, and the
/// settlement in the reserved space), unless the store refuses even that.
pub(in crate::broker) const SETTLE_BOUND: Duration = Duration::from_secs(10);

/// How long a completed run's result file the file system refuses is retried before the
/// run is recorded without it (`artifact_unavailable`): a result that does not fit must
/// not keep its child `running` while the disk stays full. Short enough that the worker's
/// retirement and this wait stay within [`SETTLE_BOUND`].
const ARTIFACT_PATIENCE: Duration = Duration::from_secs(4);

/// How long a failed worker start waits for its settlement before its caller is answered;
/// the settlement goes on after that, in the background.
const FAILED_START_WAIT: Duration = Duration::from_secs(2);

/// Which attempt of a settlement this is.
#[derive(Clone, Copy)]
struct Attempt {
    /// Still within [`ARTIFACT_PATIENCE`].
    patient: bool,
    /// The first attempt.
    first: bool,
}

/// What a settlement records besides how the run ended.
#[derive(Debug, Default)]
pub(super) struct Recorded {
    /// What the run used, as its worker reported it.
    pub usage: Option<RunUsage>,
    /// The machine-readable details of a failed run's error.
    pub details: Option<ErrorDetails>,
}

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
pub(in crate::broker) fn transient(err: &RuntimeError) -> bool {
    match err {
        RuntimeError::StorageUnavailable { .. } | RuntimeError::Locked(_) => true,
        RuntimeError::Io { source, .. } => matches!(
            Errno::from_io_error(source),
            Some(Errno::NOSPC | Errno::DQUOT | Errno::ROFS | Errno::IO)
        ),
        _ => false,
    }
}

impl Driver {
    /// Record how `run` ended, retrying what storage refuses until it is recorded (or
    /// the broker shuts down). `None` when it could not be recorded.
    pub(super) async fn settle(&mut self, active: ActiveRun, ended: Ended) -> Option<Settled> {
        self.phase = Phase::Idle { closing: false };
        let details = match ended {
            Ended::Failed { .. } => active.error_details,
            _ => None,
        };
        let recorded = Recorded {
            usage: active.usage,
            details,
        };
        self.broker
            .settle_kept(self.child, active.run, ended, recorded)
            .await
    }
}

impl Broker {
    /// A run that got no worker fails with the reason, through the same kept and retried
    /// settlement as every other run's end, so nothing is left `running`. The caller is
    /// answered after at most [`FAILED_START_WAIT`]; a settlement the store still refuses
    /// then is retried in the background.
    pub(in crate::broker) async fn record_failed_start(
        self: &Arc<Self>,
        child: ChildId,
        run: RunId,
        err: &BrokerError,
    ) {
        let ended = Ended::Failed {
            code: err.code(),
            message: err.message().to_owned(),
            partial: None,
            artifact: None,
        };
        let recorded = Recorded {
            usage: None,
            details: (!err.details().is_empty()).then(|| err.details().clone()),
        };
        let broker = Arc::clone(self);
        let settling =
            tokio::spawn(async move { broker.settle_kept(child, run, ended, recorded).await });
        match tokio::time::timeout(FAILED_START_WAIT, settling).await {
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => {
                tracing::error!(%child, %run, "could not record a failed worker start");
            }
            Ok(Err(e)) => {
                tracing::error!(%child, %run, %e, "recording a failed worker start panicked");
            }
            Err(_) => {
                tracing::warn!(%child, %run, "a failed worker start is not recorded yet; its settlement is retried in the background");
            }
        }
    }

    /// Record how `run` of `child` ended, retrying what storage refuses until it is
    /// recorded (or the broker shuts down); see the module documentation. `None` when it
    /// could not be recorded.
    pub(super) async fn settle_kept(
        &self,
        child: ChildId,
        run: RunId,
        mut ended: Ended,
        recorded: Recorded,
    ) -> Option<Settled> {
        let mut closing = self.gate.closing();
        let reserve = SpaceReserve::of(self.paths.root());
        let mut reserve_released = false;
        let mut overdue = false;
        let mut pause = Duration::from_millis(50);
        let mut attempts = 0u32;
        let since = Instant::now();
        loop {
            attempts += 1;
            let attempt = Attempt {
                patient: since.elapsed() < ARTIFACT_PATIENCE,
                first: attempts == 1,
            };
            let (refused, by_store) = match self
                .settlement(child, run, &mut ended, &recorded, attempt)
                .await
            {
                Err(err) => (err, false),
                Ok(settlement) => match self
                    .store
                    .settle_run_with_usage(
                        child,
                        run,
                        self.owner_token(),
                        settlement,
                        recorded.usage,
                    )
                    .await
                {
                    Ok(settled) => {
                        if attempts > 1 {
                            tracing::warn!(%child, %run, attempts, elapsed_ms = since.elapsed().as_millis(), "settled a run once the store took writes again");
                        }
                        return Some(settled);
                    }
                    Err(err) => (err, true),
                },
            };
            if !transient(&refused) {
                tracing::error!(%child, %run, %refused, "could not settle a run");
                return None;
            }
            if attempts == 1 {
                tracing::error!(%child, %run, %refused, "could not settle a run yet; its result is kept and the settlement retried until the store takes writes");
            }
            if !overdue && since.elapsed() > SETTLE_BOUND {
                overdue = true;
                tracing::error!(%child, %run, %refused, bound_s = SETTLE_BOUND.as_secs(), "a run's end is still not recorded: the store refuses even the reserved space; its child shows `running` until the state directory takes writes again");
            }
            if self.gate.is_closed() {
                tracing::error!(%child, %run, "the broker is shutting down before the run could be settled; the next broker records it interrupted");
                return None;
            }
            // The file system refused the settlement itself: give it the reserved space and
            // try again at once.
            if by_store
                && !reserve_released
                && matches!(refused, RuntimeError::StorageUnavailable { .. })
            {
                reserve_released = true;
                if reserve.release() {
                    continue;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                _ = closing.changed() => {}
            }
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }

    /// One attempt's settlement: writes a result file not written yet (while `patient`, a
    /// transient failure to write a completed run's result is `Err`, to be retried; a
    /// failed run's partial result only at the `first`), and mints the proofs from the
    /// evidence kept in `ended`.
    async fn settlement(
        &self,
        child: ChildId,
        run: RunId,
        ended: &mut Ended,
        recorded: &Recorded,
        attempt: Attempt,
    ) -> Result<Settlement, RuntimeError> {
        let Attempt { patient, first } = attempt;
        self.store_completed_result(child, run, ended, patient)
            .await?;
        match ended {
            Ended::Completed {
                result,
                leaf,
                artifact,
                budget,
            } => completed(
                self.supervisor,
                (child, run),
                result,
                leaf,
                artifact.clone(),
                *budget,
            ),
            Ended::Failed {
                code,
                message,
                partial,
                artifact,
            } => {
                let partial = match partial.as_deref().filter(|t| !t.is_empty()) {
                    Some(text) => {
                        Some(self.partial_result(child, run, text, artifact, first).await)
                    }
                    None => None,
                };
                Ok(Settlement::Failed {
                    code: *code,
                    message: message.clone(),
                    partial,
                    details: recorded.details.clone(),
                })
            }
            Ended::Stopped { reaped } => {
                // Mint point: the worker sent `cancel_confirmed` for `run`, the run it
                // reported `stopped`, only once its tool tree was gone; `reaped` is from
                // that line.
                let confirmed = self.supervisor.confirm_stop(child, run, *reaped);
                Ok(Settlement::Stopped { confirmed })
            }
            Ended::Interrupted { reason, tree_gone } => Ok(Settlement::Interrupted {
                reason: reason.clone(),
                tree_gone: *tree_gone,
            }),
        }
    }

    /// A completed run's result file, written if not written yet. One that cannot be
    /// written for good (not a full or read-only disk) turns the completion into the
    /// failure that says so; a transient failure while `patient` is `Err`, to be retried.
    async fn store_completed_result(
        &self,
        child: ChildId,
        run: RunId,
        ended: &mut Ended,
        patient: bool,
    ) -> Result<(), RuntimeError> {
        let Ended::Completed {
            result,
            artifact: artifact @ None,
            ..
        } = ended
        else {
            return Ok(());
        };
        match self.write_artifact(child, result).await {
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
        Ok(())
    }

    /// A failed run's partial result: its preview, and its file when one was written. The
    /// file is best effort, tried at the `first` attempt only: the run still fails with
    /// its own error, with the preview but no file, and a full disk does not hold its
    /// settlement back.
    async fn partial_result(
        &self,
        child: ChildId,
        run: RunId,
        text: &str,
        artifact: &mut Option<NewArtifact>,
        first: bool,
    ) -> PartialResult {
        if artifact.is_none() && first {
            match self.write_artifact(child, text).await {
                Ok(written) => *artifact = Some(written),
                Err(err) => {
                    tracing::warn!(%child, %run, %err, "could not store a failed run's partial result");
                }
            }
        }
        let preview = artifacts::preview(text, PREVIEW_BYTES);
        PartialResult {
            preview: preview.text,
            preview_truncated: preview.truncated,
            artifact: artifact.clone(),
        }
    }

    async fn write_artifact(
        &self,
        child: ChildId,
        text: &str,
    ) -> Result<NewArtifact, RuntimeError> {
        let files = self.artifacts.clone();
        let text = text.to_owned();
        match tokio::task::spawn_blocking(move || files.write(child, &text)).await {
            Ok(written) => written,
            Err(e) => Err(RuntimeError::Internal(format!(
                "storing the result panicked: {e}"
            ))),
        }
    }
}

/// A completed run's settlement, with the proof minted from the leaf the worker committed
/// (minted again for each attempt: a failed one is rolled back whole, and the evidence is
/// kept unchanged until one succeeds).
fn completed(
    supervisor: &Supervisor,
    (child, run): (ChildId, RunId),
    result: &str,
    leaf: &LeafRef,
    artifact: Option<NewArtifact>,
    budget: Option<BudgetReached>,
) -> Result<Settlement, RuntimeError> {
    let Some(artifact) = artifact else {
        return Err(RuntimeError::Internal(format!(
            "the result file of run {run} was neither written nor refused"
        )));
    };
    let preview = artifacts::preview(result, PREVIEW_BYTES);
    // Mint point: `leaf` is the worker's `leaf_committed` line for run `run`, parsed at
    // its `run_settled completed`; the settlement records it as the last leaf.
    let leaf = supervisor.leaf_recorded(child, run, leaf.clone());
    Ok(Settlement::Completed {
        preview: preview.text,
        preview_truncated: preview.truncated,
        artifact,
        leaf,
        budget,
    })
}
