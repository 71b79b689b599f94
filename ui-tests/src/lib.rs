//! Compile-fail and compile-pass cases for subzero-core lifecycles; see
//! `tests/compiletest.rs`. This library only builds the values the cases start from,
//! through the same public paths the runtime uses (spawn, `AnyChild::load`,
//! `AnyRun::load`), so each case shows one illegal step and nothing else.

use subzero_core::lifecycle::any::{ChildRecord, RunRecord};
use subzero_core::lifecycle::child::{Interrupted, Ready, Running, Stopping};
use subzero_core::lifecycle::run::{self, Completed, Queued};
use subzero_core::lifecycle::{
    AnyChild, AnyRun, Child, Run, Steering, Supervisor, WorkerCapabilities,
};
use subzero_core::{ChildId, ChildState, RunId, RunStatus};

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

/// An idle child.
pub fn ready() -> Child<Ready> {
    load(ChildState::Ready)
}

/// An interrupted child.
pub fn interrupted() -> Child<Interrupted> {
    load(ChildState::Interrupted)
}

fn load<T: TryFrom<AnyChild>>(state: ChildState) -> T
where
    T::Error: std::fmt::Debug,
{
    let record = ChildRecord {
        id: ChildId::generate(),
        state,
        active_run: None,
        queued: Vec::new(),
        last_leaf: None,
        interrupted_run: None,
        interruption_reason: None,
        queue_capacity: QUEUE,
    };
    let any = AnyChild::load(record).expect("fixture: a legal record");
    T::try_from(any).expect("fixture: the state asked for")
}

fn load_run<T: TryFrom<AnyRun>>(status: RunStatus, leaf: bool) -> T
where
    T::Error: std::fmt::Debug,
{
    let leaf = leaf.then(|| {
        let digest = subzero_core::Sha256Digest::of(b"fixture");
        subzero_core::lifecycle::LeafRef::new("leaf-1", digest).expect("fixture: a valid leaf")
    });
    let record = RunRecord {
        id: RunId::generate(),
        child: ChildId::generate(),
        status,
        prompt: Some("fixture".to_owned()),
        leaf,
        budget: None,
        failure: None,
        reaped: None,
        reason: None,
    };
    T::try_from(AnyRun::load(record).expect("fixture: a legal run"))
        .expect("fixture: the status asked for")
}

/// A queued run, not yet started.
pub fn queued_run() -> Run<Queued> {
    load_run(RunStatus::Queued, false)
}

/// A running run, on its own.
pub fn running_run() -> Run<run::Running> {
    load_run(RunStatus::Running, false)
}

/// A completed run (terminal).
pub fn completed_run() -> Completed {
    load_run(RunStatus::Completed, true)
}

/// What a worker that advertises steering said in its `hello`.
pub fn capabilities() -> WorkerCapabilities {
    supervisor().capabilities(true)
}

/// The steering capability of a worker that advertises it.
pub fn steering() -> Steering {
    capabilities().steering().expect("fixture: advertised")
}

/// The supervisor's authority, as the runtime designates it where evidence arrives. The
/// cases use it to hold real tokens, so each shows only its one illegal step; the
/// fixture is for these cases only.
#[allow(unsafe_code, reason = "fixture: the cases script the evidence")]
pub fn supervisor() -> Supervisor {
    // SAFETY: test fixture; the cases' tokens stand for evidence the cases script.
    unsafe { Supervisor::designate() }
}
