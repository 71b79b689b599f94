// Rule: an interrupted child has no run to steer.
use subzero_ui_tests::{interrupted, steering};

fn main() {
    let child = interrupted();
    let _run = child.steer(steering());
}
