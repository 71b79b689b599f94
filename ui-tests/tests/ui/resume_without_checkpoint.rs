// Rule: resume requires a Checkpoint, obtained by verifying the recorded completed leaf.
use subzero_ui_tests::interrupted;

fn main() {
    let child = interrupted();
    let _ = child.resume();
}
