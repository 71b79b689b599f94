// Rule: a Checkpoint cannot be made from a leaf id string; only verification makes one.
use subzero_core::lifecycle::Checkpoint;
use subzero_ui_tests::interrupted;

fn main() {
    let child = interrupted();
    let checkpoint: Checkpoint = "leaf-1".into();
    let _ = child.resume(checkpoint);
}
