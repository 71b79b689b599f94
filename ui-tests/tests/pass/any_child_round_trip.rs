// The storage boundary: an AnyChild loads from plain data with the store's key,
// dispatches requests to the typed transitions, returns typed errors for illegal ones,
// and goes up with TryFrom; a request on a loaded child returns the whole decision.
use subzero_core::lifecycle::any::Delivery;
use subzero_core::lifecycle::child::Running;
use subzero_core::lifecycle::{
    AnyChild, Child, CustodyRecord, Loaded, NamedRun, StorageKey, StoredChild, Supervisor,
};
use subzero_core::{ChildId, Coded, ErrorCode, Ownership, Phase, RunId, RunStatus};

pub fn main() {
    let first = RunId::generate();
    let mut child = AnyChild::spawn(ChildId::generate(), first, "go".to_owned(), 2);
    assert_eq!(
        child.followup(RunId::generate(), "next".to_owned()),
        Ok(Delivery::Queued { position: 1 })
    );

    // Stands for a worker whose hello did not advertise steering.
    let supervisor = Supervisor::take().unwrap();
    let capabilities = supervisor.capabilities(false);
    let refused = child.steer(&capabilities);
    assert_eq!(
        refused.map_err(|e| e.code()),
        Err(ErrorCode::UnsupportedSteer)
    );
    let stale = child.stop(RunId::generate());
    assert_eq!(stale.map_err(|e| e.code()), Err(ErrorCode::StaleRun));

    // The records below stand for what a store holds; this process takes the key once.
    let key = StorageKey::take().unwrap();
    assert!(
        StorageKey::take().is_none(),
        "the key exists once per process"
    );
    let reloaded = AnyChild::load(child.record(), &key).unwrap();
    let typed: Child<Running> = Child::try_from(reloaded).unwrap();
    assert_eq!(typed.active_run().id(), first);

    let stored = StoredChild {
        record: child.record(),
        custody: CustodyRecord {
            ownership: Ownership::Owned,
            owner: Some("bk_A".to_owned()),
            generation: 1,
        },
        phase: Phase::Model,
        version: 1,
    };
    let decided = Loaded::load(stored, &key)
        .unwrap()
        .stop(first, NamedRun::OfThisChild, "bk_A")
        .unwrap();
    let moved: Vec<_> = decided.moves().iter().map(|m| (m.from(), m.to())).collect();
    assert_eq!(
        moved,
        [
            (RunStatus::Running, RunStatus::StopRequested),
            (RunStatus::Queued, RunStatus::Stopped)
        ]
    );
}
