// Rule: an interrupted child takes no stop confirmation; its run was interrupted, not
// stopped.
use subzero_core::{ChildId, RunId};
use subzero_ui_tests::{interrupted, supervisor};

fn main() {
    let child = interrupted();
    let proof = supervisor().confirm_stop(ChildId::generate(), RunId::generate(), 0);
    let _ = child.confirm_stop(proof);
}
