// Rule: a stop is confirmed only on a stopping child; a ready child has nothing to stop.
use subzero_core::{ChildId, RunId};
use subzero_ui_tests::{ready, supervisor};

fn main() {
    let child = ready();
    let proof = supervisor().confirm_stop(ChildId::generate(), RunId::generate(), 0);
    let _ = child.confirm_stop(proof);
}
