//! Where the runtime mints the core's capability tokens.
//!
//! `StopConfirmed` and `LeafRecorded` can only be made by a [`Supervisor`], and the
//! core polices that the supervisor is designated only here (see
//! `crates/subzero-core/tests/capabilities.rs`). The store accepts `stopped` and
//! `completed` settlements only with these tokens, so a stop cannot be recorded without
//! the worker's cancel confirmation and a completion without its committed leaf.

use subzero_core::lifecycle::{LeafRecorded, LeafRef, StopConfirmed, Supervisor};
use subzero_core::{ChildId, RunId};

fn supervisor() -> Supervisor {
    Supervisor::designate_for_runtime_supervisor()
}

/// The worker sent `cancel_confirmed` for `run` of `child` and its process tree is
/// gone (`reaped` processes were killed). Call it only from that message's handler.
pub fn confirm_stop(child: ChildId, run: RunId, reaped: u32) -> StopConfirmed {
    supervisor().confirm_stop(child, run, reaped)
}

/// The worker committed `leaf` for the completed `run` of `child` (`leaf_committed`);
/// the settlement that carries this token records it as the child's last leaf.
pub fn leaf_recorded(child: ChildId, run: RunId, leaf: LeafRef) -> LeafRecorded {
    supervisor().leaf_recorded(child, run, leaf)
}
