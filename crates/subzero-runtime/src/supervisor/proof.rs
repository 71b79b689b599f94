//! The runtime's one minting authority, and where it is lent.
//!
//! The core's tokens stand for evidence: `StopConfirmed` for a worker's
//! `cancel_confirmed`, `LeafRecorded` for its `leaf_committed`, `WorkerCapabilities`
//! (and through it `Steering`) for its `hello`, `CompactionReported` for its `compacted`,
//! `ObservedLeaf` for a transcript leaf read from disk. The store accepts `stopped` and
//! `completed` settlements, and a resume, only with these tokens, so a stop cannot be
//! recorded without the worker's cancel confirmation, a completion without its committed
//! leaf, or a resume without reading the transcript.
//!
//! The core's [`Supervisor`] exists once per process and is handed to its first taker.
//! The runtime takes it here, when a broker opens ([`authority`]); the broker keeps the
//! reference and lends it to exactly the code that observes the evidence:
//!
//! * `broker::worker` — the driver that reads the worker's control lines: the parsed
//!   `hello` (`capabilities`), `cancel_confirmed` of the run the worker reported
//!   stopped (`confirm_stop`), the run's `leaf_committed` when it completes
//!   (`leaf_recorded`) and `compacted` (`compaction_reported`);
//! * `broker::checkpoint` — the resume path's transcript read (`observed_leaf`).
//!
//! There is deliberately no helper here that mints from its arguments: that would let any
//! caller assert evidence it never saw. `crates/subzero-core/tests/testsuite/capabilities.rs` pins
//! where the authority is taken and where it is used.

use std::sync::LazyLock;

use subzero_core::lifecycle::Supervisor;

use crate::error::{RuntimeError, RuntimeResult};

/// Taken the first time a broker opens in this process.
static AUTHORITY: LazyLock<Option<Supervisor>> = LazyLock::new(Supervisor::take);

/// The process's minting authority; an error when something else in the process took it
/// before the runtime did (then no broker can vouch for what its workers report).
pub fn authority() -> RuntimeResult<&'static Supervisor> {
    AUTHORITY.as_ref().ok_or_else(|| {
        RuntimeError::Internal(
            "the minting authority of this process was taken by code other than the runtime; \
             a broker cannot record stops, completions or resumes without it"
                .to_owned(),
        )
    })
}
