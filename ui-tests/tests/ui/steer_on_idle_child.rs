// Rule: steer exists only on a running child; an idle (ready) child has no run to steer.
use subzero_ui_tests::{ready, steering};

fn main() {
    let child = ready();
    let _run = child.steer(steering());
}
