// Rule: a run whose stop was requested can no longer be steered.
use subzero_ui_tests::{steering, stopping};

fn main() {
    let child = stopping();
    let _run = child.steer(steering());
}
