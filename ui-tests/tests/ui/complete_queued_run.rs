// Rule: only a running run can complete; a queued run has not started.
use subzero_ui_tests::{queued_run, supervisor};
use subzero_core::lifecycle::LeafRef;
use subzero_core::Sha256Digest;

fn main() {
    let run = queued_run();
    let leaf = LeafRef::new("leaf-1", Sha256Digest::of(b"t")).unwrap();
    let proof = supervisor().leaf_recorded(run.child(), run.id(), leaf);
    let _ = run.complete(proof);
}
