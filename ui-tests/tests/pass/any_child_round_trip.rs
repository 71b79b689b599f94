// The storage boundary: an AnyChild loads from plain data, dispatches requests to the
// typed transitions, returns typed errors for illegal ones, and goes up with TryFrom.
use subzero_core::lifecycle::any::Delivery;
use subzero_core::lifecycle::child::Running;
use subzero_core::lifecycle::{AnyChild, Child, Supervisor};
use subzero_core::{ChildId, Coded, ErrorCode, RunId};

fn main() {
    let first = RunId::generate();
    let mut child = AnyChild::spawn(ChildId::generate(), first, "go".to_owned(), 2);
    assert_eq!(child.followup(RunId::generate(), "next".to_owned()), Ok(Delivery::Queued { position: 1 }));

    // SAFETY: test; stands for a worker whose hello did not advertise steering.
    let capabilities = unsafe { Supervisor::designate() }.capabilities(false);
    let refused = child.steer(&capabilities);
    assert_eq!(refused.map_err(|e| e.code()), Err(ErrorCode::UnsupportedSteer));
    let stale = child.stop(RunId::generate());
    assert_eq!(stale.map_err(|e| e.code()), Err(ErrorCode::StaleRun));

    let reloaded = AnyChild::load(child.record()).unwrap();
    let typed: Child<Running> = Child::try_from(reloaded).unwrap();
    assert_eq!(typed.active_run().id(), first);
}
