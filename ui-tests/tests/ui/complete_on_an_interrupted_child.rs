// Rule: an interrupted child takes no run report; its run ended without a result.
use subzero_ui_tests::{interrupted, leaf_recorded, running};

fn main() {
    let proof = leaf_recorded(&running());
    let child = interrupted();
    let _ = child.complete(proof);
}
