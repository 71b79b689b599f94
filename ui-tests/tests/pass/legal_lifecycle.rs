// The legal lifecycle, end to end, in types: spawn, queue a follow-up, steer, complete
// with a recorded leaf (the queued run dispatches), stop with the active run id, confirm,
// start again while idle, lose the worker, verify a checkpoint against the leaf observed in
// the transcript, resume with a message.
use subzero_core::lifecycle::child::Next;
use subzero_core::lifecycle::{Child, LeafRef, Supervisor};
use subzero_core::{ChildId, RunId, Sha256Digest};

pub fn main() {
    // The tokens stand for worker reports and a transcript read it scripts; the authority
    // is taken once per process.
    let supervisor = Supervisor::take().unwrap();
    assert!(
        Supervisor::take().is_none(),
        "the authority exists once per process"
    );
    let child_id = ChildId::generate();
    let first = RunId::generate();
    let child = Child::spawn(child_id, first, "survey the repo".to_owned(), 4);

    let Ok((child, position)) = child.followup(RunId::generate(), "then summarize".to_owned())
    else {
        return;
    };
    assert_eq!(position, 1);

    if let Some(steering) = supervisor.capabilities(true).steering() {
        assert_eq!(child.steer(steering), first);
    }

    let leaf = LeafRef::new("entry-7", Sha256Digest::of(b"transcript")).unwrap();
    let proof = supervisor.leaf_recorded(child_id, first, leaf.clone());
    let Ok(settled) = child.complete(proof) else {
        return;
    };
    assert_eq!(settled.outcome.leaf(), &leaf);
    let Next::Started(child) = settled.next else {
        return;
    };

    let second = child.active_run().id();
    let Ok(accepted) = child.stop(second) else {
        return;
    };
    let stopping = accepted.child;
    let confirmation = supervisor.confirm_stop(child_id, second, 2);
    let Ok(settled) = stopping.confirm_stop(confirmation) else {
        return;
    };
    assert_eq!(settled.outcome.reaped(), Some(2));
    let Next::Idle(ready) = settled.next else {
        return;
    };

    let running = ready.followup(RunId::generate(), "one more thing".to_owned());
    let lost = running.lose_worker("worker exited without confirmation");
    let interrupted = lost.child;

    let observed = supervisor.observed_leaf(child_id, leaf.clone());
    let Ok(checkpoint) = interrupted.checkpoint(Some(&observed)) else {
        return;
    };
    let Ok(resumed) = interrupted.resume_with(checkpoint, RunId::generate(), "continue".to_owned())
    else {
        return;
    };
    assert_eq!(resumed.last_leaf(), Some(&leaf));
}
