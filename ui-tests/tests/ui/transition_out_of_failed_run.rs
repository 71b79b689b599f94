// Rule: no transition leaves a failed run; nothing is retried.
use subzero_ui_tests::{failed_run, leaf_recorded, running};

fn main() {
    let proof = leaf_recorded(&running());
    let failed = failed_run();
    let _ = failed.complete(proof);
}
