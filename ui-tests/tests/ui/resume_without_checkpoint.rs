// Rule: resume requires a Checkpoint, obtained by verifying the recorded completed leaf;
// none can be made up.
use subzero_ui_tests::interrupted;

fn main() {
    let child = interrupted();
    let _ = child.resume(Default::default());
}
