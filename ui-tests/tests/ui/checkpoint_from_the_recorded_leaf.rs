// Rule: a child's recorded leaf is not evidence of what its transcript holds; checking
// a child needs the leaf observed in the transcript.
use subzero_ui_tests::interrupted;

fn main() {
    let child = interrupted();
    let _ = child.checkpoint(child.last_leaf());
}
