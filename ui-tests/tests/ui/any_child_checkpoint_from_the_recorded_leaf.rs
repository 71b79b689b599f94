// Rule: at the storage boundary too, a checkpoint needs the leaf observed in the
// transcript, not the leaf the stored record names.
use subzero_core::lifecycle::AnyChild;
use subzero_ui_tests::interrupted;

fn main() {
    let child = AnyChild::from(interrupted());
    let _ = child.checkpoint(child.last_leaf());
}
