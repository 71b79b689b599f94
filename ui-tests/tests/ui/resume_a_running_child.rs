// Rule: resume applies to a ready or interrupted child; a running child must settle first.
use subzero_ui_tests::running;

fn main() {
    let child = running();
    let checkpoint = child.checkpoint(None).unwrap();
    let _ = child.resume(checkpoint);
}
