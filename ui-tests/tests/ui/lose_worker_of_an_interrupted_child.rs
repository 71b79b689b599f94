// Rule: an interrupted child already lost its worker; nothing more is interrupted.
use subzero_ui_tests::interrupted;

fn main() {
    let child = interrupted();
    let _ = child.lose_worker("the worker exited");
}
