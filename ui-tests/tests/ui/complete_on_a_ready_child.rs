// Rule: only a child with an active run completes one; a ready child has none.
use subzero_ui_tests::{leaf_recorded, ready, running};

fn main() {
    let proof = leaf_recorded(&running());
    let child = ready();
    let _ = child.complete(proof);
}
