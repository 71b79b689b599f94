// Rule: a ready child has no worker to lose; only a child with an active run is
// interrupted.
use subzero_ui_tests::ready;

fn main() {
    let child = ready();
    let _ = child.lose_worker("the worker exited");
}
