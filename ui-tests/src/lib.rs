//! Compile-fail and compile-pass cases for subzero-core lifecycles; see
//! `tests/compiletest.rs`. This library only builds the values the cases start from, and
//! it builds each one the way the runtime does: by legal transitions (spawn, stop,
//! complete with a recorded leaf, fail, lose the worker), with tokens minted by a
//! supervisor taken once, as the runtime takes it. Nothing here materialises a state from a plain record, so
//! each case shows one illegal step and nothing else.

mod checkouts;

pub use checkouts::{
    changed_checkout, checkout_in_use, oid, prepared_checkout, unchanged_checkout,
};
use subzero_core::lifecycle::child::{Interrupted, Next, Ready, Running, Stopping};
use subzero_core::lifecycle::run::{self, Completed, Failed, Queued, Stopped};
use subzero_core::lifecycle::{
    Child, Failure, LeafRecorded, LeafRef, Run, Steering, Supervisor, WorkerCapabilities,
};
use subzero_core::{ChildId, ErrorCode, RunId, Sha256Digest};

/// The queue bound used by every fixture.
pub const QUEUE: u32 = 4;

/// A freshly spawned child; its first run is active.
pub fn running() -> Child<Running> {
    Child::spawn(
        ChildId::generate(),
        RunId::generate(),
        "first".to_owned(),
        QUEUE,
    )
}

/// A child whose active run has a stop requested.
pub fn stopping() -> Child<Stopping> {
    let child = running();
    let run = child.active_run().id();
    match child.stop(run) {
        Ok(accepted) => accepted.child,
        Err((_, e)) => panic!("fixture: {e}"),
    }
}

/// The proof that the active run of `child` committed a transcript leaf.
pub fn leaf_recorded(child: &Child<Running>) -> LeafRecorded {
    let leaf = LeafRef::new("leaf-1", Sha256Digest::of(b"fixture"));
    let leaf = leaf.unwrap_or_else(|e| panic!("fixture: {e}"));
    supervisor().leaf_recorded(child.id(), child.active_run().id(), leaf)
}

/// An idle child: its first run completed with a recorded leaf.
pub fn ready() -> Child<Ready> {
    let child = running();
    let proof = leaf_recorded(&child);
    match child.complete(proof) {
        Ok(settled) => match settled.next {
            Next::Idle(ready) => ready,
            Next::Started(_) => panic!("fixture: nothing was queued"),
        },
        Err((_, e)) => panic!("fixture: {e}"),
    }
}

/// An interrupted child: its worker was lost mid-run.
pub fn interrupted() -> Child<Interrupted> {
    running().lose_worker("fixture: the worker exited").child
}

/// A queued run of a child of its own, not yet started.
pub fn queued_run() -> Run<Queued> {
    Run::queued(ChildId::generate(), RunId::generate(), "later".to_owned())
}

/// A failure a worker reports.
pub fn failure() -> Failure {
    Failure {
        code: ErrorCode::ModelRequestFailed,
        message: "503".to_owned(),
    }
}

/// A completed run (terminal): completed with its recorded leaf.
pub fn completed_run() -> Completed {
    let child = running();
    let proof = leaf_recorded(&child);
    match child.complete(proof) {
        Ok(settled) => settled.outcome,
        Err((_, e)) => panic!("fixture: {e}"),
    }
}

/// A failed run (terminal).
pub fn failed_run() -> Failed {
    let child = running();
    let run = child.active_run().id();
    match child.fail(run, failure()) {
        Ok(settled) => settled.outcome,
        Err((_, e)) => panic!("fixture: {e}"),
    }
}

/// A stopped run (terminal): stopped with the supervisor's confirmation.
pub fn stopped_run() -> Stopped {
    let child = stopping();
    let proof = supervisor().confirm_stop(child.id(), child.active_run().id(), 0);
    match child.confirm_stop(proof) {
        Ok(settled) => settled.outcome,
        Err((_, e)) => panic!("fixture: {e}"),
    }
}

/// An interrupted run (terminal): its worker was lost.
pub fn interrupted_run() -> run::Interrupted {
    running().lose_worker("fixture: the worker exited").run
}

/// What a worker that advertises steering said in its `hello`.
pub fn capabilities() -> WorkerCapabilities {
    supervisor().capabilities(true)
}

/// The steering capability of a worker that advertises it.
pub fn steering() -> Steering {
    capabilities()
        .steering()
        .unwrap_or_else(|| panic!("fixture: advertised"))
}

/// The supervisor's authority, taken once by this process as the runtime takes it where
/// evidence arrives. The cases use it to hold real tokens, so each shows only its one
/// illegal step; the fixture is for these cases only.
pub fn supervisor() -> &'static Supervisor {
    static AUTHORITY: std::sync::OnceLock<Supervisor> = std::sync::OnceLock::new();
    AUTHORITY.get_or_init(|| Supervisor::take().unwrap_or_else(|| panic!("fixture: taken once")))
}
